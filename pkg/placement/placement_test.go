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

// seed001 is the s0..s6 tree of seed 001 over node-0..node-7, plus a node in no HyperNode.
func seed001() *hypernode.Snapshot {
	nodes := map[string]labels.Set{"loose-0": {}}
	for i := range 8 {
		nodes[fmt.Sprintf("node-%d", i)] = labels.Set{}
	}
	return hypernode.Build(nodes, hntesting.Seed001()).Snapshot()
}

func capacities(perNode map[string]int) map[string]Node {
	out := map[string]Node{}
	for n, c := range perNode {
		out[n] = Node{Capacity: c, Used: []float64{0}, Allocatable: []float64{4}}
	}
	return out
}

func pods(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("p%d", i))
	}
	return out
}

func everyNode(c int) map[string]int {
	out := map[string]int{"loose-0": c}
	for i := range 8 {
		out[fmt.Sprintf("node-%d", i)] = c
	}
	return out
}

func TestMake(t *testing.T) {
	tree := seed001()
	tests := []struct {
		name     string
		req      Request
		want     *Plan
		wantLeaf map[string]string // pod -> leaf, when the full plan is not spelled out
		wantErr  string
	}{
		{
			name: "the lowest tier that fits wins",
			req:  Request{Constraint: "hard topology (tier<=2)", MaxTier: 2, Pending: pods(2), Nodes: capacities(everyNode(1))},
			want: &Plan{Domain: "s0", Tier: 1, PodLeaf: map[string]string{"p0": "s0", "p1": "s0"}, LeafPods: map[string][]string{"s0": {"p0", "p1"}}},
		},
		{
			name: "three pods need a spine; consecutive ranks share a leaf",
			req:  Request{Constraint: "hard topology (tier<=2)", MaxTier: 2, Pending: pods(3), Nodes: capacities(everyNode(1))},
			want: &Plan{Domain: "s4", Tier: 2, PodLeaf: map[string]string{"p0": "s0", "p1": "s0", "p2": "s1"}, LeafPods: map[string][]string{"s0": {"p0", "p1"}, "s1": {"p2"}}},
		},
		{
			name:    "hard tier 1 cannot hold three: the explanation lists the best leaves",
			req:     Request{Constraint: "hard topology (tier<=1)", MaxTier: 1, Pending: pods(3), Nodes: capacities(everyNode(1))},
			wantErr: "hard topology (tier<=1): no HyperNode can host 3 pods; tier 1: s0 2/3, s1 2/3 (+2 more)",
		},
		{
			name:    "explanation over two tiers",
			req:     Request{Constraint: "hard topology (tier<=2)", MaxTier: 2, Pending: pods(5), Nodes: capacities(everyNode(1))},
			wantErr: "hard topology (tier<=2): no HyperNode can host 5 pods; tier 1: s0 2/5, s1 2/5 (+2 more); tier 2: s4 4/5, s5 4/5",
		},
		{
			name: "placed members pin the domain: only candidates that contain them",
			req: Request{Constraint: "hard topology (tier<=1)", MaxTier: 1, Pending: pods(1), Placed: []string{"node-7"},
				Nodes: capacities(everyNode(1))},
			want: &Plan{Domain: "s3", Tier: 1, PodLeaf: map[string]string{"p0": "s3"}, LeafPods: map[string][]string{"s3": {"p0"}}},
		},
		{
			name: "placed members and no room beside them",
			req: Request{Constraint: "hard topology (tier<=1)", MaxTier: 1, Pending: pods(2), Placed: []string{"node-7"},
				Nodes: capacities(map[string]int{"node-0": 2, "node-6": 1})},
			wantErr: "hard topology (tier<=1): no HyperNode can host 2 pods together with the 1 placed members (in s3); tier 1: s3 1/2",
		},
		{
			name: "a placed member on a node in no HyperNode: no HyperNode holds the placed members",
			req: Request{Constraint: "hard topology (tier<=2)", MaxTier: 2, Pending: pods(1), Placed: []string{"loose-0"},
				Nodes: capacities(everyNode(1))},
			wantErr: "hard topology (tier<=2): no HyperNode can host 1 pods together with the 1 placed members, which no HyperNode holds together " +
				"(one is on a node in no HyperNode, or they are in two top-level trees); tier 1: none holds the placed members; tier 2: none holds the placed members",
		},
		{
			name: "fragmented capacity does not count: the leaf with real fit wins",
			req: Request{Constraint: "hard topology (tier<=1)", MaxTier: 1, Pending: pods(2),
				Nodes: capacities(map[string]int{"node-0": 1, "node-1": 0, "node-4": 1, "node-5": 1})},
			want: &Plan{Domain: "s2", Tier: 1, PodLeaf: map[string]string{"p0": "s2", "p1": "s2"}, LeafPods: map[string][]string{"s2": {"p0", "p1"}}},
		},
		{
			name: "soft: nothing fits tier 1, the search goes on upwards, over the fewest leaves",
			req:  Request{Constraint: "soft topology (tier<=1)", MaxTier: 1, Soft: true, Pending: pods(5), Nodes: capacities(everyNode(1))},
			want: &Plan{Domain: "s6", Tier: 3,
				PodLeaf:  map[string]string{"p0": "s0", "p1": "s0", "p2": "s1", "p3": "s1", "p4": "s2"},
				LeafPods: map[string][]string{"s0": {"p0", "p1"}, "s1": {"p2", "p3"}, "s2": {"p4"}}},
		},
		{
			name:     "soft: the nodes outside every HyperNode are used last",
			req:      Request{Constraint: "soft topology", MaxTier: 4, Soft: true, Pending: pods(9), Nodes: capacities(everyNode(1))},
			wantLeaf: map[string]string{"p0": "s0", "p1": "s0", "p2": "s1", "p3": "s1", "p4": "s2", "p5": "s2", "p6": "s3", "p7": "s3", "p8": LooseLeaf},
		},
		{
			name: "soft: the pending members stay next to the placed ones",
			req: Request{Constraint: "soft topology (tier<=1)", MaxTier: 1, Soft: true, Pending: pods(2), Placed: []string{"node-0", "node-1"},
				Nodes: capacities(map[string]int{"node-2": 1, "node-3": 1, "node-4": 1, "node-5": 1, "node-6": 1, "node-7": 1, "loose-0": 8})},
			want: &Plan{Domain: "s4", Tier: 2, PodLeaf: map[string]string{"p0": "s1", "p1": "s1"}, LeafPods: map[string][]string{"s1": {"p0", "p1"}}},
		},
		{
			name: "soft at the root: the nodes in no HyperNode are filled last, whatever their capacity",
			req: Request{Constraint: "soft topology", MaxTier: 4, Soft: true, Pending: pods(6),
				Nodes: capacities(map[string]int{"node-0": 1, "node-2": 1, "node-4": 1, "node-6": 1, "loose-0": 8})},
			wantLeaf: map[string]string{"p0": "s0", "p1": "s1", "p2": "s2", "p3": "s3", "p4": LooseLeaf, "p5": LooseLeaf},
		},
		{
			name:    "soft: more pods than the cluster holds",
			req:     Request{Constraint: "soft topology", MaxTier: 4, Soft: true, Pending: pods(10), Nodes: capacities(everyNode(1))},
			wantErr: "soft topology: the whole cluster can host only 9 of 10 pods",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Tree = tree
			tc.req.Weights = []float64{1}
			tc.req.PodRequest = []float64{1}
			got, err := Make(tc.req)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != nil {
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("plan (-want,+got):\n%s", diff)
				}
			}
			if tc.wantLeaf != nil {
				if diff := cmp.Diff(tc.wantLeaf, got.PodLeaf); diff != "" {
					t.Errorf("pod leaves (-want,+got):\n%s", diff)
				}
			}
		})
	}
}

// seed003 is the tree of seed 003's partition example: two tier-2 HyperNodes, each with two
// leaves of four nodes.
func seed003() *hypernode.Snapshot {
	nodes := map[string]labels.Set{}
	var hns []*topologyv1alpha1.HyperNode
	for l := range 4 {
		var members []string
		for i := range 4 {
			name := fmt.Sprintf("node-%d", 4*l+i)
			nodes[name] = labels.Set{}
			members = append(members, name)
		}
		hns = append(hns, hntesting.MakeHyperNode(fmt.Sprintf("leaf-%d", l)).Tier(1).Nodes(members...).Obj())
	}
	hns = append(hns, hntesting.MakeHyperNode("t2-a").Tier(2).Children("leaf-0", "leaf-1").Obj(), hntesting.MakeHyperNode("t2-b").Tier(2).Children("leaf-2", "leaf-3").Obj())
	return hypernode.Build(nodes, hns).Snapshot()
}

func TestMakeSubGroups(t *testing.T) {
	partitions := func() []SubGroup {
		return []SubGroup{
			{ID: "tp-0", Constraint: "hard topology (tier<=1)", MaxTier: 1, Pending: []string{"p0", "p1", "p2", "p3"}},
			{ID: "tp-1", Constraint: "hard topology (tier<=1)", MaxTier: 1, Pending: []string{"p4", "p5", "p6", "p7"}},
		}
	}
	free := func(except ...string) map[string]Node {
		out := map[string]Node{}
		for i := range 16 {
			out[fmt.Sprintf("node-%d", i)] = Node{Capacity: 1, Used: []float64{0}, Allocatable: []float64{4}}
		}
		for _, n := range except {
			out[n] = Node{Capacity: 0, Used: []float64{4}, Allocatable: []float64{4}}
		}
		return out
	}
	tests := []struct {
		name     string
		nodes    map[string]Node
		wantLeaf map[string]string
		wantErr  string
	}{
		{
			name:  "seed 003: each partition in one leaf, the job in one tier-2 HyperNode",
			nodes: free(),
			wantLeaf: map[string]string{"p0": "leaf-0", "p1": "leaf-0", "p2": "leaf-0", "p3": "leaf-0",
				"p4": "leaf-1", "p5": "leaf-1", "p6": "leaf-1", "p7": "leaf-1"},
		},
		{
			name: "partitions fit leaves, the job fits no tier-2 HyperNode",
			// t2-a: leaf-0 4 free, leaf-1 3 free; t2-b: leaf-2 4 free, leaf-3 3 free.
			nodes:   free("node-4", "node-12"),
			wantErr: "hard topology (tier<=2): no HyperNode can host 8 pods; tier 1: leaf-0 4/8, leaf-2 4/8 (+2 more); tier 2: t2-a 7/8, t2-b 7/8",
		},
		{
			name: "the job fits a tier-2 HyperNode, its partitions do not",
			// t2-a is full; t2-b holds 8 as leaf-2 5 (3+2) and leaf-3 3: the first partition
			// takes leaf-2, the second finds 3 and 1.
			nodes: func() map[string]Node {
				n := free("node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7", "node-10", "node-11", "node-15")
				n["node-8"] = Node{Capacity: 3, Used: []float64{0}, Allocatable: []float64{4}}
				n["node-9"] = Node{Capacity: 2, Used: []float64{0}, Allocatable: []float64{4}}
				return n
			}(),
			wantErr: "hard topology (tier<=2): 1 HyperNode(s) can host the job's 8 pods but not its sub-groups; in t2-b: sub-group tp-1 (hard topology (tier<=1)) fits no HyperNode for its 4 pods",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Make(Request{Tree: seed003(), Constraint: "hard topology (tier<=2)", MaxTier: 2, Pending: pods(8),
				Nodes: tc.nodes, SubGroups: partitions(), Weights: []float64{1}, PodRequest: []float64{1}})
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v\nwant    %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantLeaf, got.PodLeaf); diff != "" {
				t.Errorf("pod leaves (-want,+got):\n%s", diff)
			}
			if got.Domain != "t2-a" {
				t.Errorf("domain = %s, want t2-a", got.Domain)
			}
		})
	}
}

// TestMakeNothingPending: with every member placed, the plan is empty and names the domain
// that holds the placed members (messages about members left out name it).
func TestMakeNothingPending(t *testing.T) {
	got, err := Make(Request{Tree: seed001(), Constraint: "hard topology (tier<=2)", MaxTier: 2,
		Placed: []string{"node-0", "node-3"}, Nodes: capacities(everyNode(1)), Weights: []float64{1}, PodRequest: []float64{1}})
	if err != nil {
		t.Fatal(err)
	}
	want := &Plan{Domain: "s4", Tier: 2, PodLeaf: map[string]string{}, LeafPods: map[string][]string{}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plan (-want,+got):\n%s", diff)
	}
}

// skippingTree has a core (tier 3) over a spine (tier 2) and a leaf straight below it (a
// skipped tier), and an excluded leaf (its regular expression does not compile).
func skippingTree() *hypernode.Snapshot {
	nodes := map[string]labels.Set{}
	for _, n := range []string{"a0", "a1", "b0", "b1", "x0"} {
		nodes[n] = labels.Set{}
	}
	return hypernode.Build(nodes, []*topologyv1alpha1.HyperNode{
		hntesting.MakeHyperNode("leaf-a").Tier(1).Nodes("a0", "a1").Obj(),
		hntesting.MakeHyperNode("leaf-b").Tier(1).Nodes("b0", "b1").Obj(),
		hntesting.MakeHyperNode("bad").Tier(1).NodeRegex("x(").Obj(),
		hntesting.MakeHyperNode("spine").Tier(2).Children("leaf-a").Obj(),
		hntesting.MakeHyperNode("core").Tier(3).Children("spine", "leaf-b", "bad").Obj(),
	}).Snapshot()
}

// TestCandidatesInWalksTheSubtree: the candidates of a tier inside a domain, found by walking
// the domain's subtree, are those whose lowest common ancestor with the domain is the domain,
// in Candidates' order, for every domain and tier of the test trees.
func TestCandidatesInWalksTheSubtree(t *testing.T) {
	big, _ := bigCluster()
	for name, tree := range map[string]*hypernode.Snapshot{"seed001": seed001(), "seed003": seed003(), "named": namedTree(), "big": big, "skipping": skippingTree()} {
		p := &planner{req: Request{Tree: tree}}
		domains := []string{hypernode.VirtualRootName}
		for _, tier := range tree.Tiers() {
			domains = append(domains, tree.Candidates(tier)...)
		}
		for _, domain := range domains {
			for _, tier := range append(tree.Tiers(), tree.RootTier()) {
				want := []string{}
				for _, h := range tree.Candidates(tier) {
					if lca, ok := tree.LCA(h, domain); ok && lca == domain {
						want = append(want, h)
					}
				}
				if diff := cmp.Diff(want, p.candidatesIn(domain, tier)); diff != "" {
					t.Errorf("%s: candidates of tier %d in %s (-by LCA,+by walk):\n%s", name, tier, domain, diff)
				}
			}
		}
	}
}

// TestPlacedBelowCountsLikeCountInside: the per-plan counts of placed members below each
// HyperNode equal counting them one by one, for every HyperNode of the test trees.
func TestPlacedBelowCountsLikeCountInside(t *testing.T) {
	big, _ := bigCluster()
	for name, tree := range map[string]*hypernode.Snapshot{"seed001": seed001(), "seed003": seed003(), "big": big, "skipping": skippingTree()} {
		nodes := tree.Nodes(hypernode.VirtualRootName)
		var placed []string
		for i, n := range nodes {
			if i%3 != 1 {
				placed = append(placed, n)
			}
		}
		placed = append(placed, "no-such-node")
		p := &planner{req: Request{Tree: tree, Placed: placed}}
		hns := []string{hypernode.VirtualRootName}
		for _, tier := range tree.Tiers() {
			hns = append(hns, tree.Candidates(tier)...)
		}
		for _, h := range hns {
			if got, want := p.placedBelow(h), countInside(tree, placed, h); got != want {
				t.Errorf("%s: %d placed below %s, want %d", name, got, h, want)
			}
		}
	}
}
