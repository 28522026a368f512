package gangstate

import (
	"sort"

	v1 "k8s.io/api/core/v1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// HoldIndex is every hold, immutable: Filter reads it without a lock.
type HoldIndex struct {
	// holds are in queue order of their gangs; byNode lists the holds on each node.
	holds  []*Hold
	byNode map[string][]*Hold
}

// indexHoldsLocked rebuilds the index from the gangs' holds. The registry's write lock must
// be held. O(nodes held).
func (t *Tracker) indexHoldsLocked() {
	var holds []*Hold
	for _, s := range t.gangs {
		if s.hold != nil {
			holds = append(holds, s.hold)
		}
	}
	if len(holds) == 0 {
		t.holdIndex.Store(nil)
		t.heldNodes.Store(0)
		return
	}
	sort.Slice(holds, func(i, j int) bool { return holds[i].Precedence.Before(holds[j].Precedence) })
	ix := &HoldIndex{holds: holds, byNode: map[string][]*Hold{}}
	for _, h := range holds {
		for n := range h.Need {
			ix.byNode[n] = append(ix.byNode[n], h)
		}
	}
	t.holdIndex.Store(ix)
	t.heldNodes.Store(int64(len(ix.byNode)))
}

// Holds returns every hold (nil when there is none): one atomic load.
func (t *Tracker) Holds() *HoldIndex { return t.holdIndex.Load() }

// HeldNodes counts the nodes held.
func (t *Tracker) HeldNodes() int { return int(t.heldNodes.Load()) }

// List returns the holds in queue order of their gangs.
func (ix *HoldIndex) List() []*Hold {
	if ix == nil {
		return nil
	}
	return ix.holds
}

// On returns the holds on a node.
func (ix *HoldIndex) On(node string) []*Hold {
	if ix == nil {
		return nil
	}
	return ix.byNode[node]
}

// After returns the holds that a pod of precedence p keeps clear of: those of gangs before it
// in queue order, its own gang's (own, when inGang) excepted; nil when none.
func (ix *HoldIndex) After(p podgroup.Precedence, own Key, inGang bool) *HoldsAhead {
	if ix == nil {
		return nil
	}
	var ahead map[*Hold]bool
	for _, h := range ix.holds {
		if !h.Precedence.Before(p) {
			break // in queue order: no later hold comes before the pod either
		}
		if inGang && h.Key == own {
			continue
		}
		if ahead == nil {
			ahead = map[*Hold]bool{}
		}
		ahead[h] = true
	}
	if ahead == nil {
		return nil
	}
	return &HoldsAhead{ix: ix, ahead: ahead}
}

// HoldsAhead are the holds of the gangs that come before one pod in queue order.
type HoldsAhead struct {
	ix    *HoldIndex
	ahead map[*Hold]bool
}

// Keeps returns the hold that keeps a pod requesting req off a node (nil when none does): the
// node's free room less the pod's request must still hold what the holds ahead of the pod
// need there. free reads one resource of the node's free room, in podgroup.Amount's units.
func (a *HoldsAhead) Keeps(node string, req v1.ResourceList, free func(v1.ResourceName) int64) *Hold {
	if a == nil {
		return nil
	}
	var first *Hold
	need := v1.ResourceList{}
	for _, h := range a.ix.byNode[node] {
		if !a.ahead[h] {
			continue
		}
		n := h.Need[node]
		if n == nil {
			return h // the whole node
		}
		if first == nil {
			first = h
		}
		for name, q := range n {
			sum := need[name]
			sum.Add(q)
			need[name] = sum
		}
	}
	if first == nil {
		return nil
	}
	for name, q := range need {
		want := req[name]
		if want.IsZero() {
			continue // the pod takes none of it: the gang's room stays
		}
		if free(name)-podgroup.QuantityAmount(name, want) < podgroup.QuantityAmount(name, q) {
			return first
		}
	}
	return nil
}
