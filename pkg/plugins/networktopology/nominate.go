package networktopology

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podstatus"
)

// A plan holds its members' slots through kube-scheduler's nominator: every planned member
// that has not reserved yet is nominated, in memory, on the node the plan chose for it. Every
// Filter run of the scheduler (RunFilterPluginsWithNominatedPods) then counts the member on
// that node for any pod of lower or equal priority: plain pods, plain gangs and the capacity
// simulations of other gangs see exactly the resources the plan promised, node by node, in
// the member's real requests. A pod of higher priority does not (as for preemption's
// nominations); the planned member then fails, and PostFilter moves it to a free node of its
// domain (relocate.go) or its gang plans again. The nominations live in memory only: a
// failed attempt of a member makes the scheduler drop the member's nomination, so a relocated
// member is nominated again once the scheduler is done with the attempt (renominate).

// nominate nominates the plan's planned members (pods by name) on their nodes and records
// them in the plan, so that dropping the plan withdraws the nominations.
func (p *NetworkTopologyAware) nominate(logger klog.Logger, plan *gangstate.Plan, nodes map[string]string, pods map[string]*v1.Pod) {
	nominated := make(map[string]*v1.Pod, len(nodes))
	for name, node := range nodes {
		pod := pods[name]
		if pod == nil || node == "" {
			continue
		}
		if p.nominateOn(logger, pod, node) {
			nominated[name] = pod
		}
	}
	p.gangs.Lock()
	plan.Nominated = nominated
	p.gangs.Unlock()
}

// nominateOn nominates one planned member on its node, in memory. A member whose
// status.nominatedNodeName names another node (GangPreemption's, written for the member it
// preempted in) gets the field rewritten: kube-scheduler resets the in-memory nomination to
// that field on every update of the pod, so it must not name a node the plan does not hold.
func (p *NetworkTopologyAware) nominateOn(logger klog.Logger, pod *v1.Pod, node string) bool {
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		logger.V(4).Info("Could not nominate a planned gang member", "pod", klog.KObj(pod), "node", node, "err", err)
		return false
	}
	p.handle.AddNominatedPod(logger, pi, &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: node})
	if nominated := pod.Status.NominatedNodeName; nominated != "" && nominated != node && p.nominations != nil {
		p.nominations.Set(pod, node)
	}
	return true
}

// nominationUpdate rewrites a status.nominatedNodeName that names another node than the
// planned one; it never adds one (a write per member would cost a large gang dearly). A
// nomination a running gang preemption holds is left alone: this write, queued before the
// preemption wrote its own, may land after it.
func (p *NetworkTopologyAware) nominationUpdate(pod *v1.Pod, node string) *v1.PodStatus {
	if pod.Status.NominatedNodeName == "" {
		return nil
	}
	if _, held := p.gangs.NominationHeld(pod); held {
		return nil
	}
	return podstatus.SetNominatedNode(pod, node)
}

// withdrawLocked takes the plan's open nominations out of it, and its relocations not
// nominated again; the caller withdraws the nominations with withdraw once it released the gangs' lock
// (the nominator has its own lock).
func (p *NetworkTopologyAware) withdrawLocked(plan *gangstate.Plan) []*v1.Pod {
	if plan == nil {
		return nil
	}
	p.relocations.Add(-int64(len(plan.Relocated)))
	clear(plan.Relocated)
	if len(plan.Nominated) == 0 {
		return nil
	}
	out := make([]*v1.Pod, 0, len(plan.Nominated))
	for _, pod := range plan.Nominated {
		out = append(out, pod)
	}
	plan.Nominated = nil
	return out
}

// withdraw removes nominations from the nominator, and clears a written
// status.nominatedNodeName (kube-scheduler would restore the nomination from it on the pod's
// next update).
func (p *NetworkTopologyAware) withdraw(pods []*v1.Pod) {
	for _, pod := range pods {
		p.handle.DeleteNominatedPodIfExists(pod)
		if p.nominations != nil && (pod.Status.NominatedNodeName != "" || p.nominationPending(pod)) {
			p.nominations.Set(pod, "")
		}
	}
}

// nominationPending reports whether a rewrite of the pod's status.nominatedNodeName waits to
// be written.
func (p *NetworkTopologyAware) nominationPending(pod *v1.Pod) bool {
	wish, ok := p.nominations.Pending(pod.Namespace, pod.Name)
	return ok && wish != ""
}
