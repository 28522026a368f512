// Package label discovers HyperNodes from node labels: for each topology type (Volcano's
// networkTopologyTypes, or a preset for a label scheme clusters already carry) the values of
// its labels on each node, from the top level down, are the node's path through the network.
//
// Unlike Volcano, HyperNodes are keyed by their full path: a switch named leaf-3 under two
// spines is two HyperNodes, not one HyperNode with two parents. A leaf selects its nodes with a
// labelMatch on its path, so nodes that join or leave never change a HyperNode's spec.
package label

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
)

// SourceName is the label source's name in the configuration and in the source label.
const SourceName = "label"

// ReasonMissingLabel is the Warning reason for nodes that carry some levels of a type but not
// all of them.
const ReasonMissingLabel = "NodesMissingTopologyLabel"

// examplesShown bounds the node names a warning lists.
const examplesShown = 5

// Source is the label source.
type Source struct {
	types []Type
	// keys are the label keys of every type.
	keys  sets.Set[string]
	nodes interface {
		List(labels.Selector) ([]*v1.Node, error)
	}
	// hyperNodes lists the HyperNodes in the cluster (nil: none to consult), so that a name
	// two paths want stays with the one whose HyperNode holds it.
	hyperNodes interface {
		List(labels.Selector) ([]*topologyv1alpha1.HyperNode, error)
	}
}

var _ source.Source = &Source{}

// New builds the label source from its configuration entry.
func New(entry config.Entry, env source.Env) (source.Source, field.ErrorList) {
	types, errs := ParseConfig(entry.Config, entry.Path.Child("config"))
	if len(errs) > 0 {
		return nil, errs
	}
	s := &Source{types: types, keys: sets.New[string](), nodes: env.Nodes, hyperNodes: env.HyperNodes}
	for _, t := range types {
		for _, l := range t.Levels {
			s.keys.Insert(l.Key)
		}
	}
	return s, nil
}

// Name implements source.Source.
func (s *Source) Name() string { return SourceName }

// NodeChangeMatters implements source.Source: a node matters when it gains, loses or changes
// a label of some type.
func (s *Source) NodeChangeMatters(old, new *v1.Node) bool {
	var before, after map[string]string
	if old != nil {
		before = old.Labels
	}
	if new != nil {
		after = new.Labels
	}
	for key := range s.keys {
		b, hadB := before[key]
		a, hasA := after[key]
		if hadB != hasA || a != b {
			return true
		}
	}
	return false
}

// Discover implements source.Source. The labels are read from the controller's node
// informer, and the HyperNodes the source owns from its HyperNode informer, so refresh makes
// no difference.
func (s *Source) Discover(_ context.Context, _ bool) (*source.Result, error) {
	nodes, err := s.nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	existing, err := s.existingPaths()
	if err != nil {
		return nil, err
	}
	res := &source.Result{}
	for _, t := range s.types {
		hns, warnings := t.Discover(nodes, existing)
		res.HyperNodes = append(res.HyperNodes, hns...)
		res.Warnings = append(res.Warnings, warnings...)
	}
	sort.Slice(res.HyperNodes, func(i, j int) bool { return res.HyperNodes[i].Name < res.HyperNodes[j].Name })
	return res, nil
}

// existingPaths maps the name of each HyperNode this source owns to the path it stands for
// (its PathAnnotation), or is nil without a HyperNode lister.
func (s *Source) existingPaths() (map[string]string, error) {
	if s.hyperNodes == nil {
		return nil, nil
	}
	owned, err := s.hyperNodes.List(labels.SelectorFromSet(labels.Set{source.Label: SourceName}))
	if err != nil {
		return nil, fmt.Errorf("listing HyperNodes: %w", err)
	}
	paths := make(map[string]string, len(owned))
	for _, hn := range owned {
		paths[hn.Name] = hn.Annotations[source.PathAnnotation]
	}
	return paths, nil
}

// pathNode is a prefix of some node's path: one HyperNode.
type pathNode struct {
	// pairs are the levels (indexes into Type.Levels) and values of the path, top first.
	levels []int
	values []string
	// children by level and value.
	children map[childKey]*pathNode
	// direct counts the nodes whose path ends here.
	direct int
}

type childKey struct {
	level int
	value string
}

// Discover builds the HyperNodes of one type from nodes sorted by name; existing maps the
// names of the HyperNodes the source owns to the paths they stand for (their PathAnnotation).
//
// Levels that no node carries are skipped, and tiers are numbered from 1 at the lowest level
// some node carries, so a preset that lists more levels than the cluster uses still starts at
// tier 1. A node that lacks a level is attached to the next level it carries and reported;
// where that puts nodes next to HyperNodes under one parent, the nodes get a HyperNode of
// their own one tier below (a parent holds either nodes or HyperNodes).
func (t Type) Discover(nodes []*v1.Node, existing map[string]string) ([]*topologyv1alpha1.HyperNode, []source.Warning) {
	var used []int
	for i, l := range t.Levels {
		for _, n := range nodes {
			if _, ok := n.Labels[l.Key]; ok {
				used = append(used, i)
				break
			}
		}
	}
	if len(used) == 0 {
		return nil, nil
	}
	tier := map[int]int{}
	next := map[int]int{} // the next used level below a used level
	for j, i := range used {
		tier[i] = len(used) - j
		if j+1 < len(used) {
			next[i] = used[j+1]
		}
	}

	root := &pathNode{children: map[childKey]*pathNode{}}
	missing := map[int][]string{}
	for _, n := range nodes {
		cur := root
		var lacks []int
		for _, i := range used {
			v, ok := n.Labels[t.Levels[i].Key]
			if !ok {
				lacks = append(lacks, i)
				continue
			}
			k := childKey{i, v}
			child := cur.children[k]
			if child == nil {
				child = &pathNode{
					levels:   append(append([]int(nil), cur.levels...), i),
					values:   append(append([]string(nil), cur.values...), v),
					children: map[childKey]*pathNode{},
				}
				cur.children[k] = child
			}
			cur = child
		}
		if cur == root {
			continue // none of the type's labels: not part of this topology
		}
		cur.direct++
		for _, i := range lacks {
			missing[i] = append(missing[i], n.Name)
		}
	}

	// Names by values alone, unless two paths of different levels would share one (the spine
	// 1 of a node and the leaf 1 of a node without a spine label): then by keys and values,
	// but for the one path that keeps the name (below, -1 for a path's own HyperNode, is the
	// level its nodes-without-it HyperNode lacks).
	type named struct {
		p     *pathNode
		below int
	}
	wanting := map[string][]named{}
	var collect func(p *pathNode)
	collect = func(p *pathNode) {
		plain := t.pathName(p, t.suffix(-1), false)
		wanting[plain] = append(wanting[plain], named{p, -1})
		if len(p.children) > 0 && p.direct > 0 {
			below := next[p.levels[len(p.levels)-1]]
			plain := t.pathName(p, t.suffix(below), false)
			wanting[plain] = append(wanting[plain], named{p, below})
		}
		for _, c := range sortedChildren(p.children) {
			collect(c)
		}
	}
	for _, c := range sortedChildren(root.children) {
		collect(c)
	}
	// keeps is the path, described, that keeps a name several want: the one whose HyperNode
	// holds it, so that a stray node does not rename the HyperNode that was there; failing
	// that (a fresh cluster, or a HyperNode of none of them), the one that holds every used
	// level from the top (the one that was there first, in all likelihood). Its HyperNode
	// then holds the name, so the next pass keeps it too.
	keeps := map[string]string{}
	for plain, paths := range wanting {
		if len(paths) < 2 {
			continue
		}
		for _, n := range paths {
			if d := t.describePath(n.p, n.below); d == existing[plain] {
				keeps[plain] = d
				break
			}
		}
		if keeps[plain] != "" {
			continue
		}
		for _, n := range paths {
			if slices.Equal(n.p.levels, used[:min(len(n.p.levels), len(used))]) {
				keeps[plain] = t.describePath(n.p, n.below)
				break
			}
		}
	}
	name := func(p *pathNode, below int) string {
		plain := t.pathName(p, t.suffix(below), false)
		if len(wanting[plain]) > 1 && keeps[plain] != t.describePath(p, below) {
			return t.pathName(p, t.suffix(below), true)
		}
		return plain
	}

	var out []*topologyv1alpha1.HyperNode
	var emit func(p *pathNode) string
	emit = func(p *pathNode) string {
		level := p.levels[len(p.levels)-1]
		hn := t.hyperNode(name(p, -1), tier[level], t.Levels[level].TierName, t.describePath(p, -1))
		if len(p.children) == 0 {
			hn.Spec.Members = []topologyv1alpha1.MemberSpec{t.selectNodes(p, used)}
			out = append(out, hn)
			return hn.Name
		}
		var children []string
		for _, c := range sortedChildren(p.children) {
			children = append(children, emit(c))
		}
		if p.direct > 0 {
			// The nodes that lack every level below this one, next to HyperNodes.
			// Its last component is its parent's, marked with a byte no label value holds:
			// a path of its own, named after the parent ("leaf-3-no-nvlink-<hash>").
			below := next[level]
			w := t.hyperNode(name(p, below), tier[below], "", t.describePath(p, below))
			w.Spec.Members = []topologyv1alpha1.MemberSpec{t.selectNodes(p, used)}
			out = append(out, w)
			children = append(children, w.Name)
		}
		sort.Strings(children)
		for _, c := range children {
			hn.Spec.Members = append(hn.Spec.Members, topologyv1alpha1.MemberSpec{
				Type:     topologyv1alpha1.MemberTypeHyperNode,
				Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: c}},
			})
		}
		out = append(out, hn)
		return hn.Name
	}
	for _, c := range sortedChildren(root.children) {
		emit(c)
	}

	var warnings []source.Warning
	for _, i := range used {
		names := missing[i]
		if len(names) == 0 {
			continue
		}
		shown := names
		more := ""
		if len(shown) > examplesShown {
			shown, more = shown[:examplesShown], fmt.Sprintf(" and %d more", len(names)-examplesShown)
		}
		warnings = append(warnings, source.Warning{
			Reason: ReasonMissingLabel,
			Message: fmt.Sprintf("type %s: %d node(s) carry some of its labels but not %s (%s%s); each is attached to the next level it carries",
				t.Name, len(names), t.Levels[i].Key, strings.Join(shown, ", "), more),
		})
	}
	return out, warnings
}

func (t Type) hyperNode(name string, tier int, tierName, path string) *topologyv1alpha1.HyperNode {
	return &topologyv1alpha1.HyperNode{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{source.PathAnnotation: path}},
		Spec:       topologyv1alpha1.HyperNodeSpec{Tier: tier, TierName: tierName},
	}
}

// selectNodes selects exactly the nodes whose path is p's: they carry p's labels with p's
// values and none of the type's other used labels.
func (t Type) selectNodes(p *pathNode, used []int) topologyv1alpha1.MemberSpec {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	on := sets.New(p.levels...)
	for j, i := range p.levels {
		sel.MatchLabels[t.Levels[i].Key] = p.values[j]
	}
	var absent []string
	for _, i := range used {
		if !on.Has(i) {
			absent = append(absent, t.Levels[i].Key)
		}
	}
	sort.Strings(absent)
	for _, key := range absent {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: key, Operator: metav1.LabelSelectorOpDoesNotExist})
	}
	return topologyv1alpha1.MemberSpec{Type: topologyv1alpha1.MemberTypeNode, Selector: topologyv1alpha1.MemberSelector{LabelMatch: sel}}
}

// pathName names a path's HyperNode after its label values (with keyed, each value with its
// level's key, marked with a byte no label value holds, so the name is hashed), suffix added
// to the last component.
func (t Type) pathName(p *pathNode, suffix string, keyed bool) string {
	components := append([]string(nil), p.values...)
	if keyed {
		for j, i := range p.levels {
			components[j] = t.Levels[i].Key + "\x00" + components[j]
		}
	}
	components[len(components)-1] += suffix
	return source.Name(t.Prefix, components...)
}

// suffix marks the HyperNode of a path's nodes that lack level below (-1: none, the path's
// own HyperNode), next to the path's HyperNodes: a path of its own, named after its parent
// ("leaf-3-no-nvlink-<hash>").
func (t Type) suffix(below int) string {
	if below < 0 {
		return ""
	}
	return "\x00no-" + t.Levels[below].TierName
}

// describePath says what a path stands for, as key=value pairs, for the path annotation;
// with below (not -1), its nodes that lack that level.
func (t Type) describePath(p *pathNode, below int) string {
	parts := make([]string, len(p.levels))
	for j, i := range p.levels {
		parts[j] = t.Levels[i].Key + "=" + p.values[j]
	}
	d := strings.Join(parts, ",")
	if below >= 0 {
		d += "," + t.Levels[below].Key + " (none)"
	}
	return d
}

func sortedChildren(m map[childKey]*pathNode) []*pathNode {
	out := make([]*pathNode, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		la, lb := a.levels[len(a.levels)-1], b.levels[len(b.levels)-1]
		if la != lb {
			return la < lb
		}
		return a.values[len(a.values)-1] < b.values[len(b.values)-1]
	})
	return out
}
