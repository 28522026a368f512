package gangpreemption

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/composition"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// When the informer has shown every victim deleted, kube-scheduler's cache, fed by another
// handler of the same informer, may still hold some. A member scheduled on that snapshot
// fails on its freed node, Gang's PostFilter releases the members that reserved theirs, the
// release drops their nominations, and a pod of lower priority takes the room. So after its
// attempt a gang drains: each member's PreFilter compares the attempt's victims with the
// cycle's snapshot and is refused while any is still there (Unresolvable: PreFilter may not
// return Pending, and nothing is to be preempted for it); the victim's deletion in the cache
// (the AssignedPod/Delete event, which kube-scheduler sends after updating its cache)
// requeues it.

const heldStateKey fwk.StateKey = Name + "/held"

// heldState tells PostFilter that PreFilter refused the member while its gang's
// preemption was under way (terminating: its victims still terminated; otherwise it waited
// for the cache), and the node the gang's attempt nominated it on. The PreFilter plugins
// after a refusal did not run, so PostFilter must not decide a preemption on this state.
type heldState struct {
	node        string
	terminating bool
}

func (d *heldState) Clone() fwk.StateData { return d }

// drainingMsg is PostFilter's message for a member of a draining gang.
func drainingMsg(node string) string {
	if node == "" {
		return "nothing more to evict"
	}
	return "nothing more to evict; the member keeps its nominated node " + node
}

func readHeld(state fwk.CycleState) *heldState {
	if state == nil {
		return nil
	}
	d, err := state.Read(heldStateKey)
	if err != nil {
		return nil
	}
	s, _ := d.(*heldState)
	return s
}

// armDrainLocked bounds the drain of a preemption whose victims were all seen deleted: it ends
// at the latest after drainSlack (a victim rejected in memory may be placed again on its node,
// under the same UID); then the gang is activated as when nothing drains. The gangs' lock
// must be held.
func (pl *GangPreemption) armDrainLocked(logger klog.Logger, key podgroup.Key, a *gangstate.Preemption) {
	limit := drainSlack
	a.DrainDeadline = time.AfterFunc(limit, func() {
		pl.gangs.Lock()
		expired := false
		if current, draining := pl.gangs.PreemptionLocked(key); current == a && draining {
			expired = pl.gangs.StopDrainingLocked(key)
		}
		pl.gangs.Unlock()
		if expired {
			n := pl.gangs.ActivatePending(logger, pl.handle, key)
			logger.Info("The scheduler's cache still held victims of a gang preemption after the drain's time limit; the gang is retried", "podGroup", key, "limit", limit, "membersActivated", n)
			pl.gangs.PreemptionEnded(key)
		}
	})
}

// drainSlack bounds how long a gang waits for the scheduler's cache to drop its victims: the
// cache normally follows the informer within milliseconds. A variable for the tests.
var drainSlack = 30 * time.Second

// PreFilter refuses a member of a gang whose victims still terminate (a member queued before
// the preemption began: it would plan, and fail, once per victim gone, and each failure
// lengthens the plan's back-off), and one of a draining gang while this cycle's snapshot
// still holds one of the victims. Every other pod skips it: no lock unless some gang
// preempts.
func (pl *GangPreemption) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	pl.beginScheduling()
	if !pl.gangs.PreemptionsUnderWay() {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	pl.gangs.Lock()
	a, draining := pl.gangs.PreemptionLocked(key)
	if a == nil {
		pl.gangs.Unlock()
		return nil, fwk.NewStatus(fwk.Skip)
	}
	node := a.Nodes[pod.UID]
	if !draining {
		msg := waitingMsg(key, a)
		pl.gangs.Unlock()
		state.Write(heldStateKey, &heldState{node: node, terminating: true})
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	// A snapshot without a victim proves the cache dropped it, and takes it out of the set the
	// hint requeues by (which only shrinks: an older snapshot must not bring back what a later
	// deletion event took out). The member itself is refused while its own snapshot holds any:
	// a cycle that started before the event still sees the victim.
	nodeInfos := pl.handle.SnapshotSharedLister().NodeInfos()
	held := 0
	for _, v := range a.Victims {
		if holds(nodeInfos, v) {
			held++
		} else {
			a.Cached.Delete(v.UID)
		}
	}
	if held == 0 {
		// The claim controller releases the victims' devices after their pods are gone.
		unreleased, err := devices.Unreleased(pl.handle.SharedDRAManager(), a.Victims)
		if err != nil || unreleased > 0 {
			pl.gangs.Unlock()
			state.Write(heldStateKey, &heldState{node: node})
			msg := fmt.Sprintf("gang %s: %d ResourceClaims of the pods evicted for it in %s still hold their devices; the gang is retried when they are released", key, unreleased, a.Domain)
			if err != nil {
				msg = fmt.Sprintf("gang %s: cannot tell whether the devices of the pods evicted for it in %s are released: %v", key, a.Domain, err)
			}
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
		}
		pl.gangs.StopDrainingLocked(key)
	}
	pl.gangs.Unlock()
	if held == 0 {
		klog.FromContext(ctx).V(4).Info("Gang preemption's victims are gone from the scheduler's cache", "podGroup", key)
		pl.gangs.PreemptionEnded(key)
		return nil, fwk.NewStatus(fwk.Skip)
	}
	state.Write(heldStateKey, &heldState{node: node})
	return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
		"gang %s: %d of the %d pods evicted for it in %s are deleted but still counted by the scheduler; the gang is retried when they are not",
		key, held, len(a.Victims), a.Domain))
}

// holds reports whether the snapshot still has the pod on its node.
func holds(nodeInfos fwk.NodeInfoLister, p *v1.Pod) bool {
	ni, err := nodeInfos.Get(p.Spec.NodeName)
	if err != nil {
		return false
	}
	for _, pi := range ni.GetPods() {
		if pi.GetPod().UID == p.UID {
			return true
		}
	}
	return false
}

// PreFilterExtensions returns nil: the plugin keeps no per-node state.
func (pl *GangPreemption) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// EventsToRegister: a deleted pod ends the wait of a member held back by PreEnqueue or
// PreFilter. kube-scheduler calls the hint after its cache has dropped the pod.
func (pl *GangPreemption) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	if err := composition.Check(pl.handle); err != nil {
		return nil, err // an unsafe profile: the scheduler does not start
	}
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: pl.isSchedulableAfterPodDeleted},
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Update | fwk.Delete}, QueueingHintFn: pl.isSchedulableAfterClaimReleased},
	}, nil
}

// isSchedulableAfterClaimReleased requeues a member of a draining gang whose victims are all
// gone from the cache when a claim is released: PreFilter then looks whether every device
// the victims held is free.
func (pl *GangPreemption) isSchedulableAfterClaimReleased(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	old, err := devices.ReleasedClaim(oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if old == nil {
		return fwk.QueueSkip, nil
	}
	pl.gangs.Lock()
	defer pl.gangs.Unlock()
	if a, draining := pl.gangs.PreemptionLocked(key); a == nil || !draining || a.Cached.Len() > 0 {
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("Gang member requeued: a claim was released while its preemption drains", "pod", klog.KObj(pod), "podGroup", key, "claim", klog.KObj(old))
	return fwk.Queue, nil
}

// isSchedulableAfterPodDeleted requeues a member when its gang no longer waits for anything:
// no attempt running (its end activates the gang itself) and no victim left in the cache. A
// pod without a gang is DefaultPreemption's: its other rejecting plugins decide.
func (pl *GangPreemption) isSchedulableAfterPodDeleted(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	deleted, _, err := util.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	pl.gangs.Lock()
	defer pl.gangs.Unlock()
	a, draining := pl.gangs.PreemptionLocked(key)
	if a != nil && !draining {
		return fwk.QueueSkip, nil
	}
	if a != nil {
		a.Cached.Delete(deleted.UID)
		if a.Cached.Len() > 0 {
			return fwk.QueueSkip, nil
		}
	}
	logger.V(5).Info("Gang member requeued: its preemption's victims are gone", "pod", klog.KObj(pod), "podGroup", key)
	return fwk.Queue, nil
}

// SignPod signs nothing: the plugin's only per-node-independent verdict, PreFilter's, is
// taken in every cycle before kube-scheduler looks for a batched node hint, so pods that
// share the other plugins' signature may share results (an unsigned PreFilter plugin would
// turn batching off for the whole profile).
func (pl *GangPreemption) SignPod(context.Context, *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return nil, nil
}
