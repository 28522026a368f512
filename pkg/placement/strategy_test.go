package placement

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

// TestStrategies: seed 004 example 1 (spine-0 has 5 free nodes, spine-1 exactly 4). Both
// strategies choose spine-1 for 4 pods; with spine-0 already fuller, BinPack prefers it.
func TestStrategies(t *testing.T) {
	nodes := map[string]labels.Set{}
	for i := range 12 {
		nodes[fmt.Sprintf("node-%d", i)] = labels.Set{}
	}
	tree := hypernode.Build(nodes, []*topologyv1alpha1.HyperNode{
		hntesting.MakeHyperNode("block-0").Tier(1).Nodes("node-0", "node-1", "node-2").Obj(),
		hntesting.MakeHyperNode("block-1").Tier(1).Nodes("node-3", "node-4").Obj(),
		hntesting.MakeHyperNode("block-2").Tier(1).Nodes("node-5", "node-6").Obj(),
		hntesting.MakeHyperNode("block-3").Tier(1).Nodes("node-7", "node-8").Obj(),
		hntesting.MakeHyperNode("block-4").Tier(1).Nodes("node-9", "node-10", "node-11").Obj(),
		hntesting.MakeHyperNode("spine-0").Tier(2).Children("block-0", "block-1").Obj(),
		hntesting.MakeHyperNode("spine-1").Tier(2).Children("block-2", "block-3").Obj(),
		hntesting.MakeHyperNode("spine-2").Tier(2).Children("block-4").Obj(),
	}).Snapshot()
	free := func(used8 ...string) map[string]Node {
		out := map[string]Node{}
		for n := range nodes {
			out[n] = Node{Capacity: 1, Used: []float64{0}, Allocatable: []float64{8}}
		}
		for _, n := range used8 {
			out[n] = Node{Capacity: 0, Used: []float64{8}, Allocatable: []float64{8}}
		}
		return out
	}
	tests := []struct {
		name     string
		strategy Strategy
		nodes    map[string]Node
		want     string
	}{
		{"BinPack, empty cluster", BinPack, free(), "spine-1"},
		{"LeastWaste, empty cluster", LeastWaste, free(), "spine-1"},
		// spine-0 has one busy node: 4 free of 5. Both are full after placement (40/40 and
		// 32/32) with zero waste: a tie for both strategies, broken by name.
		{"BinPack, tie broken by name", BinPack, free("node-0"), "spine-0"},
		{"LeastWaste, tie broken by name", LeastWaste, free("node-0"), "spine-0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Make(Request{Tree: tree, Constraint: "hard topology (tier<=2)", MaxTier: 2, Pending: pods(4),
				Nodes: tc.nodes, Strategy: tc.strategy, Weights: []float64{1}, PodRequest: []float64{8}})
			if err != nil {
				t.Fatal(err)
			}
			if got.Domain != tc.want {
				t.Errorf("domain = %s, want %s", got.Domain, tc.want)
			}
		})
	}
}

func TestBinPackScore(t *testing.T) {
	tests := []struct {
		name                 string
		used, alloc, request []float64
		count                float64
		weights              []float64
		want                 float64
	}{
		{"one resource", []float64{2}, []float64{8}, []float64{2}, 1, []float64{1}, 0.5},
		{"weighted", []float64{0, 0}, []float64{4, 4}, []float64{4, 2}, 1, []float64{3, 1}, (3*1.0 + 1*0.5) / 4},
		{"overflow scores 0", []float64{7}, []float64{8}, []float64{2}, 1, []float64{1}, 0},
		{"requested, allocatable on no node: left out", []float64{2, 3}, []float64{8, 0}, []float64{2, 1}, 1, []float64{1, 2}, 0.5},
		{"only resources allocatable on no node: 0", []float64{0}, []float64{0}, []float64{1}, 1, []float64{1}, 0},
		{"zero weight ignored", []float64{0, 100}, []float64{4, 1}, []float64{4, 0}, 1, []float64{1, 0}, 1},
		{"unrequested resource ignored", []float64{0, 0}, []float64{4, 8}, []float64{4, 0}, 1, []float64{1, 1}, 1},
		{"nothing requested scores 0", []float64{2, 2}, []float64{4, 8}, []float64{0, 0}, 1, []float64{1, 1}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := BinPackScore(tc.used, tc.alloc, tc.request, tc.count, tc.weights); got != tc.want {
				t.Errorf("score = %v, want %v", got, tc.want)
			}
		})
	}
}

// twoSpines is nine nodes, node(i) each: block-0 (node-0..2) and block-1 (node-3, node-4)
// under spine-0, block-2 (node-5, node-6) and block-3 (node-7, node-8) under spine-1.
func twoSpines(node func(i int) Node) (*hypernode.Snapshot, map[string]Node) {
	nodes := map[string]labels.Set{}
	capacity := map[string]Node{}
	for i := range 9 {
		name := fmt.Sprintf("node-%d", i)
		nodes[name] = labels.Set{}
		capacity[name] = node(i)
	}
	return hypernode.Build(nodes, []*topologyv1alpha1.HyperNode{
		hntesting.MakeHyperNode("block-0").Tier(1).Nodes("node-0", "node-1", "node-2").Obj(),
		hntesting.MakeHyperNode("block-1").Tier(1).Nodes("node-3", "node-4").Obj(),
		hntesting.MakeHyperNode("block-2").Tier(1).Nodes("node-5", "node-6").Obj(),
		hntesting.MakeHyperNode("block-3").Tier(1).Nodes("node-7", "node-8").Obj(),
		hntesting.MakeHyperNode("spine-0").Tier(2).Children("block-0", "block-1").Obj(),
		hntesting.MakeHyperNode("spine-1").Tier(2).Children("block-2", "block-3").Obj(),
	}).Snapshot(), capacity
}

// TestStrategiesDisagree: spine-0 offers 5 slots on nodes 3/8 used, spine-1 exactly 4 slots on
// nodes 2/8 used; the pods take 4 CPUs. BinPack prefers the fuller spine-0 after placement
// ((15+16)/40 = 0.775 > (8+16)/32 = 0.75); LeastWaste the exact fit, spine-1 (surplus 0 < 1).
func TestStrategiesDisagree(t *testing.T) {
	tree, capacity := twoSpines(func(i int) Node {
		used := 2.0
		if i < 5 {
			used = 3
		}
		return Node{Capacity: 1, Used: []float64{used}, Allocatable: []float64{8}}
	})
	for strategy, want := range map[Strategy]string{BinPack: "spine-0", LeastWaste: "spine-1"} {
		got, err := Make(Request{Tree: tree, Constraint: "hard topology (tier<=2)", MaxTier: 2, Pending: pods(4),
			Nodes: capacity, Strategy: strategy, Weights: []float64{1}, PodRequest: []float64{4}})
		if err != nil {
			t.Fatal(err)
		}
		if got.Domain != want {
			t.Errorf("%s chose %s, want %s", strategy, got.Domain, want)
		}
	}
}

// TestBinPackWithoutAdvertisedGPUs: pods request GPUs (weight 2) that some nodes do not list as
// allocatable, because a DeviceClass provides them through DRA there; those nodes' GPUs count
// neither as allocatable nor as used. Four pods of 4 CPUs and 1 GPU, one per node.
func TestBinPackWithoutAdvertisedGPUs(t *testing.T) {
	tests := []struct {
		name string
		// node returns the allocatable and used CPUs and GPUs of node-i.
		node func(i int) Node
		want string
	}{{
		// spine-1 is the fuller by CPU ((12+16)/32 = 0.875 > (10+16)/40 = 0.65). Counting the
		// GPUs scored every spine 0 and the name chose spine-0.
		name: "every node's GPUs through DRA",
		node: func(i int) Node {
			used := 2.0
			if i >= 5 {
				used = 3
			}
			return Node{Capacity: 1, Used: []float64{used, 8}, Allocatable: []float64{8, 0}}
		},
		want: "spine-1",
	}, {
		// spine-0: CPUs (10+16)/40 = 0.65, block-0's GPUs (12+4)/24 = 0.67: (0.65 + 2*0.67)/3 =
		// 0.66; spine-1: (0.75 + 2*0.125)/3 = 0.33. Counting block-1's 32 DRA GPUs in use
		// against block-0's 24 overflowed, scored spine-0 0 and chose spine-1.
		name: "a spine of device-plugin and DRA racks",
		node: func(i int) Node {
			switch {
			case i < 3: // block-0: device plugin, 4 of 8 GPUs used
				return Node{Capacity: 1, Used: []float64{2, 4}, Allocatable: []float64{8, 8}}
			case i < 5: // block-1: DRA, 16 GPUs in use that no allocatable lists
				return Node{Capacity: 1, Used: []float64{2, 16}, Allocatable: []float64{8, 0}}
			default: // spine-1: device plugin, no GPU used
				return Node{Capacity: 1, Used: []float64{2, 0}, Allocatable: []float64{8, 8}}
			}
		},
		want: "spine-0",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tree, capacity := twoSpines(tc.node)
			got, err := Make(Request{Tree: tree, Constraint: "hard topology (tier<=2)", MaxTier: 2, Pending: pods(4),
				Nodes: capacity, Strategy: BinPack, Weights: []float64{1, 2}, PodRequest: []float64{4, 1}})
			if err != nil {
				t.Fatal(err)
			}
			if got.Domain != tc.want {
				t.Errorf("BinPack chose %s, want %s", got.Domain, tc.want)
			}
		})
	}
}

// TestTieBreakPrefersPlacedMembers: two leaves score the same; the one holding a placed
// member of the gang wins over the one whose name comes first.
func TestTieBreakPrefersPlacedMembers(t *testing.T) {
	tree := seed001()
	got, err := Make(Request{Tree: tree, Constraint: "hard topology (tier<=2)", MaxTier: 2, Pending: pods(1),
		Placed: []string{"node-3"}, Nodes: capacities(map[string]int{"node-1": 1, "node-2": 1}),
		Strategy: LeastWaste, Weights: []float64{1}, PodRequest: []float64{1}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Domain != "s1" {
		t.Errorf("domain = %s, want s1 (it holds the placed member); s0 only wins by name", got.Domain)
	}
}

// TestWeights: cpu, memory, then extended resources by name; a weight of 0 leaves its
// resource out, so BinPack never divides by a zero weight sum for it.
func TestWeights(t *testing.T) {
	tests := []struct {
		name        string
		cpu, memory int64
		extended    map[v1.ResourceName]int64
		wantNames   []v1.ResourceName
		wantWeights []float64
	}{
		{name: "defaults", cpu: 1, memory: 1, extended: map[v1.ResourceName]int64{"nvidia.com/gpu": 2, "amd.com/gpu": 2},
			wantNames: []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, "amd.com/gpu", "nvidia.com/gpu"}, wantWeights: []float64{1, 1, 2, 2}},
		{name: "zero weights left out", cpu: 0, memory: 3, extended: map[v1.ResourceName]int64{"b.com/x": 0, "a.com/y": 5},
			wantNames: []v1.ResourceName{v1.ResourceMemory, "a.com/y"}, wantWeights: []float64{3, 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			names, weights := Weights(tc.cpu, tc.memory, tc.extended)
			if diff := cmp.Diff(tc.wantNames, names); diff != "" {
				t.Errorf("resources (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWeights, weights); diff != "" {
				t.Errorf("weights (-want,+got):\n%s", diff)
			}
		})
	}
}
