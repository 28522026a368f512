package hypernode

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

// TestTotalNodeCount checks what status.nodeCount reports: the existing nodes below a
// HyperNode by its spec, valid or not, where NodeCount counts only what placement may use.
func TestTotalNodeCount(t *testing.T) {
	nodes := map[string]labels.Set{
		"n0": {"rack": "r0"}, "n1": {"rack": "r0"}, "n2": {}, "n3": {}, "n4": {},
	}
	type counts struct{ Total, Usable int }
	for _, tc := range []struct {
		name string
		hns  []*topologyv1alpha1.HyperNode
		want map[string]counts
	}{
		{
			name: "a valid tree sums its leaves; names of missing nodes do not count",
			hns: []*topologyv1alpha1.HyperNode{
				hntesting.MakeHyperNode("s0").Tier(1).Nodes("n0", "n1", "ghost").Obj(),
				hntesting.MakeHyperNode("s1").Tier(1).NodeLabels(map[string]string{"rack": "r9"}).Nodes("n2").Obj(),
				hntesting.MakeHyperNode("s4").Tier(2).Children("s0", "s1", "missing").Obj(),
			},
			want: map[string]counts{"s0": {2, 2}, "s1": {1, 1}, "s4": {3, 3}},
		},
		{
			name: "an excluded leaf still counts its nodes, and so does its parent",
			hns: []*topologyv1alpha1.HyperNode{
				hntesting.MakeHyperNode("s0").Tier(1).Nodes("n0").Obj(),
				hntesting.MakeHyperNode("bad").Tier(1).Nodes("n1", "n2").NodeRegex("([").Obj(),
				hntesting.MakeHyperNode("s4").Tier(2).Children("s0", "bad").Obj(),
			},
			want: map[string]counts{"s0": {1, 1}, "bad": {2, 0}, "s4": {3, 1}},
		},
		{
			name: "a node selected by two leaves counts in both",
			hns: []*topologyv1alpha1.HyperNode{
				hntesting.MakeHyperNode("a").Tier(1).NodeLabels(map[string]string{"rack": "r0"}).Obj(),
				hntesting.MakeHyperNode("b").Tier(1).Nodes("n1", "n3").Obj(),
				hntesting.MakeHyperNode("p").Tier(2).Children("a", "b").Obj(),
			},
			want: map[string]counts{"a": {2, 0}, "b": {2, 0}, "p": {4, 0}},
		},
		{
			name: "a cycle is not followed; what hangs below it is counted",
			hns: []*topologyv1alpha1.HyperNode{
				hntesting.MakeHyperNode("x").Tier(3).Children("y", "leaf").Obj(),
				hntesting.MakeHyperNode("y").Tier(2).Children("x").Obj(),
				hntesting.MakeHyperNode("leaf").Tier(1).Nodes("n4").Obj(),
				hntesting.MakeHyperNode("top").Tier(4).Children("x").Obj(),
			},
			want: map[string]counts{"x": {1, 0}, "y": {0, 0}, "leaf": {1, 0}, "top": {1, 0}},
		},
		{
			name: "a child of two parents counts in both",
			hns: []*topologyv1alpha1.HyperNode{
				hntesting.MakeHyperNode("l").Tier(1).Nodes("n0", "n1").Obj(),
				hntesting.MakeHyperNode("p1").Tier(2).Children("l").Obj(),
				hntesting.MakeHyperNode("p2").Tier(2).Children("l").Obj(),
			},
			want: map[string]counts{"l": {2, 0}, "p1": {2, 0}, "p2": {2, 0}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := Build(nodes, tc.hns).Snapshot()
			got := map[string]counts{}
			snap.RangeHyperNodes(func(i *HyperNodeInfo) bool {
				got[i.Name] = counts{i.TotalNodeCount, i.NodeCount}
				return true
			})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("counts (-want,+got):\n%s", diff)
			}
			// The incremental path agrees, whatever the order of the events.
			tree := NewTree()
			for i := len(tc.hns) - 1; i >= 0; i-- {
				tree.SetHyperNode(tc.hns[i])
			}
			for name, l := range nodes {
				tree.SetNode(name, l)
			}
			incremental := map[string]counts{}
			tree.Snapshot().RangeHyperNodes(func(i *HyperNodeInfo) bool {
				incremental[i.Name] = counts{i.TotalNodeCount, i.NodeCount}
				return true
			})
			if diff := cmp.Diff(tc.want, incremental); diff != "" {
				t.Errorf("incremental counts (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestChangedSince checks that a node event reports exactly the HyperNodes it recomputed (its
// leaf and the leaf's ancestors), and HyperNode events report additions and removals.
func TestChangedSince(t *testing.T) {
	tree := Build(map[string]labels.Set{"n0": {}, "n2": {}}, []*topologyv1alpha1.HyperNode{
		hntesting.MakeHyperNode("s0").Tier(1).NodeRegex("^n[01]$").Obj(),
		hntesting.MakeHyperNode("s1").Tier(1).NodeRegex("^n[23]$").Obj(),
		hntesting.MakeHyperNode("s4").Tier(2).Children("s0").Obj(),
		hntesting.MakeHyperNode("s5").Tier(2).Children("s1").Obj(),
		hntesting.MakeHyperNode("s6").Tier(3).Children("s4", "s5").Obj(),
	})
	changed := func(apply func()) []string {
		before := tree.Snapshot()
		apply()
		var out []string
		tree.Snapshot().ChangedSince(before, func(name string) { out = append(out, name) })
		sort.Strings(out)
		return out
	}
	for _, tc := range []struct {
		name  string
		apply func()
		want  []string
	}{
		{"a node joins s0", func() { tree.SetNode("n1", labels.Set{}) }, []string{"s0", "s4", "s6"}},
		{"a node of no leaf joins", func() { tree.SetNode("other", labels.Set{}) }, nil},
		{"a node leaves s1", func() { tree.DeleteNode("n2") }, []string{"s1", "s5", "s6"}},
		// A new root moves everything one level down (every depth changes).
		{"a root is added", func() { tree.SetHyperNode(hntesting.MakeHyperNode("s7").Tier(4).Children("s6").Obj()) },
			[]string{"s0", "s1", "s4", "s5", "s6", "s7"}},
		{"a root is deleted", func() { tree.DeleteHyperNode("s7") }, []string{"s0", "s1", "s4", "s5", "s6", "s7"}},
		// A spec change recomputes the HyperNode's children and ancestors.
		{"s5 lists a missing member", func() { tree.SetHyperNode(hntesting.MakeHyperNode("s5").Tier(2).Children("s1", "s8").Obj()) },
			[]string{"s1", "s5", "s6"}},
		{"the missing member appears", func() { tree.SetHyperNode(hntesting.MakeHyperNode("s8").Tier(1).Nodes("n9").Obj()) },
			[]string{"s5", "s6", "s8"}},
	} {
		if diff := cmp.Diff(tc.want, changed(tc.apply)); diff != "" {
			t.Errorf("%s: changed HyperNodes (-want,+got):\n%s", tc.name, diff)
		}
	}
}
