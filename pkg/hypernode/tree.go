package hypernode

import (
	"fmt"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
)

// Tree is the writer side of the HyperNode index. It is fed node and HyperNode events and
// publishes an immutable Snapshot after each one. A Tree is not safe for concurrent writers;
// the Cache serialises them. Readers use Snapshot, never the Tree.
//
// Updates are incremental: a node event evaluates only the leaves that can select the node
// (found through indexes of exact names, anchored regex prefixes and label pairs); a HyperNode
// event recomputes only the HyperNodes above and below it (its "closure" in the membership
// graph). A from-scratch Build of the same objects yields the same Snapshot.
type Tree struct {
	hyperNodes map[string]*hnState
	nodeLabels map[string]labels.Set
	// sortedNodes are the node names in order, so a leaf with an anchored regex prefix finds
	// its candidate nodes by binary search instead of testing every node.
	sortedNodes []string
	// nodesByLabel indexes nodes by the values of the label keys that label-selector leaves
	// are indexed by (labelKeyRefs counts those leaves per key): key -> value -> nodes.
	nodesByLabel map[string]map[string]sets.Set[string]
	labelKeyRefs map[string]int

	// Indexes from a node to the leaves that may select it.
	exactIndex  map[string]sets.Set[string]
	prefixIndex map[string]sets.Set[string]
	prefixLens  map[int]int // distinct anchored-prefix lengths, with their use counts
	// substringIndex indexes unanchored regexes by the literal text every match contains.
	substringIndex map[string]sets.Set[string]
	substringLens  map[int]int
	labelIndex     map[labelPair]sets.Set[string]
	scanLeaves     sets.Set[string] // leaves with patterns that no index covers

	// nodeLeaves maps each existing node to the leaves that select it (normally one).
	nodeLeaves map[string]sets.Set[string]
	// claims maps a HyperNode name to the existing HyperNodes that list it as a member.
	claims map[string]sets.Set[string]

	tierCount     map[int]int
	tierNameTiers map[string]map[int]int
	tierNameHNs   map[string]sets.Set[string]

	// Mirrors of published state that are cheaper to keep than to rebuild.
	candidates   map[int]sets.Set[string]
	rootChildren sets.Set[string]

	snap *Snapshot
}

type hnState struct {
	obj  *topologyv1alpha1.HyperNode
	spec *parsedSpec
	// nodes are the existing nodes this leaf selects, whatever its validity.
	nodes sets.Set[string]
}

// ProblemChange says that the problems of a HyperNode changed; Problems is the new list
// (empty when the HyperNode is fine again or was deleted).
type ProblemChange struct {
	HyperNode *topologyv1alpha1.HyperNode
	Problems  []Problem
}

// NewTree returns an empty tree.
func NewTree() *Tree {
	return &Tree{
		hyperNodes:     map[string]*hnState{},
		nodeLabels:     map[string]labels.Set{},
		nodesByLabel:   map[string]map[string]sets.Set[string]{},
		labelKeyRefs:   map[string]int{},
		exactIndex:     map[string]sets.Set[string]{},
		prefixIndex:    map[string]sets.Set[string]{},
		prefixLens:     map[int]int{},
		substringIndex: map[string]sets.Set[string]{},
		substringLens:  map[int]int{},
		labelIndex:     map[labelPair]sets.Set[string]{},
		scanLeaves:     sets.New[string](),
		nodeLeaves:     map[string]sets.Set[string]{},
		claims:         map[string]sets.Set[string]{},
		tierCount:      map[int]int{},
		tierNameTiers:  map[string]map[int]int{},
		tierNameHNs:    map[string]sets.Set[string]{},
		candidates:     map[int]sets.Set[string]{},
		rootChildren:   sets.New[string](),
		snap: &Snapshot{
			infos:      newCowMap[*HyperNodeInfo](),
			nodeLeaf:   newCowMap[string](),
			candidates: map[int][]string{},
			tierNames:  map[string][]int{},
			root:       &HyperNodeInfo{Name: VirtualRootName, Tier: 1},
		},
	}
}

// Build builds a tree from scratch.
func Build(nodes map[string]labels.Set, hyperNodes []*topologyv1alpha1.HyperNode) *Tree {
	t := NewTree()
	for name, l := range nodes {
		t.nodeLabels[name] = l
		t.sortedNodes = append(t.sortedNodes, name)
	}
	sort.Strings(t.sortedNodes)
	dirty := sets.New[string]()
	for _, hn := range hyperNodes {
		t.indexHyperNode(hn)
		dirty.Insert(hn.Name)
	}
	for name := range t.nodeLabels {
		t.setNodeLeaves(name, t.matchingLeaves(name), dirty)
	}
	t.refresh(dirty)
	return t
}

// CurrentProblems returns every existing HyperNode that has problems, as changes from none.
func (t *Tree) CurrentProblems() []ProblemChange {
	var out []ProblemChange
	for _, name := range sortedKeys(t.snap.Problems()) {
		info, _ := t.snap.infos.Get(name)
		out = append(out, ProblemChange{HyperNode: t.hyperNodes[name].obj, Problems: info.Problems})
	}
	return out
}

// Snapshot returns the current snapshot.
func (t *Tree) Snapshot() *Snapshot { return t.snap }

// SetNode adds or updates a node. It returns the HyperNodes whose problems changed.
func (t *Tree) SetNode(name string, nodeLabels labels.Set) []ProblemChange {
	old, existed := t.nodeLabels[name]
	if existed && labels.Equals(old, nodeLabels) {
		return nil
	}
	t.nodeLabels[name] = nodeLabels
	if !existed {
		i, _ := slices.BinarySearch(t.sortedNodes, name)
		t.sortedNodes = slices.Insert(t.sortedNodes, i, name)
	}
	for key := range t.labelKeyRefs {
		t.indexNodeLabel(name, key, old, nodeLabels)
	}
	dirty := sets.New[string]()
	if !t.setNodeLeaves(name, t.matchingLeaves(name), dirty) && existed {
		// Same leaves, same node count: the published snapshot is still exact.
		return nil
	}
	return t.refresh(dirty)
}

// DeleteNode removes a node.
func (t *Tree) DeleteNode(name string) []ProblemChange {
	if _, existed := t.nodeLabels[name]; !existed {
		return nil
	}
	dirty := sets.New[string]()
	t.setNodeLeaves(name, nil, dirty)
	for key := range t.labelKeyRefs {
		t.indexNodeLabel(name, key, t.nodeLabels[name], nil)
	}
	delete(t.nodeLabels, name)
	if i, found := slices.BinarySearch(t.sortedNodes, name); found {
		t.sortedNodes = slices.Delete(t.sortedNodes, i, i+1)
	}
	return t.refresh(dirty)
}

// SetHyperNode adds or updates a HyperNode.
func (t *Tree) SetHyperNode(hn *topologyv1alpha1.HyperNode) []ProblemChange {
	dirty := sets.New[string](hn.Name)
	if old := t.hyperNodes[hn.Name]; old != nil {
		if equality.Semantic.DeepEqual(old.obj.Spec, hn.Spec) {
			// A status or metadata update: the tree does not change.
			old.obj = hn
			return nil
		}
		dirty.Insert(old.spec.children...)
		t.unindexHyperNode(hn.Name, dirty)
	}
	t.indexHyperNode(hn)
	dirty.Insert(t.hyperNodes[hn.Name].spec.children...)
	t.resolveLeaf(hn.Name, dirty)
	return t.refresh(dirty)
}

// DeleteHyperNode removes a HyperNode.
func (t *Tree) DeleteHyperNode(name string) []ProblemChange {
	old := t.hyperNodes[name]
	if old == nil {
		return nil
	}
	dirty := sets.New[string](name)
	dirty.Insert(old.spec.children...)
	// Its parents must notice the member is gone.
	dirty = dirty.Union(t.claims[name])
	t.unindexHyperNode(name, dirty)
	return t.refresh(dirty)
}

// SelectedNodes returns the existing nodes that a leaf HyperNode's members select, sorted,
// whether or not the HyperNode is valid (a Snapshot lists the nodes of usable leaves only), so
// that tools can show what an excluded leaf holds.
func (t *Tree) SelectedNodes(name string) []string {
	st, ok := t.hyperNodes[name]
	if !ok {
		return nil
	}
	return sets.List(st.nodes)
}

// String renders the tree for debugging.
func (t *Tree) String() string {
	return fmt.Sprintf("Tree{%d HyperNodes, %d nodes, generation %d}", len(t.hyperNodes), len(t.nodeLabels), t.snap.generation)
}
