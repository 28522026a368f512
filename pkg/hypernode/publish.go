package hypernode

import (
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/util/sets"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
)

// refresh recomputes the derived state of every HyperNode in the closure of dirty and
// publishes a new snapshot.
func (t *Tree) refresh(dirty sets.Set[string]) []ProblemChange {
	old := t.snap
	tierNamesChanged := false
	// A tierName that became (or stopped being) ambiguous changes the problems of every
	// HyperNode that carries it, wherever it is.
	for n := range dirty {
		var names []string
		if st := t.hyperNodes[n]; st != nil && st.spec.tierName != "" {
			names = append(names, st.spec.tierName)
		}
		if info, ok := old.infos.Get(n); ok && info.TierName != "" {
			names = append(names, info.TierName)
		}
		for _, tn := range names {
			if !slices.Equal(old.tierNames[tn], sortedTiers(t.tierNameTiers[tn])) {
				tierNamesChanged = true
				dirty = dirty.Union(t.tierNameHNs[tn])
			}
		}
	}
	scope := t.closure(dirty)
	fresh := t.derive(old, scope)
	// A HyperNode whose exclusion or depth changed changes those of its whole subtree, which
	// the closure of dirty does not hold: widen the scope level by level to those subtrees
	// and derive again. Rare (a HyperNode becoming invalid or moving), and bounded by the
	// subtrees that really change.
	for {
		extra := sets.New[string]()
		for n, next := range fresh {
			prev, _ := old.infos.Get(n)
			if prev != nil && prev.Excluded == next.Excluded && prev.ExcludedBy == next.ExcludedBy && prev.Depth == next.Depth {
				continue
			}
			for _, c := range t.hyperNodes[n].spec.children {
				if _, ok := t.hyperNodes[c]; ok && !scope.Has(c) {
					extra.Insert(c)
				}
			}
		}
		if extra.Len() == 0 {
			break
		}
		scope = t.closure(scope.Union(extra))
		fresh = t.derive(old, scope)
	}
	return t.publish(old, scope, fresh, tierNamesChanged)
}

// derive recomputes the HyperNodes of scope that exist. HyperNodes outside scope keep their
// published state, which derive reads where scope members depend on it.
func (t *Tree) derive(old *Snapshot, scope sets.Set[string]) map[string]*HyperNodeInfo {
	existing := sets.New[string]()
	for n := range scope {
		if _, ok := t.hyperNodes[n]; ok {
			existing.Insert(n)
		}
	}
	onCycle := t.cycles(existing)

	fresh := make(map[string]*HyperNodeInfo, existing.Len())
	for n := range existing {
		st := t.hyperNodes[n]
		fresh[n] = &HyperNodeInfo{
			Name:     n,
			Tier:     st.spec.tier,
			TierName: st.spec.tierName,
			Leaf:     st.spec.leaf,
			Problems: t.ownProblems(n, onCycle[n]),
		}
	}
	// info returns the new info of a HyperNode in scope, or the published one outside it.
	info := func(n string) *HyperNodeInfo {
		if i, ok := fresh[n]; ok {
			return i
		}
		i, _ := old.infos.Get(n)
		return i
	}
	// Top-down: exclusion, parent and depth.
	placed := sets.New[string]()
	var place func(string)
	place = func(n string) {
		if placed.Has(n) {
			return
		}
		placed.Insert(n)
		i := fresh[n]
		if i.Invalid() {
			i.Excluded, i.ExcludedBy = true, n
			return
		}
		claimers := t.claims[n]
		if claimers.Len() == 0 {
			i.Parent, i.Depth = VirtualRootName, 1
			return
		}
		p := claimers.UnsortedList()[0] // exactly one, or n would be invalid
		if _, inScope := fresh[p]; inScope {
			place(p)
		}
		pi := info(p)
		if pi.Excluded {
			i.Excluded, i.ExcludedBy = true, pi.ExcludedBy
			return
		}
		i.Parent, i.Depth = p, pi.Depth+1
	}
	for n := range fresh {
		place(n)
	}
	// Bottom-up: children, leaf nodes and node counts. TotalNodeCount follows every existing
	// member, valid or not, except members on a membership cycle with the HyperNode (their
	// sum would never end); every such member is in scope, so it is never read half-counted.
	counted := sets.New[string]()
	var count func(string)
	count = func(n string) {
		if counted.Has(n) {
			return
		}
		counted.Insert(n)
		i := fresh[n]
		st := t.hyperNodes[n]
		if st.spec.leaf {
			i.TotalNodeCount = st.nodes.Len()
			if !i.Excluded {
				i.Nodes = sets.List(st.nodes)
				i.NodeCount = len(i.Nodes)
			}
			return
		}
		for _, c := range st.spec.children {
			if _, ok := t.hyperNodes[c]; !ok || slices.Contains(onCycle[n], c) {
				continue
			}
			if _, inScope := fresh[c]; inScope {
				count(c)
			}
			ci := info(c)
			i.TotalNodeCount += ci.TotalNodeCount
			if i.Excluded || t.claims[c].Len() != 1 || ci.Excluded {
				continue
			}
			i.Children = append(i.Children, c)
			i.NodeCount += ci.NodeCount
		}
		sort.Strings(i.Children)
	}
	for n := range fresh {
		count(n)
	}
	return fresh
}

// publish derives the new snapshot from the old one and the recomputed HyperNodes.
func (t *Tree) publish(old *Snapshot, scope sets.Set[string], fresh map[string]*HyperNodeInfo, tierNamesChanged bool) []ProblemChange {
	infos := old.infos.writer()
	nodeLeaf := old.nodeLeaf.writer()
	changedTiers := sets.New[int]()
	rootChanged := false
	var changes []ProblemChange
	active := func(i *HyperNodeInfo) bool { return i != nil && !i.Excluded }

	// Only the node->leaf entries that change are written, so a shard is copied only when
	// one of its entries changes. Release old mappings first: a node may move between two
	// leaves of the scope.
	leafNodes := func(i *HyperNodeInfo) []string {
		if active(i) && i.Leaf {
			return i.Nodes
		}
		return nil
	}
	for n := range scope {
		prev, _ := old.infos.Get(n)
		keep := sets.New(leafNodes(fresh[n])...)
		for _, node := range leafNodes(prev) {
			if l, _ := nodeLeaf.Get(node); l == n && !keep.Has(node) {
				nodeLeaf.Delete(node)
			}
		}
	}
	for _, n := range sets.List(scope) {
		prev, _ := old.infos.Get(n)
		next := fresh[n]
		for _, node := range leafNodes(next) {
			if l, _ := nodeLeaf.Get(node); l != n {
				nodeLeaf.Set(node, n)
			}
		}
		if next == nil {
			infos.Delete(n)
		} else {
			infos.Set(n, next)
		}
		// Candidate sets per tier and the virtual root's children.
		if active(prev) {
			if t.candidates[prev.Tier].Has(n) && (!active(next) || next.Tier != prev.Tier) {
				t.candidates[prev.Tier].Delete(n)
				changedTiers.Insert(prev.Tier)
			}
		}
		if active(next) && !t.candidates[next.Tier].Has(n) {
			if t.candidates[next.Tier] == nil {
				t.candidates[next.Tier] = sets.New[string]()
			}
			t.candidates[next.Tier].Insert(n)
			changedTiers.Insert(next.Tier)
		}
		wasRootChild := t.rootChildren.Has(n)
		isRootChild := active(next) && next.Parent == VirtualRootName
		if wasRootChild != isRootChild {
			rootChanged = true
			if isRootChild {
				t.rootChildren.Insert(n)
			} else {
				t.rootChildren.Delete(n)
			}
		}
		var prevProblems, nextProblems []Problem
		if prev != nil {
			prevProblems = prev.Problems
		}
		if next != nil {
			nextProblems = next.Problems
		}
		if !slices.Equal(prevProblems, nextProblems) {
			change := ProblemChange{Problems: nextProblems}
			if st := t.hyperNodes[n]; st != nil {
				change.HyperNode = st.obj
			} else {
				change.HyperNode = &topologyv1alpha1.HyperNode{}
				change.HyperNode.Name = n
			}
			changes = append(changes, change)
		}
	}

	snap := &Snapshot{
		generation:   old.generation + 1,
		infos:        infos.Map(),
		nodeLeaf:     nodeLeaf.Map(),
		candidates:   old.candidates,
		tiers:        old.tiers,
		tierNames:    old.tierNames,
		rootChildren: old.rootChildren,
		nodeCount:    len(t.nodeLabels),
	}
	if changedTiers.Len() > 0 {
		snap.candidates = make(map[int][]string, len(t.candidates))
		for tier, names := range old.candidates {
			snap.candidates[tier] = names
		}
		for tier := range changedTiers {
			if t.candidates[tier].Len() == 0 {
				delete(t.candidates, tier)
				delete(snap.candidates, tier)
				continue
			}
			snap.candidates[tier] = sets.List(t.candidates[tier])
		}
	}
	if tiers := sortedTiers(t.tierCount); !slices.Equal(tiers, old.tiers) {
		snap.tiers = tiers
	}
	if tierNamesChanged || len(t.tierNameTiers) != len(old.tierNames) || !sameTierNames(old.tierNames, t.tierNameTiers) {
		snap.tierNames = make(map[string][]int, len(t.tierNameTiers))
		for name, tiers := range t.tierNameTiers {
			snap.tierNames[name] = sortedTiers(tiers)
		}
	}
	if rootChanged {
		snap.rootChildren = sets.List(t.rootChildren)
	}
	snap.root = old.root
	if rootChanged || snap.nodeCount != old.nodeCount || !slices.Equal(snap.tiers, old.tiers) {
		snap.root = snap.buildRoot()
	}
	t.snap = snap
	return changes
}

func sameTierNames(published map[string][]int, current map[string]map[int]int) bool {
	for name, tiers := range current {
		if !slices.Equal(published[name], sortedTiers(tiers)) {
			return false
		}
	}
	return true
}
