package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// namedTree is seed 001's tree with tier names leaf (1), spine (2) and core (3), plus a node
// in no HyperNode; the virtual root is tier 4.
func namedTree() *hypernode.Snapshot {
	nodes := map[string]labels.Set{"loose-0": {}}
	for i := range 8 {
		nodes[fmt.Sprintf("node-%d", i)] = labels.Set{}
	}
	return hypernode.Build(nodes, []*topologyv1alpha1.HyperNode{
		hntesting.MakeHyperNode("s0").Tier(1).TierName("leaf").Nodes("node-0", "node-1").Obj(),
		hntesting.MakeHyperNode("s1").Tier(1).TierName("leaf").Nodes("node-2", "node-3").Obj(),
		hntesting.MakeHyperNode("s2").Tier(1).TierName("leaf").Nodes("node-4", "node-5").Obj(),
		hntesting.MakeHyperNode("s3").Tier(1).TierName("leaf").Nodes("node-6", "node-7").Obj(),
		hntesting.MakeHyperNode("s4").Tier(2).TierName("spine").Children("s0", "s1").Obj(),
		hntesting.MakeHyperNode("s5").Tier(2).TierName("spine").Children("s2", "s3").Obj(),
		hntesting.MakeHyperNode("s6").Tier(3).TierName("core").Children("s4", "s5").Obj(),
	}).Snapshot()
}

// TestGangRequest: the job's tier and sub-groups are resolved in the tree the way both the
// scheduler and `kubectl hypernode explain` see them, with exact errors for constraints the
// tree cannot resolve.
func TestGangRequest(t *testing.T) {
	member := func(name string, rank int, node string) *v1.Pod {
		return st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedulingv1alpha1.PodGroupLabel, "job").
			Label("batch.kubernetes.io/job-completion-index", fmt.Sprint(rank)).Node(node).Obj()
	}
	members := []*v1.Pod{member("w-3", 3, ""), member("w-0", 0, "node-0"), member("w-2", 2, ""), member("w-1", 1, "")}
	gang := func(annotations map[string]string) podgroup.Gang {
		pg := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", Annotations: annotations},
			Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 4}}
		return podgroup.NewGang(pg, members, nil)
	}
	const (
		topology  = podgroup.NetworkTopologyAnnotation
		subGroups = podgroup.SubGroupPolicyAnnotation
		pairs     = `[{"name":"pair","subGroupSize":2,"partitionSize":2%s}]`
	)
	tests := []struct {
		name        string
		annotations map[string]string
		want        Request
		wantErr     string
	}{
		{
			name: "plain gang: soft over the whole cluster",
			want: Request{Constraint: "soft topology", MaxTier: 4, Soft: true},
		},
		{
			name:        "hard by tier name",
			annotations: map[string]string{topology: `{"mode":"hard","highestTierName":"spine"}`},
			want:        Request{Constraint: "hard topology (tier<=spine)", MaxTier: 2},
		},
		{
			name:        "unknown tier name",
			annotations: map[string]string{topology: `{"mode":"hard","highestTierName":"pod"}`},
			wantErr:     `annotation hypernode.dev/network-topology: no HyperNode has tierName "pod" (known tierNames: core, leaf, spine)`,
		},
		{
			name: "sub-groups inherit the job's tier, or resolve their own",
			annotations: map[string]string{topology: `{"mode":"hard","highestTierAllowed":3}`,
				subGroups: fmt.Sprintf(pairs, `,"networkTopology":{"mode":"hard","highestTierName":"leaf"}`)},
			want: Request{Constraint: "job hard topology (tier<=3)", MaxTier: 3, SubGroups: []SubGroup{
				{ID: "pair-0", Policy: "pair", Constraint: "hard topology (tier<=leaf)", MaxTier: 1, Pending: []string{"w-1"}, Placed: []string{"node-0"}},
				{ID: "pair-1", Policy: "pair", Constraint: "hard topology (tier<=leaf)", MaxTier: 1, Pending: []string{"w-2", "w-3"}},
			}},
		},
		{
			name: "sub-group without a tier: anything inside the job's domain",
			annotations: map[string]string{topology: `{"mode":"hard","highestTierAllowed":2}`,
				subGroups: fmt.Sprintf(pairs, `,"networkTopology":{"mode":"soft"}`)},
			want: Request{Constraint: "job hard topology (tier<=2)", MaxTier: 2, SubGroups: []SubGroup{
				{ID: "pair-0", Policy: "pair", Constraint: "soft topology", MaxTier: 2, Soft: true, Pending: []string{"w-1"}, Placed: []string{"node-0"}},
				{ID: "pair-1", Policy: "pair", Constraint: "soft topology", MaxTier: 2, Soft: true, Pending: []string{"w-2", "w-3"}},
			}},
		},
		{
			name: "sub-group tier name above the job's tier",
			annotations: map[string]string{topology: `{"mode":"hard","highestTierAllowed":1}`,
				subGroups: fmt.Sprintf(pairs, `,"networkTopology":{"mode":"hard","highestTierName":"core"}`)},
			wantErr: `annotation hypernode.dev/subgroup-policy: policy "pair": its tier 3 is above the job's 1`,
		},
	}
	tree := namedTree()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := GangRequest(tree, gang(tc.annotations))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.want.Tree = tree
			tc.want.Pending = []string{"w-1", "w-2", "w-3"}
			tc.want.Placed = []string{"node-0"}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b *hypernode.Snapshot) bool { return a == b })); diff != "" {
				t.Errorf("request (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestLowestCommon(t *testing.T) {
	tree := namedTree()
	tests := []struct {
		nodes []string
		want  string
	}{
		{nodes: nil, want: ""},
		{nodes: []string{"node-0", "node-1"}, want: "s0"},
		{nodes: []string{"node-0", "node-3"}, want: "s4"},
		{nodes: []string{"node-1", "node-7", "node-2"}, want: "s6"},
		{nodes: []string{"node-0", "loose-0"}, want: hypernode.VirtualRootName},
	}
	for _, tc := range tests {
		if got := LowestCommon(tree, tc.nodes); got != tc.want {
			t.Errorf("LowestCommon(%v) = %q, want %q", tc.nodes, got, tc.want)
		}
	}
}

// TestRetryWithoutSubGroups: a job of four sub-groups of four pods (each in one leaf, the
// job in one tier-2 HyperNode of seed 003's tree) that does not fit whole leaves out the
// fewest sub-groups from the last that let it fit, and never more than minMember and
// minSubGroups allow.
func TestRetryWithoutSubGroups(t *testing.T) {
	// nodes gives t2-a's nodes (node-0..7) the capacity each, node-7 the last, and t2-b none.
	nodes := func(each, last int) map[string]Node {
		out := map[string]Node{}
		for i := range 16 {
			c := 0
			switch {
			case i == 7:
				c = last
			case i < 7:
				c = each
			}
			out[fmt.Sprintf("node-%d", i)] = Node{Capacity: c, Used: []float64{0}, Allocatable: []float64{4}}
		}
		return out
	}
	subGroups := func(withPending int) []SubGroup {
		var out []SubGroup
		for g := range 4 {
			sg := SubGroup{ID: fmt.Sprintf("tp-%d", g), Policy: "tp", Constraint: "hard topology (tier<=1)", MaxTier: 1}
			if g < withPending {
				sg.Pending = pods(16)[4*g : 4*g+4]
			}
			out = append(out, sg)
		}
		return out
	}
	info := func(minMember, minSubGroups int32) podgroup.Info {
		return podgroup.Info{
			PodGroup:         &schedulingv1alpha1.PodGroup{Spec: schedulingv1alpha1.PodGroupSpec{MinMember: minMember}},
			SubGroupPolicies: []podgroup.SubGroupPolicy{{Name: "tp", SubGroupSize: 4, MinSubGroups: minSubGroups}},
		}
	}
	var states []podgroup.SubGroupState
	for g := range 4 {
		states = append(states, podgroup.SubGroupState{SubGroup: podgroup.SubGroup{Policy: "tp", ID: fmt.Sprintf("tp-%d", g), Index: g}, Members: 4})
	}
	jobErr := &Unsatisfiable{Message: "the job's own error"}
	tests := []struct {
		name        string
		nodes       map[string]Node
		info        podgroup.Info
		withPending int
		// lastPlaced members of the last sub-group are placed (on t2-b's nodes).
		lastPlaced int
		// wantLeaf is the plan's leaf per member (nil: no plan); wantKept the sub-groups
		// of the returned request.
		wantLeaf    map[string]string
		wantKept    []string
		wantDropped []string
	}{
		{
			name:  "t2-a holds 15 of 16: only the last sub-group is left out",
			nodes: nodes(2, 1), info: info(4, 0), withPending: 4,
			wantLeaf: map[string]string{"p0": "leaf-0", "p1": "leaf-0", "p2": "leaf-0", "p3": "leaf-0",
				"p4": "leaf-0", "p5": "leaf-0", "p6": "leaf-0", "p7": "leaf-0",
				"p8": "leaf-1", "p9": "leaf-1", "p10": "leaf-1", "p11": "leaf-1"},
			wantKept:    []string{"tp-0", "tp-1", "tp-2"},
			wantDropped: []string{"p12", "p13", "p14", "p15"},
		},
		{
			name:  "t2-a holds 8: the last two are left out, the last one's members first",
			nodes: nodes(1, 1), info: info(8, 0), withPending: 4,
			wantLeaf: map[string]string{"p0": "leaf-0", "p1": "leaf-0", "p2": "leaf-0", "p3": "leaf-0",
				"p4": "leaf-1", "p5": "leaf-1", "p6": "leaf-1", "p7": "leaf-1"},
			wantKept:    []string{"tp-0", "tp-1"},
			wantDropped: []string{"p12", "p13", "p14", "p15", "p8", "p9", "p10", "p11"},
		},
		{
			name:  "minMember 12 allows one to be left out, which is not enough: the job's error",
			nodes: nodes(1, 1), info: info(12, 0), withPending: 4,
			wantKept:    []string{"tp-0", "tp-1", "tp-2"},
			wantDropped: []string{"p12", "p13", "p14", "p15"},
		},
		{
			name:  "minSubGroups 3 allows one to be left out, which is not enough: the job's error",
			nodes: nodes(1, 1), info: info(4, 3), withPending: 4,
			wantKept:    []string{"tp-0", "tp-1", "tp-2"},
			wantDropped: []string{"p12", "p13", "p14", "p15"},
		},
		{
			name: "the last sub-group's placed members cannot bind without its pending ones: " +
				"with them, 12 of minMember 13 would be left, so it is not left out",
			nodes: nodes(1, 1), info: info(13, 0), withPending: 4, lastPlaced: 2,
			wantKept: []string{"tp-0", "tp-1", "tp-2", "tp-3"},
		},
		{
			name:  "the last sub-group has no pending member: none is left out",
			nodes: nodes(1, 1), info: info(4, 0), withPending: 3,
			wantKept: []string{"tp-0", "tp-1", "tp-2", "tp-3"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sgs := subGroups(tc.withPending)
			req := Request{Tree: seed003(), Constraint: "hard topology (tier<=2)", MaxTier: 2, Pending: pods(4 * tc.withPending),
				Nodes: tc.nodes, SubGroups: sgs, Weights: []float64{1}, PodRequest: []float64{1}}
			for i := range tc.lastPlaced {
				node := fmt.Sprintf("node-%d", 8+i)
				sgs[3].Placed = append(sgs[3].Placed, node)
				req.Placed = append(req.Placed, node)
			}
			plan, got, dropped, err := RetryWithoutSubGroups(req, jobErr, tc.info, states)
			var kept, pending []string
			for _, sg := range got.SubGroups {
				kept = append(kept, sg.ID)
				pending = append(pending, sg.Pending...)
			}
			if diff := cmp.Diff(tc.wantKept, kept); diff != "" {
				t.Errorf("sub-groups kept (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(pending, got.Pending); diff != "" {
				t.Errorf("pending members are not those of the kept sub-groups (-kept,+pending):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDropped, dropped); diff != "" {
				t.Errorf("members left out (-want,+got):\n%s", diff)
			}
			if tc.wantLeaf == nil {
				if plan != nil || err != jobErr {
					t.Fatalf("plan %v, error %v; want none and the job's error", plan, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantLeaf, plan.PodLeaf); diff != "" {
				t.Errorf("pod leaves (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestRetryWithoutSubGroupsLeavesOutTheFewest compares the bisection with leaving out one
// sub-group after another, on random capacities of seed 003's nodes: both leave out the same
// sub-groups, which also checks that fitting is monotone in the sub-groups kept.
func TestRetryWithoutSubGroupsLeavesOutTheFewest(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	info := podgroup.Info{PodGroup: &schedulingv1alpha1.PodGroup{Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}},
		SubGroupPolicies: []podgroup.SubGroupPolicy{{Name: "tp", SubGroupSize: 2}}}
	for trial := range 500 {
		nodes := map[string]Node{}
		for i := range 16 {
			nodes[fmt.Sprintf("node-%d", i)] = Node{Capacity: rng.IntN(3), Used: []float64{float64(rng.IntN(3))}, Allocatable: []float64{4}}
		}
		var sgs []SubGroup
		var states []podgroup.SubGroupState
		next := 0
		for g := range 8 {
			size := 1 + rng.IntN(4)
			id := fmt.Sprintf("tp-%d", g)
			sgs = append(sgs, SubGroup{ID: id, Policy: "tp", Constraint: "hard topology (tier<=1)", MaxTier: 1,
				Pending: pods(40)[next : next+size]})
			states = append(states, podgroup.SubGroupState{SubGroup: podgroup.SubGroup{Policy: "tp", ID: id, Index: g}, Members: size})
			next += size
		}
		req := Request{Tree: seed003(), Constraint: "hard topology (tier<=2)", MaxTier: 2, Pending: pods(next),
			Nodes: nodes, SubGroups: sgs, Weights: []float64{1}, PodRequest: []float64{1}}
		if rng.IntN(2) == 0 {
			req.Strategy = LeastWaste
		}
		_, err := Make(req)
		if err == nil {
			continue
		}
		// One at a time, while at least minMember (2) pending members are left.
		var wantDropped []string
		left := len(req.Pending)
		for n := 1; n < len(sgs); n++ {
			if left -= len(sgs[len(sgs)-n].Pending); left < 2 {
				break
			}
			fewer, dropped := withoutLastSubGroups(req, n)
			if _, e := Make(fewer); e == nil {
				wantDropped = dropped
				break
			}
		}
		plan, _, dropped, _ := RetryWithoutSubGroups(req, err, info, states)
		if wantDropped == nil {
			if plan != nil {
				t.Fatalf("trial %d: a plan leaving out %v, none by leaving out one after another", trial, dropped)
			}
			continue
		}
		if diff := cmp.Diff(wantDropped, dropped); diff != "" {
			t.Fatalf("trial %d: members left out (-one after another,+bisection):\n%s", trial, diff)
		}
	}
}

// TestRetryWithoutSubGroupsSeveralShapes: the packer of several shapes is not monotone.
// Leaving out the last sub-group fits (a0 takes l2, the tightest for two A members, so b0
// still fits next to its placed sibling in l1), leaving out the last two does not (with one A
// member every leaf ties, a0 takes l1 by name, and b0 no longer fits there). minMember
// allows leaving out two: the retry must still find the plan without the last one.
func TestRetryWithoutSubGroupsSeveralShapes(t *testing.T) {
	nodes := map[string]labels.Set{"n1": {}, "n2": {}, "n3": {}}
	tree := hypernode.Build(nodes, []*topologyv1alpha1.HyperNode{
		hntesting.MakeHyperNode("l1").Tier(1).Nodes("n1").Obj(),
		hntesting.MakeHyperNode("l2").Tier(1).Nodes("n2").Obj(),
		hntesting.MakeHyperNode("l3").Tier(1).Nodes("n3").Obj(),
		hntesting.MakeHyperNode("spine").Tier(2).Children("l1", "l2", "l3").Obj(),
	}).Snapshot()
	c := shapedCluster{alloc: [2]float64{16, 0}, free: map[string][2]float64{"n1": {8, 0}, "n2": {5, 0}, "n3": {16, 0}}}
	req := c.request([]testShape{
		{name: "cpu=4", members: []string{"a0", "a1", "a2", "a3", "a4", "a5", "a6"}, req: [2]float64{4, 0}},
		{name: "cpu=5", members: []string{"b0"}, req: [2]float64{5, 0}},
	})
	sg := func(id string, pending ...string) SubGroup {
		return SubGroup{ID: id, Policy: "p", Constraint: "hard topology (tier<=1)", MaxTier: 1, Pending: pending}
	}
	req.SubGroups = []SubGroup{sg("sg0", "a0"), sg("sg1", "b0"), sg("sg2", "a1"), sg("sg3", "a2", "a3", "a4", "a5", "a6")}
	req.SubGroups[1].Placed = []string{"n1"}
	req.Tree, req.Constraint, req.MaxTier, req.Placed, req.Strategy = tree, "hard topology (tier<=2)", 2, []string{"n1"}, LeastWaste
	var states []podgroup.SubGroupState
	for _, s := range req.SubGroups {
		states = append(states, podgroup.SubGroupState{SubGroup: podgroup.SubGroup{Policy: "p", ID: s.ID}, Members: len(s.Pending)})
	}
	info := podgroup.Info{PodGroup: &schedulingv1alpha1.PodGroup{Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 3}},
		SubGroupPolicies: []podgroup.SubGroupPolicy{{Name: "p", SubGroupSize: 1}}}
	if _, err := Make(withoutLast(req, 2)); err == nil {
		t.Fatal("leaving out two sub-groups fits: the case no longer shows the packer's non-monotony")
	}
	_, err := Make(req)
	if err == nil {
		t.Fatal("the whole job fits")
	}
	plan, _, dropped, err := RetryWithoutSubGroups(req, err, info, states)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a2", "a3", "a4", "a5", "a6"}, dropped); diff != "" {
		t.Errorf("members left out (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"a0": "n2", "b0": "n1", "a1": "n3"}, plan.PodNode); diff != "" {
		t.Errorf("nodes (-want,+got):\n%s", diff)
	}
}

func withoutLast(req Request, n int) Request {
	out, _ := withoutLastSubGroups(req, n)
	return out
}

// TestRetryWithoutSubGroupsSeveralShapesNeverMissesAPlan: for jobs of two shapes on random
// clusters, the retry finds a plan exactly when leaving out one sub-group after another does,
// and never leaves out fewer (bisection may leave out more: the packer is not monotone).
func TestRetryWithoutSubGroupsSeveralShapesNeverMissesAPlan(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	info := podgroup.Info{PodGroup: &schedulingv1alpha1.PodGroup{Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}},
		SubGroupPolicies: []podgroup.SubGroupPolicy{{Name: "tp", SubGroupSize: 1}}}
	retried := 0
	for trial := range 300 {
		c := shapedCluster{alloc: [2]float64{16, 0}, free: map[string][2]float64{}}
		for i := range 16 {
			c.free[fmt.Sprintf("node-%d", i)] = [2]float64{float64(rng.IntN(17)), 0}
		}
		a := testShape{name: "cpu=4", req: [2]float64{4, 0}}
		b := testShape{name: "cpu=5", req: [2]float64{5, 0}}
		var groups [][]string
		for g := range 6 {
			var members []string
			for i := range 1 + rng.IntN(4) {
				name := fmt.Sprintf("g%d-%d", g, i)
				if rng.IntN(3) == 0 {
					b.members = append(b.members, name)
				} else {
					a.members = append(a.members, name)
				}
				members = append(members, name)
			}
			groups = append(groups, members)
		}
		if len(a.members) == 0 || len(b.members) == 0 {
			continue
		}
		req := c.request([]testShape{a, b})
		var pending []string
		var states []podgroup.SubGroupState
		for g, members := range groups {
			id := fmt.Sprintf("tp-%d", g)
			req.SubGroups = append(req.SubGroups, SubGroup{ID: id, Policy: "tp", Constraint: "hard topology (tier<=1)", MaxTier: 1, Pending: members})
			states = append(states, podgroup.SubGroupState{SubGroup: podgroup.SubGroup{Policy: "tp", ID: id, Index: g}, Members: len(members)})
			pending = append(pending, members...)
		}
		req.Pending = pending // in sub-group order, as GangRequest gives them
		req.Tree, req.Constraint, req.MaxTier = seed003(), "hard topology (tier<=2)", 2
		if rng.IntN(2) == 0 {
			req.Strategy = LeastWaste
		}
		_, err := Make(req)
		if err == nil {
			continue
		}
		retried++
		want := -1 // sub-groups left out one at a time until the job fits (-1: never)
		left := len(req.Pending)
		for n := 1; n < len(groups); n++ {
			if left -= len(groups[len(groups)-n]); left < 2 {
				break
			}
			if _, e := Make(withoutLast(req, n)); e == nil {
				want = n
				break
			}
		}
		plan, got, _, _ := RetryWithoutSubGroups(req, err, info, states)
		switch {
		case want < 0 && plan != nil:
			t.Fatalf("trial %d: a plan without %d sub-groups, none one at a time", trial, len(groups)-len(got.SubGroups))
		case want >= 0 && plan == nil:
			t.Fatalf("trial %d: no plan, one at a time finds one without %d sub-groups", trial, want)
		case want >= 0 && len(groups)-len(got.SubGroups) < want:
			t.Fatalf("trial %d: a plan without %d sub-groups, fewer than one at a time (%d)", trial, len(groups)-len(got.SubGroups), want)
		}
	}
	if retried < 100 {
		t.Fatalf("only %d of 300 trials needed the retry", retried)
	}
}
