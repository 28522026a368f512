package placement

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// BenchmarkPlanBigGang plans a 5,000-pod gang (one 8-GPU pod per node) on bigCluster's
// 10,000 nodes, hard at tier 2, so the first spine with room wins after tier 1 fails.
func BenchmarkPlanBigGang(b *testing.B) {
	tree, capacity := bigCluster()
	pending := pods(5000)
	for _, strategy := range []Strategy{BinPack, LeastWaste} {
		b.Run(string(strategy), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				plan, err := Make(Request{Tree: tree, Constraint: "hard topology (tier<=2)", MaxTier: 2, Pending: pending,
					Nodes: capacity, Strategy: strategy, Weights: []float64{1}, PodRequest: []float64{8}})
				if err != nil {
					b.Fatal(err)
				}
				if plan.Tier != 2 || len(plan.PodLeaf) != 5000 {
					b.Fatalf("plan in %s (tier %d) for %d pods", plan.Domain, plan.Tier, len(plan.PodLeaf))
				}
			}
		})
	}
}

// BenchmarkPlanSubGroups plans the same 5,000-pod gang as 625 sub-groups of 8 (a pipeline
// stage each), every sub-group hard at tier 1, the job hard at tier 2.
func BenchmarkPlanSubGroups(b *testing.B) {
	tree, capacity := bigCluster()
	const size, count = 8, 625
	pending := pods(size * count)
	var subGroups []SubGroup
	for i := range count {
		subGroups = append(subGroups, SubGroup{ID: fmt.Sprintf("stage-%03d", i), Policy: "stage",
			Constraint: "hard topology (tier<=1)", MaxTier: 1, Pending: pending[i*size : (i+1)*size]})
	}
	for _, strategy := range []Strategy{BinPack, LeastWaste} {
		b.Run(string(strategy), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				plan, err := Make(Request{Tree: tree, Constraint: "hard topology (tier<=2)", MaxTier: 2, Pending: pending,
					Nodes: capacity, Strategy: strategy, Weights: []float64{1}, PodRequest: []float64{8}, SubGroups: subGroups})
				if err != nil {
					b.Fatal(err)
				}
				if plan.Tier != 2 || len(plan.PodLeaf) != size*count {
					b.Fatalf("plan in %s (tier %d) for %d pods", plan.Domain, plan.Tier, len(plan.PodLeaf))
				}
			}
		})
	}
}

// BenchmarkPlanSmallSubGroups plans a job of 8 pods as 2 sub-groups of 4 (each hard at tier
// 1, the job hard at tier 2) on the 10,000 nodes: every leaf can hold it, and with sub-groups
// every fitting candidate of the tier is scored.
func BenchmarkPlanSmallSubGroups(b *testing.B) {
	tree, capacity := bigCluster()
	pending := pods(8)
	subGroups := []SubGroup{
		{ID: "tp-0", Policy: "tp", Constraint: "hard topology (tier<=1)", MaxTier: 1, Pending: pending[:4]},
		{ID: "tp-1", Policy: "tp", Constraint: "hard topology (tier<=1)", MaxTier: 1, Pending: pending[4:]},
	}
	b.ReportAllocs()
	for b.Loop() {
		plan, err := Make(Request{Tree: tree, Constraint: "hard topology (tier<=2)", MaxTier: 2, Pending: pending,
			Nodes: capacity, Strategy: BinPack, Weights: []float64{1}, PodRequest: []float64{8}, SubGroups: subGroups})
		if err != nil {
			b.Fatal(err)
		}
		if plan.Tier != 1 || len(plan.PodLeaf) != 8 {
			b.Fatalf("plan in %s (tier %d) for %d pods", plan.Domain, plan.Tier, len(plan.PodLeaf))
		}
	}
}

// BenchmarkPlanOneOfABigGang plans the replacement of one member of a 5,000-pod gang whose
// 4,999 others are placed (a pod that failed and came back), hard at tier 2.
func BenchmarkPlanOneOfABigGang(b *testing.B) {
	tree, capacity := bigCluster()
	nodes := tree.Nodes(hypernode.VirtualRootName)
	placed := nodes[:4999]
	free := map[string]Node{}
	for n, c := range capacity {
		free[n] = c
	}
	for _, n := range placed {
		free[n] = Node{Capacity: 0, Used: []float64{8}, Allocatable: []float64{8}}
	}
	b.ReportAllocs()
	for b.Loop() {
		plan, err := Make(Request{Tree: tree, Constraint: "hard topology (tier<=2)", MaxTier: 2, Pending: pods(1), Placed: placed,
			Nodes: free, Strategy: BinPack, Weights: []float64{1}, PodRequest: []float64{8}})
		if err != nil {
			b.Fatal(err)
		}
		if len(plan.PodLeaf) != 1 {
			b.Fatalf("plan for %d pods", len(plan.PodLeaf))
		}
	}
}

// bigCluster is 10,000 nodes of one 8-GPU member each: leaves of 32 nodes (tier 1), two
// spines of 160 leaves (tier 2), one core (tier 3).
func bigCluster() (*hypernode.Snapshot, map[string]Node) {
	const nodesTotal, perLeaf, leavesPerSpine = 10000, 32, 160
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
	return hypernode.Build(nodes, hns).Snapshot(), capacity
}

// BenchmarkPlanMixedSubGroups is BenchmarkPlanSubGroups with a launcher of another shape
// (cpu=1, in no sub-group), which makes the planner pack node by node (mixed.go).
func BenchmarkPlanMixedSubGroups(b *testing.B) {
	tree, capacity := bigCluster()
	for _, count := range []int{50, 200, 625} {
		const size = 8
		workers := pods(size * count)
		var subGroups []SubGroup
		for i := range count {
			subGroups = append(subGroups, SubGroup{ID: fmt.Sprintf("stage-%03d", i), Policy: "stage",
				Constraint: "hard topology (tier<=1)", MaxTier: 1, Pending: workers[i*size : (i+1)*size]})
		}
		workerCap, launcherCap := map[string]int{}, map[string]int{}
		for n := range capacity {
			workerCap[n], launcherCap[n] = 1, 1
		}
		shapes := []Shape{
			{Name: "cpu=4,gpu=8", Members: workers, Capacity: workerCap, Request: []float64{8}},
			{Name: "cpu=1", Members: []string{"launcher"}, Capacity: launcherCap, Request: []float64{0}},
		}
		// A node holds one worker and one launcher.
		fit := func(node string, planned []int, shape, limit int) int { return min(limit, 1-planned[shape]) }
		pending := append(append([]string(nil), workers...), "launcher")
		b.Run(fmt.Sprintf("%d-subgroups", count), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				plan, err := Make(Request{Tree: tree, Constraint: "hard topology (tier<=2)", MaxTier: 2, Pending: pending,
					Nodes: capacity, Strategy: BinPack, Weights: []float64{1}, SubGroups: subGroups, Shapes: shapes, Fit: fit})
				if err != nil {
					b.Fatal(err)
				}
				if len(plan.PodLeaf) != len(pending) {
					b.Fatalf("plan for %d pods", len(plan.PodLeaf))
				}
			}
		})
	}
}

// BenchmarkRetryWithoutSubGroups is BenchmarkPlanSubGroups on a cluster where every leaf has
// 4 of its 32 nodes busy: a leaf holds three stages, a spine 480 of the 625, so the job
// (minMember 2,500) runs with the first 480 and the planner finds out how many to leave out.
func BenchmarkRetryWithoutSubGroups(b *testing.B) {
	tree, capacity := bigCluster()
	for name, node := range capacity {
		if name[len(name)-2:] >= "28" {
			node.Capacity = 0
			capacity[name] = node
		}
	}
	const size, count = 8, 625
	pending := pods(size * count)
	var subGroups []SubGroup
	var states []podgroup.SubGroupState
	for i := range count {
		id := fmt.Sprintf("stage-%03d", i)
		subGroups = append(subGroups, SubGroup{ID: id, Policy: "stage",
			Constraint: "hard topology (tier<=1)", MaxTier: 1, Pending: pending[i*size : (i+1)*size]})
		states = append(states, podgroup.SubGroupState{SubGroup: podgroup.SubGroup{Policy: "stage", ID: id, Index: i}, Members: size})
	}
	info := podgroup.Info{PodGroup: &schedulingv1alpha1.PodGroup{Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2500}},
		SubGroupPolicies: []podgroup.SubGroupPolicy{{Name: "stage", SubGroupSize: size}}}
	req := Request{Tree: tree, Constraint: "hard topology (tier<=2)", MaxTier: 2, Pending: pending,
		Nodes: capacity, Strategy: BinPack, Weights: []float64{1}, PodRequest: []float64{8}, SubGroups: subGroups}
	b.ReportAllocs()
	for b.Loop() {
		_, err := Make(req)
		if err == nil {
			b.Fatal("the whole job fits")
		}
		plan, _, dropped, err := RetryWithoutSubGroups(req, err, info, states)
		if err != nil {
			b.Fatal(err)
		}
		if len(plan.PodLeaf) != 480*size || len(dropped) != 145*size {
			b.Fatalf("plan for %d pods, %d left out", len(plan.PodLeaf), len(dropped))
		}
	}
}
