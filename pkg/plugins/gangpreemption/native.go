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
	"github.com/hypernode-dev/hypernode-scheduler/pkg/metrics"
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
func (pl *GangPreemption) PodGroupPostFilter(ctx context.Context, state fwk.PodGroupCycleState, pgi fwk.PodGroupInfo, _ fwk.PodGroupSchedulingFunc) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	result, status := pl.podGroupPostFilter(ctx, pgi)
	if status.Code() == fwk.Unschedulable && gangstate.NoPlacementMark.In(state) {
		// No member ran PreFilter in this cycle: the PodGroupPostFilter plugins after this one
		// fail on the state their PreFilter never wrote (DynamicResources': "not found", in
		// the members' condition). This decision ends the chain.
		status = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, status.Reasons()...)
	}
	return result, status
}

func (pl *GangPreemption) podGroupPostFilter(ctx context.Context, pgi fwk.PodGroupInfo) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	n := networktopology.NativeOf(pgi)
	pending := pgi.GetUnscheduledPods()
	if len(pending) == 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s has no pending members", n))
	}
	if nominations, msg, ok := pl.nativeUnderWay(pgi.GetKey(), n); ok {
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
	nominations := map[types.NamespacedName]*fwk.NominatingInfo{}
	for _, m := range su.gang.Pending {
		if node, ok := c.assign[m.Pod.Name]; ok {
			nominations[types.NamespacedName{Namespace: m.Pod.Namespace, Name: m.Pod.Name}] = &fwk.NominatingInfo{NominatedNodeName: node, NominatingMode: fwk.ModeOverride}
		}
	}
	if len(c.victims) == 0 {
		// The room is there once pods already terminating are gone (evicted for the group
		// before a restart, or finishing): the members hold it by their nominations.
		return &fwk.PodGroupPostFilterResult{NominatingInfos: nominations}, fwk.NewStatus(fwk.Success,
			fmt.Sprintf("%s fits in %s once pods that terminate there are gone", n, c.domain.name))
	}
	victims, names := victimPods(c)
	grace := int64(0)
	for _, v := range victims {
		grace = max(grace, gracePeriod(v))
	}
	a := &nativeAttempt{victims: victims, nominations: nominations, domain: c.domain.name,
		deadline: time.Now().Add(time.Duration(grace)*time.Second + victimSlack)}
	pl.nativesMu.Lock()
	if pl.natives == nil {
		pl.natives = map[string]*nativeAttempt{}
	}
	pl.natives[pgi.GetKey()] = a
	pl.nativesMu.Unlock()
	schedmetrics.PreemptionVictims.Observe(float64(len(victims)))
	msg := fmt.Sprintf("%s: evicting %d pod(s) of lower priority in %s so that %d members fit: %s",
		n, len(victims), c.domain.name, d.need, strings.Join(shorten(names, 5), ", "))
	if len(d.notChosen) > 0 {
		msg += "; not chosen: " + strings.Join(d.notChosen, "; ")
	}
	pl.events.RecordNative(pg, v1.EventTypeNormal, EventGangPreempting, msg)
	logger.V(2).Info("Gang preempting", "podGroup", n.Key, "native", true, "domain", c.domain.name, "victims", len(victims), "highestVictimPriority", c.highest, "need", d.need,
		"decision", time.Since(start))
	pl.evicting.Add(1)
	go pl.evictForNative(logger, pg, n, a, &gangPreemptor{pod: pod, priority: gangPriority(pod, su.gang)})
	return &fwk.PodGroupPostFilterResult{NominatingInfos: nominations}, fwk.NewStatus(fwk.Success, msg)
}

// nativeAttempt is a native pod group's preemption: its victims, the members' nominations,
// and until when the group waits for the victims (their longest grace period and slack).
type nativeAttempt struct {
	victims     []*v1.Pod
	nominations map[types.NamespacedName]*fwk.NominatingInfo
	domain      string
	deadline    time.Time
	// failed is set when an eviction failed: the group decides again.
	failed bool
}

// nativeUnderWay returns the nominations of a native group's preemption whose victims still
// terminate; a preemption whose victims are gone, that failed or whose deadline passed is
// forgotten (the group decides again).
func (pl *GangPreemption) nativeUnderWay(key string, n podgroup.Native) (map[types.NamespacedName]*fwk.NominatingInfo, string, bool) {
	pl.nativesMu.Lock()
	defer pl.nativesMu.Unlock()
	now := time.Now()
	for k, a := range pl.natives {
		if now.After(a.deadline) {
			delete(pl.natives, k)
		}
	}
	a := pl.natives[key]
	if a == nil {
		return nil, "", false
	}
	left := 0
	for _, v := range a.victims {
		if current, err := pl.pods.Pods(v.Namespace).Get(v.Name); err == nil && current.UID == v.UID {
			left++
		}
	}
	if left == 0 || a.failed {
		delete(pl.natives, key)
		return nil, "", false
	}
	return a.nominations, fmt.Sprintf("%s waits for %d of the %d pods evicted for it in %s to terminate", n, left, len(a.victims), a.domain), true
}

// evictForNative evicts a native group's victims; the first failure stops the rest, marks
// the attempt failed (the group decides again, without that victim for refusalMemory) and
// says so in an Event.
func (pl *GangPreemption) evictForNative(logger klog.Logger, pg *schedulingv1beta1.PodGroup, n podgroup.Native, a *nativeAttempt, preemptor *gangPreemptor) {
	defer pl.evicting.Done()
	start := time.Now()
	for i, v := range a.victims {
		if v.DeletionTimestamp != nil {
			continue // leaving already
		}
		if _, err := pl.evictPod(pl.ctx, preemptor, v); err != nil {
			if pl.ctx.Err() != nil {
				metrics.ObserveGangPreemptionEviction(metrics.ResultStopped, time.Since(start))
				return
			}
			metrics.ObserveGangPreemptionEviction(metrics.ResultFailed, time.Since(start))
			pl.refusedMu.Lock()
			pl.refused[v.UID] = time.Now().Add(refusalMemory)
			pl.refusedMu.Unlock()
			pl.nativesMu.Lock()
			a.failed = true
			pl.nativesMu.Unlock()
			msg := fmt.Sprintf("%s: evicting %s/%s in %s failed: %v; %d of the %d pods chosen were evicted; the group decides again, and %s/%s is not chosen again for %v",
				n, v.Namespace, v.Name, a.domain, err, i, len(a.victims), v.Namespace, v.Name, refusalMemory)
			pl.events.RecordNative(pg, v1.EventTypeWarning, EventGangPreemptionFailed, msg)
			logger.Error(err, "Gang preemption could not evict a victim", "podGroup", n.Key, "native", true, "victim", klog.KObj(v))
			return
		}
	}
	metrics.ObserveGangPreemptionEviction(metrics.ResultEvicted, time.Since(start))
	logger.V(2).Info("Gang preemption evicted its victims", "podGroup", n.Key, "native", true, "victims", len(a.victims), "eviction", time.Since(start))
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
