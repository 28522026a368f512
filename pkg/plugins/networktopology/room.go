package networktopology

// Room for the members a plan leaves out and for failed gangs: where a job may grow, which
// changes free room there, and when a left-out member or a failed gang is worth waking.

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// leftOutWaits reports whether member is left out by its gang's plan and its PreFilter would
// be answered from the plan again, after the event that called it marked the room it freed
// (while planned members are pending, the last one's Reserve wakes the left-out ones,
// ledger.go).
func (p *NetworkTopologyAware) leftOutWaits(key podgroup.Key, info podgroup.Info, member string) bool {
	tree := p.cache.Snapshot()
	p.gangs.Lock()
	defer p.gangs.Unlock()
	plan := p.gangs.PlanLocked(key)
	return plan != nil && plan.Deferred.Has(member) && p.answersLocked(plan, tree, member, info.Revision)
}

// plannedMemberGone drops the plan of a member deleted before it reserved its promised slot:
// the slot would stay promised to nobody, the plan's pending count would never reach zero,
// and the members it leaves out would be answered from it for good. The next member plans
// again around the placed ones.
func (p *NetworkTopologyAware) plannedMemberGone(pod *v1.Pod) {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return
	}
	p.gangs.Lock()
	gone := false
	if plan := p.gangs.PlanLocked(key); plan != nil {
		_, planned := plan.PodLeaf[pod.Name]
		gone = planned && !plan.Reserved.Has(pod.Name)
	}
	p.gangs.Unlock()
	if gone {
		logger := klog.Background()
		logger.V(3).Info("Planned gang member deleted before it reserved: plan dropped", "podGroup", key, "pod", klog.KObj(pod))
		p.invalidate(logger, key)
	}
}

// waitsForRoomLocked reports whether a plan that places nobody still answers the members it
// leaves out: nothing that can make room in its room area happened since it was made (read
// before planning), the tree is the same, and it is younger than leftOutReuse. p.mu must be
// held.
func (p *NetworkTopologyAware) waitsForRoomLocked(plan *gangstate.Plan, tree *hypernode.Snapshot) bool {
	freed := max(p.roomFreedAll, p.roomFreed[plan.RoomArea])
	return plan.WaitsForRoom && freed <= plan.RoomEpoch && plan.Generation == tree.Generation() &&
		time.Since(plan.Made) < leftOutReuse
}

// roomArea is where a job with placed members may grow: their lowest common HyperNode's
// ancestor at the highest tier the constraint allows (the virtual root when it is soft, or
// when nothing is placed): room freed outside it cannot help the members left out.
func roomArea(tree *hypernode.Snapshot, placedNodes []string, maxTier int, soft bool) string {
	area := placement.LowestCommon(tree, placedNodes)
	if soft || area == "" || area == hypernode.VirtualRootName {
		return hypernode.VirtualRootName
	}
	for {
		info, ok := tree.HyperNode(area)
		if !ok || info.Parent == "" || info.Parent == hypernode.VirtualRootName {
			break
		}
		parent, ok := tree.HyperNode(info.Parent)
		if !ok || parent.Tier > maxTier {
			break
		}
		area = info.Parent
	}
	if info, ok := tree.HyperNode(area); ok && info.Parent == hypernode.VirtualRootName && tree.RootTier() <= maxTier {
		return hypernode.VirtualRootName
	}
	return area
}

// roomFreedLocked stamps each HyperNode of chain (every HyperNode when chain is nil) with
// the change count epoch: plans that place nobody made before it in one of them are stale.
// the gangs' lock must be held.
func (p *NetworkTopologyAware) roomFreedLocked(chain []string, epoch uint64) {
	// max: the count is taken before the lock, so a later change may be stamped first.
	if chain == nil {
		p.roomFreedAll = max(p.roomFreedAll, epoch)
		return
	}
	if p.roomFreed == nil {
		p.roomFreed = map[string]uint64{}
	}
	for _, h := range chain {
		p.roomFreed[h] = max(p.roomFreed[h], epoch)
	}
}

// promisesReleased retries the gangs that failed or deferred sub-groups, since the slots
// another gang had promised in leaves are free again and no cluster event announces that:
// the failures of gangs those leaves could help go stale, and one member of each of those
// gangs and of the deferring ones is activated (its Permit brings the others).
func (p *NetworkTopologyAware) promisesReleased(logger klog.Logger, leaves []string) {
	epoch := p.roomEpoch.Add(1)
	tree := p.cache.Snapshot()
	chain := chainOfLeaves(tree, leaves)
	p.gangs.Lock()
	p.roomFreedLocked(chain, epoch)
	var keys []podgroup.Key
	deferring := p.gangs.DeferringLocked()
	for k := range deferring {
		// A plan that places nobody and keeps answering (room freed outside its area) stays
		// deferring: a later release inside its area must still wake it.
		if plan := p.gangs.PlanLocked(k); plan == nil || !p.waitsForRoomLocked(plan, tree) {
			deferring.Delete(k)
			keys = append(keys, k)
		}
	}
	p.gangs.EachPlanFailureLocked(func(k podgroup.Key, f *gangstate.PlanFailure) {
		if chain == nil || f.Possible.HasAny(chain...) {
			f.Stale = true
			keys = append(keys, k)
		}
	})
	p.gangs.Unlock()
	p.activateRetried(logger, keys)
}

// chainOfLeaves returns the virtual root and every given leaf with its ancestors; nil (every
// HyperNode) when one of them is not a leaf of the tree (the nodes outside any leaf).
func chainOfLeaves(tree *hypernode.Snapshot, leaves []string) []string {
	seen := sets.New(hypernode.VirtualRootName)
	for _, leaf := range leaves {
		if _, ok := tree.HyperNode(leaf); !ok || leaf == placement.LooseLeaf {
			return nil
		}
		seen.Insert(leaf)
		seen.Insert(tree.Ancestors(leaf)...)
	}
	return seen.UnsortedList()
}
