package hypernode

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
)

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
