package hypernode

import (
	"fmt"
	"sort"
)

// VirtualRootName names the virtual HyperNode above every parentless HyperNode. It holds every
// node of the cluster, including nodes that no HyperNode selects. It is not a valid object name
// (object names are DNS subdomains), so it cannot collide with a real HyperNode.
const VirtualRootName = "<cluster>"

// HyperNodeInfo is the scheduler's view of one HyperNode. It is immutable once published.
type HyperNodeInfo struct {
	Name     string
	Tier     int
	TierName string
	// Leaf is true for HyperNodes that select nodes.
	Leaf bool
	// Parent is the parent HyperNode, VirtualRootName for a top-level HyperNode, or "" when
	// the HyperNode is excluded.
	Parent string
	// Children are the HyperNodes placement may use below this one, sorted by name: members
	// that exist, have this HyperNode as their only parent and are not invalid.
	Children []string
	// Nodes are the existing nodes of a leaf, sorted by name.
	Nodes []string
	// NodeCount is the number of existing nodes below this HyperNode that placement may use.
	NodeCount int
	// TotalNodeCount is the number of existing nodes below this HyperNode by its spec,
	// whether or not placement may use them: a leaf counts the nodes its members select, a
	// parent sums the TotalNodeCount of its existing member HyperNodes (members on a
	// membership cycle with it are not followed). It is what status.nodeCount reports.
	TotalNodeCount int
	// Depth is the distance from the virtual root (a top-level HyperNode has depth 1).
	Depth int
	// Excluded is true when placement must not use this HyperNode: it is invalid itself or
	// lies below an invalid HyperNode (ExcludedBy names it).
	Excluded   bool
	ExcludedBy string
	// Problems are the defects this HyperNode is involved in, sorted.
	Problems []Problem
}

// Invalid reports whether one of the HyperNode's own problems excludes it.
func (h *HyperNodeInfo) Invalid() bool {
	for _, p := range h.Problems {
		if p.Excludes {
			return true
		}
	}
	return false
}

// Snapshot is an immutable view of the HyperNode tree. Taking one is O(1); every read is
// lock-free. Use one Snapshot for a whole decision so that it sees one consistent tree.
type Snapshot struct {
	generation uint64
	infos      cowMap[*HyperNodeInfo]
	nodeLeaf   cowMap[string]
	// candidates are the names of the non-excluded HyperNodes of each tier, sorted.
	candidates map[int][]string
	// tiers are the tier values of the existing HyperNodes, ascending.
	tiers []int
	// tierNames maps each tierName to the tiers that carry it, ascending.
	tierNames    map[string][]int
	rootChildren []string
	nodeCount    int
	// root is the virtual root, built when it changes so that reads never allocate.
	root *HyperNodeInfo
}

// Generation increases with every change of the tree; equal generations mean equal trees.
func (s *Snapshot) Generation() uint64 { return s.generation }

// HyperNode returns the HyperNode with the given name (the virtual root included).
func (s *Snapshot) HyperNode(name string) (*HyperNodeInfo, bool) {
	if name == VirtualRootName {
		return s.Root(), true
	}
	return s.infos.Get(name)
}

// Root returns the virtual root HyperNode. It must not be modified.
func (s *Snapshot) Root() *HyperNodeInfo { return s.root }

func (s *Snapshot) buildRoot() *HyperNodeInfo {
	return &HyperNodeInfo{
		Name:      VirtualRootName,
		Tier:      s.RootTier(),
		Children:  s.rootChildren,
		NodeCount: s.nodeCount,
	}
}

// RootTier is the tier of the virtual root: one above the highest real tier, 1 when there
// is no HyperNode.
func (s *Snapshot) RootTier() int {
	if len(s.tiers) == 0 {
		return 1
	}
	return s.tiers[len(s.tiers)-1] + 1
}

// Tiers returns the tiers of the existing HyperNodes, ascending (the virtual root's excluded).
// The slice must not be modified.
func (s *Snapshot) Tiers() []int { return s.tiers }

// Candidates returns the names of the HyperNodes of a tier that placement may use, sorted.
// The slice must not be modified.
func (s *Snapshot) Candidates(tier int) []string { return s.candidates[tier] }

// LeafOf returns the leaf HyperNode of a node, if the node is in a leaf placement may use.
func (s *Snapshot) LeafOf(node string) (string, bool) { return s.nodeLeaf.Get(node) }

// NodeCount returns the number of nodes in the cluster.
func (s *Snapshot) NodeCount() int { return s.nodeCount }

// Len returns the number of HyperNodes (excluded ones included, the virtual root not).
func (s *Snapshot) Len() int { return s.infos.Len() }

// RangeHyperNodes calls f for every HyperNode until f returns false; the order is unspecified.
func (s *Snapshot) RangeHyperNodes(f func(*HyperNodeInfo) bool) {
	s.infos.Range(func(_ string, info *HyperNodeInfo) bool { return f(info) })
}

// TierByName resolves a tierName to its tier. It fails when no HyperNode carries the name
// or when HyperNodes of different tiers carry it.
func (s *Snapshot) TierByName(name string) (int, error) {
	tiers := s.tierNames[name]
	switch len(tiers) {
	case 0:
		names := make([]string, 0, len(s.tierNames))
		for n := range s.tierNames {
			names = append(names, n)
		}
		if len(names) == 0 {
			return 0, fmt.Errorf("no HyperNode has tierName %q (no HyperNode sets a tierName)", name)
		}
		return 0, fmt.Errorf("no HyperNode has tierName %q (known tierNames: %s)", name, listNames(names, 8))
	case 1:
		return tiers[0], nil
	default:
		return 0, fmt.Errorf("tierName %q is ambiguous: HyperNodes of tiers %v carry it", name, tiers)
	}
}

// Ancestors returns the chain from name's parent up to and including the virtual root.
func (s *Snapshot) Ancestors(name string) []string {
	var out []string
	for {
		info, ok := s.HyperNode(name)
		if !ok || info.Parent == "" {
			return out
		}
		out = append(out, info.Parent)
		if info.Parent == VirtualRootName {
			return out
		}
		name = info.Parent
	}
}

// LCA returns the lowest common ancestor of two HyperNodes (a HyperNode is its own ancestor),
// the virtual root when they share none, and false when either is unknown or excluded.
func (s *Snapshot) LCA(a, b string) (string, bool) {
	ia, ok := s.HyperNode(a)
	if !ok || (ia.Excluded && a != VirtualRootName) {
		return "", false
	}
	ib, ok := s.HyperNode(b)
	if !ok || (ib.Excluded && b != VirtualRootName) {
		return "", false
	}
	for ia.Depth > ib.Depth {
		ia, _ = s.HyperNode(ia.Parent)
	}
	for ib.Depth > ia.Depth {
		ib, _ = s.HyperNode(ib.Parent)
	}
	for ia.Name != ib.Name {
		ia, _ = s.HyperNode(ia.Parent)
		ib, _ = s.HyperNode(ib.Parent)
	}
	return ia.Name, true
}

// Leaves returns the non-excluded leaves at or below name in tree order (children by name,
// depth first). Below the virtual root that is every usable leaf.
func (s *Snapshot) Leaves(name string) []string {
	var out []string
	var walk func(string)
	walk = func(n string) {
		info, ok := s.HyperNode(n)
		if !ok || info.Excluded {
			return
		}
		if info.Leaf {
			out = append(out, n)
			return
		}
		for _, c := range info.Children {
			walk(c)
		}
	}
	walk(name)
	return out
}

// Nodes returns the nodes of the usable leaves at or below a HyperNode, in tree order. For
// the virtual root that is every node in a usable leaf; the root also holds the nodes outside
// every usable leaf (LeafOf is false for them), which the snapshot counts but does not list:
// the scheduler's own node list has them.
func (s *Snapshot) Nodes(name string) []string {
	var out []string
	for _, leaf := range s.Leaves(name) {
		info, _ := s.HyperNode(leaf)
		out = append(out, info.Nodes...)
	}
	return out
}

// Problems returns every HyperNode with problems, sorted by name.
func (s *Snapshot) Problems() map[string][]Problem {
	out := map[string][]Problem{}
	s.infos.Range(func(name string, info *HyperNodeInfo) bool {
		if len(info.Problems) > 0 {
			out[name] = info.Problems
		}
		return true
	})
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ChangedSince calls f with the name of every HyperNode whose published info differs between
// old and s: added, removed, or recomputed by a change in between (a recomputed info may hold
// equal values). It compares only the shards of the snapshot that a change copied, so it costs
// the number of HyperNodes in those shards, not in the tree. old must be an earlier snapshot
// of the same Tree.
func (s *Snapshot) ChangedSince(old *Snapshot, f func(name string)) {
	for i := range s.infos.shards {
		cur, prev := s.infos.shards[i], old.infos.shards[i]
		if sameShard(cur, prev) {
			continue
		}
		for name, info := range cur {
			if p, ok := prev[name]; !ok || p != info {
				f(name)
			}
		}
		for name := range prev {
			if _, ok := cur[name]; !ok {
				f(name)
			}
		}
	}
}
