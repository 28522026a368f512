package gang

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// PreFilter refuses the members of a gang blocked by a member that fits no node (all but
// that member, which keeps probing), of a gang without a topology constraint whose last
// attempt found no room while nothing that can make room happened since (gangstate.Unplaced),
// and of a gang whose minResources exceed what the whole cluster can allocate: no placement
// can work until that changes.
func (g *Gang) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	key, ok := podgroup.KeyOf(pod)
	if !ok || gangstate.SimulationMark.In(state) {
		// A capacity simulation of a member tries nodes; it is not an attempt of the gang.
		return nil, fwk.NewStatus(fwk.Skip)
	}
	// This member's attempt is running: the next cluster event may requeue the gang again,
	// and from now on RetryGate may hold the member (it has a condition that says why).
	g.gangs.RequeueDone(key)
	g.gangs.MarkAttempted(pod)
	info := g.registry.Info(key)
	if b := g.gangs.Blocker(key); b != nil && b.UID != pod.UID {
		// The blocker retries for the gang: this member waits out of the queue.
		g.gangs.SendToRetryGate(klog.FromContext(ctx), g.handle, pod)
		heldBehindBlocker.Set(state)
		gangstate.RefusedBeforeFilterMark.Set(state)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, b.Message(key))
	}
	if msg := g.sharedUnallocatedClaim(key, pod); msg != "" {
		gangstate.RefusedBeforeFilterMark.Set(state)
		g.events.Record(info.PodGroup, v1.EventTypeWarning, EventSharedClaimUnallocated, msg)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	if info.PodGroup != nil && !info.PlacedByTopology() {
		state.Write(nodeChangesKey, nodeChangesState(g.gangs.NodeChanges()))
		// Nothing of the gang's own is given back: while it is held its round is empty (the
		// failure rejected it; only the scout passes, and its retry ends the hold), and
		// members allowed and still binding hold their nodes.
		room := func(names []v1.ResourceName) gangstate.Room { return g.freeRoom(names, nil) }
		u, retry, forgot := g.gangs.RetryUnplaced(key, pod.UID, time.Now(), room)
		if !retry {
			// Not the member retried for the gang: it waits out of the queue.
			g.gangs.SendToRetryGate(klog.FromContext(ctx), g.handle, pod)
			gangstate.MarkHeldForRoom(state)
			gangstate.RefusedBeforeFilterMark.Set(state)
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
				"gang %s could not be placed when last tried (%s); it is retried when more room is free or a node changes", key, u.Why))
		}
		if forgot {
			// The hold ended: the others try as well (the scout is in this cycle).
			var others []*v1.Pod
			for _, m := range g.registry.PendingMembers(key) {
				if m.UID != pod.UID {
					others = append(others, m)
				}
			}
			n := gangstate.Activate(klog.FromContext(ctx), g.handle, others...)
			klog.FromContext(ctx).V(3).Info("Gang retried: more room than at its failure", "podGroup", key, "scout", klog.KObj(pod), "activated", n)
		}
	}
	if info.PodGroup == nil || len(info.PodGroup.Spec.MinResources) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if short := g.registry.MinResourcesShortfall(key, info.PodGroup.Spec.MinResources); short != "" {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("PodGroup %s needs minResources the whole cluster cannot allocate: %s", key, short))
	}
	return nil, fwk.NewStatus(fwk.Skip)
}

// heldBehindBlocker marks a cycle in which PreFilter refused the member because its gang is
// blocked: its PostFilter has nothing to decide (the blocker's failure rejected the round).
const heldBehindBlocker gangstate.CycleMark = "hypernode.dev/gang-blocked"

// PreFilterExtensions returns nil: the plugin keeps no per-node state.
func (g *Gang) PreFilterExtensions() fwk.PreFilterExtensions { return nil }
