package gangpreemption

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/networktopology"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

var _ fwk.PodGroupPostFilterPlugin = &GangPreemption{}

// PodGroupPostFilter preempts for a native (scheduling.k8s.io) pod group that failed its
// pod-group cycle, with the decision the classic path makes (decideFor): victims inside one
// allowed domain only, a running gang evicted whole, the fewest PodDisruptionBudget
// violations, lowest tier first. The members are nominated on the nodes the choice gives
// them, through the result; the framework retries the group once the victims are gone. Where
// no domain helps it says why and evicts nothing.
func (pl *GangPreemption) PodGroupPostFilter(ctx context.Context, _ fwk.PodGroupCycleState, pgi fwk.PodGroupInfo, _ fwk.PodGroupSchedulingFunc) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	n := networktopology.NativeOf(pgi)
	pending := pgi.GetUnscheduledPods()
	if len(pending) == 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s has no pending members", n))
	}
	key := podgroup.NativeKey(n.Key)
	if nominations, msg, ok := pl.nativeUnderWay(key); ok {
		// The victims still terminate: the members keep their nominations.
		return &fwk.PodGroupPostFilterResult{NominatingInfos: nominations}, fwk.NewStatus(fwk.Success, msg)
	}
	if never(pgi, pending) {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s does not preempt (preemptionPolicy: Never)", n))
	}
	su, why := pl.setUpNative(pgi, n, pending)
	if su == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, why)
	}
	schedmetrics.PreemptionAttempts.Inc()
	start := time.Now()
	pod := su.gang.Pending[0].Pod
	state, status := networktopology.SimulationState(ctx, pl.handle, pl.devices, pod)
	if !status.IsSuccess() {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: %s", n, status.Message()))
	}
	d, status := pl.decideFor(ctx, state, pod, su)
	if status != nil {
		return nil, status
	}
	pg := pgi.GetPodGroup()
	if d.best == nil {
		pl.events.RecordNative(pg, v1.EventTypeWarning, EventPreemptionNotHelpful, d.refusal)
		logger.V(2).Info("Gang preemption cannot help", "podGroup", n.Key, "native", true, "need", d.need, "duration", time.Since(start))
		return nil, fwk.NewStatus(fwk.Unschedulable, d.refusal)
	}
	c := d.best
	if len(c.victims) == 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s fits in %s without evicting anyone; it is retried", n, c.domain.name))
	}
	victims, names := victimPods(c)
	nodes := make(map[types.UID]string, len(c.assign))
	var members []*v1.Pod
	nominations := map[types.NamespacedName]*fwk.NominatingInfo{}
	for _, m := range su.gang.Pending {
		if node, ok := c.assign[m.Pod.Name]; ok {
			members = append(members, m.Pod)
			nodes[m.Pod.UID] = node
			nominations[types.NamespacedName{Namespace: m.Pod.Namespace, Name: m.Pod.Name}] = &fwk.NominatingInfo{NominatedNodeName: node, NominatingMode: fwk.ModeOverride}
		}
	}
	a := &gangstate.Preemption{Domain: c.domain.name, Victims: victims, Members: members, Nodes: nodes}
	pl.gangs.Lock()
	pl.startLocked(logger, key, a)
	pl.gangs.MarkResumedLocked(key)
	pl.gangs.Unlock()
	schedmetrics.PreemptionVictims.Observe(float64(len(victims)))
	msg := fmt.Sprintf("%s: evicting %d pod(s) of lower priority in %s so that %d members fit: %s",
		n, len(victims), c.domain.name, d.need, strings.Join(shorten(names, 5), ", "))
	if len(d.notChosen) > 0 {
		msg += "; not chosen: " + strings.Join(d.notChosen, "; ")
	}
	pl.events.RecordNative(pg, v1.EventTypeNormal, EventGangPreempting, msg)
	logger.V(2).Info("Gang preempting", "podGroup", n.Key, "native", true, "domain", c.domain.name, "victims", len(victims), "highestVictimPriority", c.highest, "need", d.need,
		"decision", time.Since(start))
	pl.startEvictions(logger, nil, key, a, &gangPreemptor{pod: pod, priority: gangPriority(pod, su.gang)})
	return &fwk.PodGroupPostFilterResult{NominatingInfos: nominations}, fwk.NewStatus(fwk.Success, msg)
}

// nativeUnderWay returns the nominations of a native group's preemption whose victims still
// terminate.
func (pl *GangPreemption) nativeUnderWay(key podgroup.Key) (map[types.NamespacedName]*fwk.NominatingInfo, string, bool) {
	pl.gangs.Lock()
	defer pl.gangs.Unlock()
	a, draining := pl.gangs.PreemptionLocked(key)
	if a == nil || draining {
		return nil, "", false
	}
	out := make(map[types.NamespacedName]*fwk.NominatingInfo, len(a.Members))
	for _, m := range a.Members {
		out[types.NamespacedName{Namespace: m.Namespace, Name: m.Name}] = &fwk.NominatingInfo{NominatedNodeName: a.Nodes[m.UID], NominatingMode: fwk.ModeOverride}
	}
	return out, waitingMsg(key, a), true
}

// never reports whether the group does not preempt: its preemptionPolicy (or its first
// member's, without one) is Never.
func never(pgi fwk.PodGroupInfo, pending []*v1.Pod) bool {
	if pg := pgi.GetPodGroup(); pg != nil && pg.Spec.PreemptionPolicy != nil {
		return *pg.Spec.PreemptionPolicy == schedulingv1beta1.PreemptNever
	}
	p := pending[0].Spec.PreemptionPolicy
	return p != nil && *p == v1.PreemptNever
}

// setUpNative is setUp for a native pod group: its members from the framework (pending) and
// the snapshot (scheduled); the gang needs its minCount (all its pending members for the
// basic policy).
func (pl *GangPreemption) setUpNative(pgi fwk.PodGroupInfo, n podgroup.Native, pending []*v1.Pod) (*setup, string) {
	placed, err := networktopology.ScheduledMembers(pl.handle, pgi)
	if err != nil {
		return nil, fmt.Sprintf("%s: %v", n, err)
	}
	gang := podgroup.NativeGang(n, append(append([]*v1.Pod(nil), placed...), pending...), pl.registry.DefaultTopology())
	if err := errors.Join(gang.Info.TopologyErr, gang.Info.SubGroupErr); err != nil {
		return nil, fmt.Sprintf("%s has an invalid constraint: %v", n, err)
	}
	need := len(gang.Pending)
	if n.MinCount > 0 {
		need = min(need, n.MinCount-len(gang.Placed))
	}
	if need <= 0 {
		return nil, fmt.Sprintf("%s has minCount members placed; nothing to preempt for", n)
	}
	list, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, fmt.Sprintf("%s: listing nodes: %v", n, err)
	}
	tree := pl.cache.Snapshot()
	tiers, err := pl.domains(tree, gang, list)
	if err != nil {
		return nil, fmt.Sprintf("%s: %v", n, err)
	}
	return &setup{gang: gang, need: need, list: list, tree: tree, tiers: tiers, native: true}, ""
}
