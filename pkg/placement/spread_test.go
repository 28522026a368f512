package placement

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

// TestSpreadKeepsLargerLeavesWhole: a spine of four one-node leaves with 2, 8, 8 and 3 free
// slots. Ten members need two leaves; the second is the smallest leaf that holds the rest,
// so the other 8-slot leaf stays whole for the next gang.
func TestSpreadKeepsLargerLeavesWhole(t *testing.T) {
	leafSlots := map[string]int{"leaf-a": 2, "leaf-b": 8, "leaf-c": 8, "leaf-d": 3}
	nodes := map[string]labels.Set{}
	perNode := map[string]int{}
	var hyperNodes []*topologyv1alpha1.HyperNode
	for _, leaf := range []string{"leaf-a", "leaf-b", "leaf-c", "leaf-d"} {
		node := "node-" + leaf[len("leaf-"):]
		nodes[node] = labels.Set{}
		perNode[node] = leafSlots[leaf]
		hyperNodes = append(hyperNodes, hntesting.MakeHyperNode(leaf).Tier(1).Nodes(node).Obj())
	}
	hyperNodes = append(hyperNodes, hntesting.MakeHyperNode("spine").Tier(2).Children("leaf-a", "leaf-b", "leaf-c", "leaf-d").Obj())
	tree := hypernode.Build(nodes, hyperNodes).Snapshot()

	tests := []struct {
		name    string
		pending int
		placed  []string
		want    map[string][]string
	}{
		{
			name:    "the rest goes to the smallest leaf that holds it",
			pending: 10,
			want:    map[string][]string{"leaf-a": {"p0", "p1"}, "leaf-b": pods(10)[2:]},
		},
		{
			name:    "the rest of three skips the 2-slot leaf",
			pending: 11,
			want:    map[string][]string{"leaf-b": pods(11)[:8], "leaf-d": pods(11)[8:]},
		},
		{
			name:    "one leaf holds it all: the largest, as before",
			pending: 8,
			want:    map[string][]string{"leaf-b": pods(8)},
		},
		{
			name:    "a leaf holding placed members comes first; the rest by best fit",
			pending: 9,
			placed:  []string{"node-c"},
			want:    map[string][]string{"leaf-a": {"p0"}, "leaf-c": pods(9)[1:]},
		},
		{
			name:    "three leaves: the two largest, then the best fit",
			pending: 18,
			want:    map[string][]string{"leaf-a": {"p0", "p1"}, "leaf-b": pods(18)[2:10], "leaf-c": pods(18)[10:]},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Make(Request{Tree: tree, Constraint: "hard topology (tier<=2)", MaxTier: 2,
				Pending: pods(tc.pending), Placed: tc.placed, Nodes: capacities(perNode)})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.LeafPods); diff != "" {
				t.Errorf("leaves (-want +got):\n%s", diff)
			}
		})
	}
}

// coreOfSpines is a core (tier 3) over the spines in order, each over one-node leaves with the
// given free slots, and the slots per node.
func coreOfSpines(spines []string, leafSlots map[string][]int) (*hypernode.Snapshot, map[string]int) {
	nodes := map[string]labels.Set{}
	perNode := map[string]int{}
	var hyperNodes []*topologyv1alpha1.HyperNode
	for _, spine := range spines {
		var children []string
		for i, slots := range leafSlots[spine] {
			leaf := fmt.Sprintf("%s-leaf-%d", spine, i)
			node := "node-" + leaf
			nodes[node], perNode[node] = labels.Set{}, slots
			hyperNodes = append(hyperNodes, hntesting.MakeHyperNode(leaf).Tier(1).Nodes(node).Obj())
			children = append(children, leaf)
		}
		hyperNodes = append(hyperNodes, hntesting.MakeHyperNode(spine).Tier(2).Children(children...).Obj())
	}
	hyperNodes = append(hyperNodes, hntesting.MakeHyperNode("core").Tier(3).Children(spines...).Obj())
	return hypernode.Build(nodes, hyperNodes).Snapshot(), perNode
}

// TestSpreadAboveLeaves: above the leaves the spread is largest-first filled in tree order, as
// before the best fit among leaves; a smaller spine could need more leaves for the rest (its
// capacity says nothing of its leaves), so none is preferred for being smaller.
func TestSpreadAboveLeaves(t *testing.T) {
	tests := []struct {
		name      string
		spines    []string
		leafSlots map[string][]int
		pending   int
		want      map[string]int // members per leaf
	}{
		{
			// Largest first takes spine-y and then spine-x; filled in tree order, spine-x's
			// one leaf takes 10 and spine-y 2 of its one-slot leaves: 3 leaves, not 12.
			name:      "a large spine of small leaves is not filled first",
			spines:    []string{"spine-x", "spine-y"},
			leafSlots: map[string][]int{"spine-x": {10}, "spine-y": {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
			pending:   12,
			want:      map[string]int{"spine-x-leaf-0": 10, "spine-y-leaf-0": 1, "spine-y-leaf-1": 1},
		},
		{
			// spine-z and spine-y by capacity; inside spine-z the rest of 6 goes by best fit.
			name:      "spines largest first, filled in tree order; the leaves of each by best fit",
			spines:    []string{"spine-x", "spine-y", "spine-z"},
			leafSlots: map[string][]int{"spine-x": {4, 4, 4}, "spine-y": {10, 10}, "spine-z": {16, 16, 6}},
			pending:   58,
			want:      map[string]int{"spine-y-leaf-0": 10, "spine-y-leaf-1": 10, "spine-z-leaf-0": 16, "spine-z-leaf-1": 16, "spine-z-leaf-2": 6},
		},
		{
			name:      "the rest inside a spine goes to its smallest leaf that holds it",
			spines:    []string{"spine-x", "spine-z"},
			leafSlots: map[string][]int{"spine-x": {4}, "spine-z": {16, 16, 7}},
			pending:   22,
			want:      map[string]int{"spine-z-leaf-0": 16, "spine-z-leaf-2": 6},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tree, perNode := coreOfSpines(tc.spines, tc.leafSlots)
			got, err := Make(Request{Tree: tree, Constraint: "hard topology (tier<=3)", MaxTier: 3,
				Pending: pods(tc.pending), Nodes: capacities(perNode)})
			if err != nil {
				t.Fatal(err)
			}
			counts := map[string]int{}
			for leaf, members := range got.LeafPods {
				counts[leaf] = len(members)
			}
			if diff := cmp.Diff(tc.want, counts); diff != "" {
				t.Errorf("members per leaf (-want +got):\n%s", diff)
			}
		})
	}
}
