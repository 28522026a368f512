package label

import (
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
)

// The tests of how paths are named: plain, keyed on a collision, kept by an existing
// HyperNode, made valid.

// TestPathKeys: the same switch name under two spines is two HyperNodes (Volcano merges them
// into one HyperNode with two parents, which the scheduler must exclude).
func TestPathKeys(t *testing.T) {
	nodes := []*v1.Node{
		node("a", "ex.com/spine=spine-1", "ex.com/leaf=leaf-1"),
		node("b", "ex.com/spine=spine-2", "ex.com/leaf=leaf-1"),
	}
	s := newSource(t, spineLeafConfig("fab"), nodes...)
	res := discover(t, s)
	want := []string{
		`fab.spine-1 2 "spine" [fab.spine-1.leaf-1]`,
		`fab.spine-1.leaf-1 1 "leaf" [{ex.com/leaf=leaf-1,ex.com/spine=spine-1}]`,
		`fab.spine-2 2 "spine" [fab.spine-2.leaf-1]`,
		`fab.spine-2.leaf-1 1 "leaf" [{ex.com/leaf=leaf-1,ex.com/spine=spine-2}]`,
	}
	if diff := cmp.Diff(want, render(res.HyperNodes)); diff != "" {
		t.Errorf("HyperNodes (-want,+got):\n%s", diff)
	}
	assertValidTree(t, nodes, res.HyperNodes)
}

// TestPathsOfOtherLevelsGetOtherNames: a node with only the spine label and one with only the
// leaf label, both valued "1", are two HyperNodes of two tiers with two names: by values alone
// they would be one, so the path that skips the spine level is named by keys and values, and
// the spine keeps its name.
func TestPathsOfOtherLevelsGetOtherNames(t *testing.T) {
	nodes := []*v1.Node{node("a", "ex.com/spine=1"), node("b", "ex.com/leaf=1")}
	s := newSource(t, spineLeafConfig("f"), nodes...)
	res := discover(t, s)
	want := []string{
		`f.1 2 "spine" [{!ex.com/leaf,ex.com/spine=1}]`,
		source.Name("f", "ex.com/leaf\x001") + ` 1 "leaf" [{ex.com/leaf=1,!ex.com/spine}]`,
	}
	got := render(res.HyperNodes)
	sort.Strings(got)
	sort.Strings(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("HyperNodes (-want,+got):\n%s", diff)
	}
	assertValidTree(t, nodes, res.HyperNodes)
}

// fakeHyperNodes lists fixed HyperNodes, those the selector matches.
type fakeHyperNodes []*topologyv1alpha1.HyperNode

func (f fakeHyperNodes) List(sel labels.Selector) ([]*topologyv1alpha1.HyperNode, error) {
	var out []*topologyv1alpha1.HyperNode
	for _, hn := range f {
		if sel.Matches(labels.Set(hn.Labels)) {
			out = append(out, hn)
		}
	}
	return out, nil
}

// owned is a HyperNode of the given source that stands for path.
func owned(sourceName, name, path string) *topologyv1alpha1.HyperNode {
	return &topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{
		Name:        name,
		Labels:      map[string]string{source.Label: sourceName},
		Annotations: map[string]string{source.PathAnnotation: path},
	}}
}

// TestNameCollisionKeepsTheExistingHyperNode: of the paths of different levels that want one
// name, the one whose HyperNode the source owns under that name keeps it, so a stray node
// with only the spine label does not turn the leaf f.1 into a spine (and back when it goes);
// with no such HyperNode, the path that holds every used level from the top keeps it. Either
// way a second pass over the HyperNodes the first one wanted gives the same answer.
func TestNameCollisionKeepsTheExistingHyperNode(t *testing.T) {
	conf := spineLeafConfig("f")
	a, b, stray := node("a", "ex.com/leaf=1"), node("b", "ex.com/leaf=2"), node("stray", "ex.com/spine=1")
	keyedSpine, keyedLeaf := source.Name("f", "ex.com/spine\x001"), source.Name("f", "ex.com/leaf\x001")
	const (
		spineKeeps    = `f.1 2 "spine" [{!ex.com/leaf,ex.com/spine=1}]`
		leafKeeps     = `f.1 1 "leaf" [{ex.com/leaf=1,!ex.com/spine}]`
		spineMoves    = ` 2 "spine" [{!ex.com/leaf,ex.com/spine=1}]`
		leafMoves     = ` 1 "leaf" [{ex.com/leaf=1,!ex.com/spine}]`
		leaf2         = `f.2 1 "leaf" [{ex.com/leaf=2,!ex.com/spine}]`
		leaf1NoSpines = `f.1 1 "leaf" [{ex.com/leaf=1}]`
		leaf2NoSpines = `f.2 1 "leaf" [{ex.com/leaf=2}]`
	)
	for _, tc := range []struct {
		name     string
		nodes    []*v1.Node
		existing []*topologyv1alpha1.HyperNode
		want     []string
	}{
		{
			name:  "a fresh cluster: the path with every used level from the top keeps the name",
			nodes: []*v1.Node{a, b, stray},
			want:  []string{spineKeeps, keyedLeaf + leafMoves, leaf2},
		},
		{
			name:  "a stray node does not rename the leaf that was there",
			nodes: []*v1.Node{a, b, stray},
			existing: []*topologyv1alpha1.HyperNode{
				owned(SourceName, "f.1", "ex.com/leaf=1"), owned(SourceName, "f.2", "ex.com/leaf=2"),
			},
			want: []string{leafKeeps, keyedSpine + spineMoves, leaf2},
		},
		{
			name:  "the stray node leaves: nothing collides, nothing is renamed",
			nodes: []*v1.Node{a, b},
			existing: []*topologyv1alpha1.HyperNode{
				owned(SourceName, "f.1", "ex.com/leaf=1"), owned(SourceName, "f.2", "ex.com/leaf=2"),
				owned(SourceName, keyedSpine, "ex.com/spine=1"),
			},
			want: []string{leaf1NoSpines, leaf2NoSpines},
		},
		{
			name:  "a stray leaf does not rename the spine that was there",
			nodes: []*v1.Node{a, stray},
			existing: []*topologyv1alpha1.HyperNode{
				owned(SourceName, "f.1", "ex.com/spine=1"),
			},
			want: []string{spineKeeps, keyedLeaf + leafMoves},
		},
		{
			name:  "the HyperNode that held the name was deleted: the rule of a fresh cluster",
			nodes: []*v1.Node{a, b, stray},
			existing: []*topologyv1alpha1.HyperNode{
				owned(SourceName, keyedSpine, "ex.com/spine=1"), owned(SourceName, "f.2", "ex.com/leaf=2"),
			},
			want: []string{spineKeeps, keyedLeaf + leafMoves, leaf2},
		},
		{
			name:  "a HyperNode of another source decides nothing",
			nodes: []*v1.Node{a, b, stray},
			existing: []*topologyv1alpha1.HyperNode{
				owned("ufm", "f.1", "ex.com/leaf=1"), owned(SourceName, "f.2", "ex.com/leaf=2"),
			},
			want: []string{spineKeeps, keyedLeaf + leafMoves, leaf2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSource(t, conf, tc.nodes...)
			s.hyperNodes = fakeHyperNodes(tc.existing)
			want := append([]string(nil), tc.want...)
			sort.Strings(want)
			res := discover(t, s)
			if diff := cmp.Diff(want, render(res.HyperNodes)); diff != "" {
				t.Errorf("HyperNodes (-want,+got):\n%s", diff)
			}
			assertValidTree(t, tc.nodes, res.HyperNodes)

			// The next pass finds the HyperNodes this one wanted.
			var next fakeHyperNodes
			for _, hn := range res.HyperNodes {
				next = append(next, owned(SourceName, hn.Name, hn.Annotations[source.PathAnnotation]))
			}
			s.hyperNodes = next
			if diff := cmp.Diff(want, render(discover(t, s).HyperNodes)); diff != "" {
				t.Errorf("HyperNodes of the next pass (-first,+next):\n%s", diff)
			}
		})
	}
}

// TestNamesAreValid: label values that are not DNS labels (upper case, dots, 63 characters)
// give valid names with a hash, distinct per path.
func TestNamesAreValid(t *testing.T) {
	long := strings.Repeat("Spine_", 11)[:63]
	nodes := []*v1.Node{
		node("a", "ex.com/spine="+long, "ex.com/leaf=Leaf.1"),
		node("b", "ex.com/spine="+long, "ex.com/leaf=leaf-1"),
		node("c", "ex.com/spine=s", "ex.com/leaf="),
	}
	s := newSource(t, "networkTopologyTypes:\n  Fabric_A:\n  - nodeLabel: ex.com/spine\n  - nodeLabel: ex.com/leaf\n", nodes...)
	res := discover(t, s)
	names := map[string]bool{}
	for _, hn := range res.HyperNodes {
		if errs := validation.IsDNS1123Subdomain(hn.Name); len(errs) > 0 || len(hn.Name) > source.MaxNameLength {
			t.Errorf("invalid name %q: %v", hn.Name, errs)
		}
		if !strings.HasPrefix(hn.Name, "fabric-a.") {
			t.Errorf("name %q does not start with the type's prefix fabric-a.", hn.Name)
		}
		names[hn.Name] = true
	}
	if len(names) != 5 {
		t.Errorf("%d distinct names for 5 paths: %v", len(names), names)
	}
	assertValidTree(t, nodes, res.HyperNodes)
}

// assertValidTree builds the scheduler's tree from the nodes and the discovered HyperNodes,
// fails on any problem the validator finds, and returns each node's leaf.
