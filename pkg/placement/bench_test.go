package placement

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

// BenchmarkPlanBigGang plans a 5,000-pod gang (one 8-GPU pod per node) on 10,000 nodes:
// leaves of 32 nodes (tier 1), two spines of 160 leaves (tier 2), one core (tier 3); hard at
// tier 2, so the first spine with room wins after tier 1 fails.
func BenchmarkPlanBigGang(b *testing.B) {
	const nodesTotal, perLeaf, leavesPerSpine, gang = 10000, 32, 160, 5000
	nodes := map[string]labels.Set{}
	capacity := map[string]Node{}
	for i := range nodesTotal {
		name := fmt.Sprintf("r%03d-n%02d", i/perLeaf, i%perLeaf)
		nodes[name] = labels.Set{}
		capacity[name] = Node{Capacity: 1, Used: []float64{0}, Allocatable: []float64{8}}
	}
	var hns []*topologyv1alpha1.HyperNode
	leaves := (nodesTotal + perLeaf - 1) / perLeaf
	for l := range leaves {
		var members []string
		for i := l * perLeaf; i < min((l+1)*perLeaf, nodesTotal); i++ {
			members = append(members, fmt.Sprintf("r%03d-n%02d", i/perLeaf, i%perLeaf))
		}
		hns = append(hns, hntesting.MakeHyperNode(fmt.Sprintf("leaf-%d", l)).Tier(1).Nodes(members...).Obj())
	}
	var spines []string
	for s := 0; s*leavesPerSpine < leaves; s++ {
		var children []string
		for l := s * leavesPerSpine; l < min((s+1)*leavesPerSpine, leaves); l++ {
			children = append(children, fmt.Sprintf("leaf-%d", l))
		}
		name := fmt.Sprintf("spine-%d", s)
		hns = append(hns, hntesting.MakeHyperNode(name).Tier(2).Children(children...).Obj())
		spines = append(spines, name)
	}
	hns = append(hns, hntesting.MakeHyperNode("core").Tier(3).Children(spines...).Obj())
	tree := hypernode.Build(nodes, hns).Snapshot()
	pending := pods(gang)
	for _, strategy := range []Strategy{BinPack, LeastWaste} {
		b.Run(string(strategy), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				plan, err := Make(Request{Tree: tree, Constraint: "hard topology (tier<=2)", MaxTier: 2, Pending: pending,
					Nodes: capacity, Strategy: strategy, Weights: []float64{1}, PodRequest: []float64{8}})
				if err != nil {
					b.Fatal(err)
				}
				if plan.Tier != 2 || len(plan.PodLeaf) != gang {
					b.Fatalf("plan in %s (tier %d) for %d pods", plan.Domain, plan.Tier, len(plan.PodLeaf))
				}
			}
		})
	}
}
