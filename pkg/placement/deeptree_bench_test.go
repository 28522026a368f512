package placement

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

// deepFanout is how many children each tier's HyperNodes have, tier 1 first (nodes per leaf):
// 6,000 nodes under 6,000 + 3,000 + 500 + 100 + 10 + 1 = 9,611 HyperNodes in six tiers, the
// size at which Volcano took minutes to place one PodGroup (Volcano issues #4899 and #5811:
// 6,000 nodes, 9,600 HyperNodes).
var deepFanout = []int{1, 2, 6, 5, 10, 10}

const deepNodes = 6000

// deepCluster is deepFanout's tree over deepNodes nodes of one 8-GPU member each.
func deepCluster(tb testing.TB) (*hypernode.Snapshot, map[string]Node, int) {
	nodes, capacity, hns := deepClusterObjects(tb)
	return hypernode.Build(nodes, hns).Snapshot(), capacity, len(hns)
}

func deepClusterObjects(tb testing.TB) (map[string]labels.Set, map[string]Node, []*topologyv1alpha1.HyperNode) {
	nodes := map[string]labels.Set{}
	capacity := map[string]Node{}
	var level []string
	for i := range deepNodes {
		name := fmt.Sprintf("n%04d", i)
		nodes[name] = labels.Set{}
		capacity[name] = Node{Capacity: 1, Used: []float64{0}, Allocatable: []float64{8}}
		level = append(level, name)
	}
	var hns []*topologyv1alpha1.HyperNode
	for t, fanout := range deepFanout {
		var next []string
		for start := 0; start < len(level); start += fanout {
			name := fmt.Sprintf("t%d-%04d", t+1, len(next))
			w := hntesting.MakeHyperNode(name).Tier(t + 1)
			if t == 0 {
				w = w.Nodes(level[start:min(start+fanout, len(level))]...)
			} else {
				w = w.Children(level[start:min(start+fanout, len(level))]...)
			}
			hns = append(hns, w.Obj())
			next = append(next, name)
		}
		level = next
	}
	if len(level) != 1 {
		tb.Fatalf("%d HyperNodes at the top tier, want 1", len(level))
	}
	return nodes, capacity, hns
}

// BenchmarkBuildDeepTree builds deepCluster's tree from its nodes and HyperNodes at once.
func BenchmarkBuildDeepTree(b *testing.B) {
	nodes, _, hns := deepClusterObjects(b)
	b.ReportAllocs()
	for b.Loop() {
		if tree := hypernode.Build(nodes, hns).Snapshot(); tree.Len() != len(hns) {
			b.Fatalf("%d HyperNodes in the tree, want %d", tree.Len(), len(hns))
		}
	}
}

// BenchmarkPlanDeepTree plans a 1,000-pod gang (one 8-GPU pod per node) on deepCluster: no
// HyperNode below the top tier holds it (a tier-5 HyperNode has 600 nodes), so every tier is
// searched first. As one job, and as 100 sub-groups of 10 each hard at tier 3 (12 nodes),
// Volcano's issue #4899 shape.
func BenchmarkPlanDeepTree(b *testing.B) {
	tree, capacity, hyperNodes := deepCluster(b)
	if hyperNodes != 9611 {
		b.Fatalf("%d HyperNodes, want 9,611", hyperNodes)
	}
	const size, count = 10, 100
	pending := pods(size * count)
	var subGroups []SubGroup
	for i := range count {
		subGroups = append(subGroups, SubGroup{ID: fmt.Sprintf("sg-%03d", i), Policy: "sg",
			Constraint: "hard topology (tier<=3)", MaxTier: 3, Pending: pending[i*size : (i+1)*size]})
	}
	for name, sgs := range map[string][]SubGroup{"one-job": nil, "100-subgroups": subGroups} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				plan, err := Make(Request{Tree: tree, Constraint: "hard topology (tier<=6)", MaxTier: 6, Pending: pending,
					Nodes: capacity, Strategy: BinPack, Weights: []float64{1}, PodRequest: []float64{8}, SubGroups: sgs})
				if err != nil {
					b.Fatal(err)
				}
				if plan.Tier != 6 || len(plan.PodLeaf) != size*count {
					b.Fatalf("plan in %s (tier %d) for %d pods", plan.Domain, plan.Tier, len(plan.PodLeaf))
				}
			}
		})
	}
}
