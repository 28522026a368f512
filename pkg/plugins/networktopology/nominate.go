package networktopology

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// A plan holds its members' slots through kube-scheduler's nominator: every planned member
// that has not reserved yet is nominated, in memory, on the node the plan chose for it. Every
// Filter run of the scheduler (RunFilterPluginsWithNominatedPods) then counts the member on
// that node for any pod of lower or equal priority: plain pods, plain gangs and the capacity
// simulations of other gangs see exactly the resources the plan promised, node by node, in
// the member's real requests. A pod of higher priority does not (as for preemption's
// nominations); the planned member then fails, and PostFilter moves it to a free node of its
// domain (relocate.go) or its gang plans again.
//
// The nominations live in memory only, except a relocated member's, which the scheduler also
// writes to status.nominatedNodeName. The nominator follows that field on every update of the
// pod, so a member whose field names another node than its plan would drift back to it: the
// field is corrected (or cleared when the plan goes) by nominatedNames, asynchronously.

// nominee is a withdrawn nomination; inAPI says the pod's status may name the node too.
type nominee struct {
	pod   *v1.Pod
	inAPI bool
}

// nominate nominates the plan's planned members (pods by name) on their nodes and records
// them in the plan, so that dropping the plan withdraws the nominations.
func (p *NetworkTopologyAware) nominate(logger klog.Logger, plan *gangPlan, nodes map[string]string, pods map[string]*v1.Pod) {
	nominated := make(map[string]*v1.Pod, len(nodes))
	for name, node := range nodes {
		pod := pods[name]
		if pod == nil || node == "" {
			continue
		}
		pi, err := framework.NewPodInfo(pod)
		if err != nil {
			logger.V(4).Info("Could not nominate a planned gang member", "pod", klog.KObj(pod), "err", err)
			continue
		}
		p.handle.AddNominatedPod(logger, pi, &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: node})
		nominated[name] = pod
		if nnn := pod.Status.NominatedNodeName; nnn != "" && nnn != node {
			p.nominatedNames.Set(pod, node)
		}
	}
	p.mu.Lock()
	plan.nominated = nominated
	p.mu.Unlock()
}

// withdrawLocked takes the plan's open nominations out of it; the caller withdraws them with
// withdraw once it released p.mu (the nominator has its own lock).
func (plan *gangPlan) withdrawLocked() []nominee {
	if plan == nil || len(plan.nominated) == 0 {
		return nil
	}
	out := make([]nominee, 0, len(plan.nominated))
	for name, pod := range plan.nominated {
		out = append(out, nominee{pod: pod, inAPI: plan.relocated.Has(name) || pod.Status.NominatedNodeName != ""})
	}
	plan.nominated = nil
	return out
}

// withdraw removes nominations from the nominator, and from the pods' status where the API
// has them.
func (p *NetworkTopologyAware) withdraw(nominees []nominee) {
	for _, n := range nominees {
		p.handle.DeleteNominatedPodIfExists(n.pod)
		if n.inAPI {
			p.nominatedNames.Set(n.pod, "")
		}
	}
}

// nominatedNodeNameUpdate corrects a pending member's status.nominatedNodeName to its plan's
// node ("" clears it). A pod whose status names no node is left alone: the scheduler's memory
// then keeps the plan's nomination, and writing one per planned member would cost an API
// call per member.
func nominatedNodeNameUpdate(pod *v1.Pod, node string) *v1.PodStatus {
	if pod.Status.NominatedNodeName == "" || pod.Status.NominatedNodeName == node {
		return nil
	}
	status := pod.Status.DeepCopy()
	status.NominatedNodeName = node
	return status
}
