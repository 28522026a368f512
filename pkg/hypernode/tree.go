package hypernode

import (
	"fmt"
	"slices"
	"sort"
	"strings"

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

// indexHyperNode records a HyperNode's spec in every index (not its leaf membership).
func (t *Tree) indexHyperNode(hn *topologyv1alpha1.HyperNode) {
	spec := parseSpec(hn)
	st := &hnState{obj: hn, spec: spec, nodes: sets.New[string]()}
	t.hyperNodes[hn.Name] = st
	for _, c := range spec.children {
		addTo(t.claims, c, hn.Name)
	}
	t.tierCount[spec.tier]++
	if spec.tierName != "" {
		if t.tierNameTiers[spec.tierName] == nil {
			t.tierNameTiers[spec.tierName] = map[int]int{}
		}
		t.tierNameTiers[spec.tierName][spec.tier]++
		addTo(t.tierNameHNs, spec.tierName, hn.Name)
	}
	if !spec.leaf {
		return
	}
	for _, n := range spec.exactNodes {
		addTo(t.exactIndex, n, hn.Name)
	}
	for i := range spec.patterns {
		p := &spec.patterns[i]
		switch {
		case p.anchoredPrefix != "":
			addTo(t.prefixIndex, p.anchoredPrefix, hn.Name)
			t.prefixLens[len(p.anchoredPrefix)]++
		case p.requiredText != "":
			addTo(t.substringIndex, p.requiredText, hn.Name)
			t.substringLens[len(p.requiredText)]++
		case p.indexLabel != nil:
			if t.labelIndex[*p.indexLabel] == nil {
				t.labelIndex[*p.indexLabel] = sets.New[string]()
			}
			t.labelIndex[*p.indexLabel].Insert(hn.Name)
			t.refLabelKey(p.indexLabel.key)
		default:
			t.scanLeaves.Insert(hn.Name)
		}
	}
}

// unindexHyperNode removes a HyperNode from every index and releases its nodes. Leaves whose
// overlap with it ends are added to dirty.
func (t *Tree) unindexHyperNode(name string, dirty sets.Set[string]) {
	st := t.hyperNodes[name]
	spec := st.spec
	for _, c := range spec.children {
		removeFrom(t.claims, c, name)
	}
	if t.tierCount[spec.tier]--; t.tierCount[spec.tier] == 0 {
		delete(t.tierCount, spec.tier)
	}
	if spec.tierName != "" {
		tiers := t.tierNameTiers[spec.tierName]
		if tiers[spec.tier]--; tiers[spec.tier] == 0 {
			delete(tiers, spec.tier)
		}
		if len(tiers) == 0 {
			delete(t.tierNameTiers, spec.tierName)
		}
		removeFrom(t.tierNameHNs, spec.tierName, name)
	}
	for _, n := range spec.exactNodes {
		removeFrom(t.exactIndex, n, name)
	}
	for i := range spec.patterns {
		p := &spec.patterns[i]
		switch {
		case p.anchoredPrefix != "":
			removeFrom(t.prefixIndex, p.anchoredPrefix, name)
			if t.prefixLens[len(p.anchoredPrefix)]--; t.prefixLens[len(p.anchoredPrefix)] == 0 {
				delete(t.prefixLens, len(p.anchoredPrefix))
			}
		case p.requiredText != "":
			removeFrom(t.substringIndex, p.requiredText, name)
			if t.substringLens[len(p.requiredText)]--; t.substringLens[len(p.requiredText)] == 0 {
				delete(t.substringLens, len(p.requiredText))
			}
		case p.indexLabel != nil:
			if s := t.labelIndex[*p.indexLabel]; s != nil {
				s.Delete(name)
				if s.Len() == 0 {
					delete(t.labelIndex, *p.indexLabel)
				}
			}
			t.unrefLabelKey(p.indexLabel.key)
		default:
			t.scanLeaves.Delete(name)
		}
	}
	for n := range st.nodes {
		leaves := t.nodeLeaves[n]
		leaves.Delete(name)
		if leaves.Len() == 0 {
			delete(t.nodeLeaves, n)
		}
		dirty.Insert(leaves.UnsortedList()...)
	}
	delete(t.hyperNodes, name)
}

// resolveLeaf computes the nodes a (re)indexed leaf selects, scanning only the nodes its
// selectors can match.
func (t *Tree) resolveLeaf(name string, dirty sets.Set[string]) {
	st := t.hyperNodes[name]
	if !st.spec.leaf {
		return
	}
	for _, n := range st.spec.exactNodes {
		if _, ok := t.nodeLabels[n]; ok {
			t.addNodeToLeaf(n, name, dirty)
		}
	}
	for i := range st.spec.patterns {
		p := &st.spec.patterns[i]
		test := func(n string) {
			if !st.nodes.Has(n) && p.matches(n, t.nodeLabels[n]) {
				t.addNodeToLeaf(n, name, dirty)
			}
		}
		switch {
		case p.anchoredPrefix != "":
			start, _ := slices.BinarySearch(t.sortedNodes, p.anchoredPrefix)
			for _, n := range t.sortedNodes[start:] {
				if !strings.HasPrefix(n, p.anchoredPrefix) {
					break
				}
				test(n)
			}
		case p.indexLabel != nil:
			for n := range t.nodesByLabel[p.indexLabel.key][p.indexLabel.value] {
				test(n)
			}
		default:
			for _, n := range t.sortedNodes {
				test(n)
			}
		}
	}
}

// refLabelKey starts indexing nodes by a label key when the first leaf needs it.
func (t *Tree) refLabelKey(key string) {
	if t.labelKeyRefs[key]++; t.labelKeyRefs[key] > 1 {
		return
	}
	for n, l := range t.nodeLabels {
		t.indexNodeLabel(n, key, nil, l)
	}
}

// unrefLabelKey stops indexing nodes by a label key when no leaf needs it any more.
func (t *Tree) unrefLabelKey(key string) {
	if t.labelKeyRefs[key]--; t.labelKeyRefs[key] > 0 {
		return
	}
	delete(t.labelKeyRefs, key)
	delete(t.nodesByLabel, key)
}

// indexNodeLabel moves a node between the value buckets of one indexed label key.
func (t *Tree) indexNodeLabel(node, key string, old, new labels.Set) {
	oldValue, hadOld := old[key]
	newValue, hasNew := new[key]
	if hadOld == hasNew && oldValue == newValue {
		return
	}
	values := t.nodesByLabel[key]
	if hadOld {
		if s := values[oldValue]; s != nil {
			s.Delete(node)
			if s.Len() == 0 {
				delete(values, oldValue)
			}
		}
	}
	if hasNew {
		if values == nil {
			values = map[string]sets.Set[string]{}
			t.nodesByLabel[key] = values
		}
		if values[newValue] == nil {
			values[newValue] = sets.New[string]()
		}
		values[newValue].Insert(node)
	}
}

func (t *Tree) addNodeToLeaf(node, leaf string, dirty sets.Set[string]) {
	t.hyperNodes[leaf].nodes.Insert(node)
	if t.nodeLeaves[node] == nil {
		t.nodeLeaves[node] = sets.New[string]()
	}
	t.nodeLeaves[node].Insert(leaf)
	// Every leaf that shares the node changes its overlap status.
	dirty.Insert(t.nodeLeaves[node].UnsortedList()...)
}

// matchingLeaves returns the leaves that select a node, looking only at the leaves its name
// and labels can match.
func (t *Tree) matchingLeaves(node string) sets.Set[string] {
	nodeLabels := t.nodeLabels[node]
	candidates := sets.New[string]()
	insertAll(candidates, t.exactIndex[node])
	for l := range t.prefixLens {
		if l <= len(node) {
			insertAll(candidates, t.prefixIndex[node[:l]])
		}
	}
	for l := range t.substringLens {
		for i := 0; i+l <= len(node); i++ {
			insertAll(candidates, t.substringIndex[node[i:i+l]])
		}
	}
	for k, v := range nodeLabels {
		insertAll(candidates, t.labelIndex[labelPair{key: k, value: v}])
	}
	insertAll(candidates, t.scanLeaves)
	matched := sets.New[string]()
	for leaf := range candidates {
		st := t.hyperNodes[leaf]
		if t.exactIndex[node].Has(leaf) {
			matched.Insert(leaf)
			continue
		}
		for i := range st.spec.patterns {
			if st.spec.patterns[i].matches(node, nodeLabels) {
				matched.Insert(leaf)
				break
			}
		}
	}
	return matched
}

// setNodeLeaves records that node is selected by exactly the given leaves and reports
// whether that changed anything.
func (t *Tree) setNodeLeaves(node string, leaves sets.Set[string], dirty sets.Set[string]) bool {
	old := t.nodeLeaves[node]
	if old.Len() == leaves.Len() && old.IsSuperset(leaves) {
		return false
	}
	for l := range old {
		if !leaves.Has(l) {
			t.hyperNodes[l].nodes.Delete(node)
		}
	}
	for l := range leaves {
		t.hyperNodes[l].nodes.Insert(node)
	}
	dirty.Insert(old.UnsortedList()...)
	dirty.Insert(leaves.UnsortedList()...)
	if leaves.Len() == 0 {
		delete(t.nodeLeaves, node)
	} else {
		t.nodeLeaves[node] = leaves
	}
	return true
}

func insertAll(dst, src sets.Set[string]) {
	for v := range src {
		dst.Insert(v)
	}
}

func addTo(m map[string]sets.Set[string], key, value string) {
	if m[key] == nil {
		m[key] = sets.New[string]()
	}
	m[key].Insert(value)
}

func removeFrom(m map[string]sets.Set[string], key, value string) {
	if s := m[key]; s != nil {
		s.Delete(value)
		if s.Len() == 0 {
			delete(m, key)
		}
	}
}

// closure returns dirty plus every ancestor of a dirty HyperNode in the raw membership graph
// (through every claim, valid or not). That is every HyperNode whose problems, children or
// node count can change: the events put the changed HyperNode's old and new children in
// dirty themselves, every member of a cycle through a dirty HyperNode is its ancestor, and
// descendants whose exclusion or depth changes are added by refresh as it finds them.
func (t *Tree) closure(dirty sets.Set[string]) sets.Set[string] {
	out := sets.New[string]()
	var up func(string)
	up = func(n string) {
		for p := range t.claims[n] {
			if !out.Has(p) {
				out.Insert(p)
				up(p)
			}
		}
	}
	for n := range dirty {
		out.Insert(n)
	}
	for n := range dirty {
		up(n)
	}
	return out
}

// cycles returns the HyperNodes of the given set that lie on a membership cycle, with the
// cycle they are on (Tarjan's strongly connected components over the members' edges).
func (t *Tree) cycles(within sets.Set[string]) map[string][]string {
	index := map[string]int{}
	low := map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	next := 0
	out := map[string][]string{}
	var strong func(string)
	strong = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range t.hyperNodes[v].spec.children {
			if _, ok := t.hyperNodes[w]; !ok || !within.Has(w) {
				continue
			}
			if _, seen := index[w]; !seen {
				strong(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var component []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			component = append(component, w)
			if w == v {
				break
			}
		}
		selfLoop := len(component) == 1 && slices.Contains(t.hyperNodes[v].spec.children, v)
		if len(component) > 1 || selfLoop {
			sort.Strings(component)
			for _, w := range component {
				out[w] = component
			}
		}
	}
	for _, v := range sortedKeys(within) {
		if _, seen := index[v]; !seen {
			strong(v)
		}
	}
	return out
}

// ownProblems lists the problems a HyperNode is involved in.
func (t *Tree) ownProblems(name string, onCycle []string) []Problem {
	st := t.hyperNodes[name]
	spec := st.spec
	problems := append([]Problem(nil), spec.problems...)
	if len(onCycle) > 0 {
		problems = append(problems, newProblem(ReasonCycle,
			"it is on a membership cycle of HyperNodes %s", listNames(onCycle, 8)))
	}
	if claimers := t.claims[name]; claimers.Len() > 1 {
		problems = append(problems, newProblem(ReasonMultipleParents,
			"it is a member of %d HyperNodes (%s); a HyperNode can have only one parent", claimers.Len(), listNames(claimers.UnsortedList(), 8)))
	}
	// As a parent: claims shared with others, children of a tier not below ours, missing members.
	var missing []string
	for _, c := range spec.children {
		cst, ok := t.hyperNodes[c]
		if !ok {
			missing = append(missing, c)
			continue
		}
		if claimers := t.claims[c]; claimers.Len() > 1 {
			others := claimers.Clone()
			others.Delete(name)
			p := newProblem(ReasonMultipleParents,
				"its member %s is also a member of %s; %s is excluded until it has one parent", c, listNames(others.UnsortedList(), 8), c)
			p.Excludes = false
			problems = append(problems, p)
		}
		if cst.spec.tier >= spec.tier {
			problems = append(problems, newProblem(ReasonTierOrder,
				"its tier %d is not greater than the tier %d of its member %s", spec.tier, cst.spec.tier, c))
		}
	}
	if len(missing) > 0 {
		p := newProblem(ReasonMissingMember,
			"member HyperNode(s) %s do not exist; placement uses the members that exist", listNames(missing, 8))
		p.Excludes = false
		problems = append(problems, p)
	}
	// As a child: a parent whose tier is not greater than ours.
	for p := range t.claims[name] {
		if pst := t.hyperNodes[p]; pst.spec.tier <= spec.tier {
			prob := newProblem(ReasonTierOrder,
				"its parent %s has tier %d, not greater than its own tier %d; %s and everything below it are excluded", p, pst.spec.tier, spec.tier, p)
			prob.Excludes = false
			problems = append(problems, prob)
		}
	}
	// As a leaf: nodes that other leaves select too.
	if spec.leaf {
		var shared []string
		others := sets.New[string]()
		for n := range st.nodes {
			if leaves := t.nodeLeaves[n]; leaves.Len() > 1 {
				shared = append(shared, n)
				for l := range leaves {
					if l != name {
						others.Insert(l)
					}
				}
			}
		}
		if len(shared) > 0 {
			problems = append(problems, newProblem(ReasonNodeInMultipleLeaves,
				"%d of its nodes (%s) are also selected by %s; a node can belong to one leaf only",
				len(shared), listNames(shared, 5), listNames(others.UnsortedList(), 5)))
		}
	}
	if spec.tierName != "" {
		if tiers := t.tierNameTiers[spec.tierName]; len(tiers) > 1 {
			p := newProblem(ReasonAmbiguousTierName,
				"its tierName %q is also used by HyperNodes of tiers %v; jobs cannot name that tier until every HyperNode of one tierName has the same tier",
				spec.tierName, sortedTiers(tiers))
			p.Excludes = false
			problems = append(problems, p)
		}
	}
	sortProblems(problems)
	return problems
}

func sortedTiers(m map[int]int) []int {
	out := make([]int, 0, len(m))
	for tier := range m {
		out = append(out, tier)
	}
	sort.Ints(out)
	return out
}

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
	// Bottom-up: children, leaf nodes and node counts.
	counted := sets.New[string]()
	var count func(string)
	count = func(n string) {
		if counted.Has(n) {
			return
		}
		counted.Insert(n)
		i := fresh[n]
		if i.Excluded {
			return
		}
		st := t.hyperNodes[n]
		if st.spec.leaf {
			i.Nodes = sets.List(st.nodes)
			i.NodeCount = len(i.Nodes)
			return
		}
		for _, c := range st.spec.children {
			if _, ok := t.hyperNodes[c]; !ok || t.claims[c].Len() != 1 {
				continue
			}
			if _, inScope := fresh[c]; inScope {
				count(c)
			}
			ci := info(c)
			if ci.Excluded {
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
