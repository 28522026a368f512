package placement

import (
	"fmt"
	"maps"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// shapedCluster models nodes by free and allocatable CPU and GPU, so that a test can ask,
// like the plugin's Fitter does with the Filter plugins, what fits next to planned members.
type shapedCluster struct {
	alloc [2]float64
	free  map[string][2]float64
}

// testShape is a pod shape of a mixed gang: its name, members and CPU and GPU request.
type testShape struct {
	name    string
	members []string
	req     [2]float64
}

func (c shapedCluster) fit(free [2]float64, req [2]float64, limit int) int {
	n := limit
	for r := range 2 {
		if req[r] > 0 {
			n = min(n, int(math.Floor(max(free[r], 0)/req[r])))
		}
	}
	return max(n, 0)
}

// request builds a mixed request: solo capacities capped at each shape's size, and a Fit
// that subtracts what is planned on the node.
func (c shapedCluster) request(shapes []testShape) Request {
	req := Request{Nodes: map[string]Node{}, Weights: []float64{1, 1}}
	for _, sh := range shapes {
		shape := Shape{Name: sh.name, Members: sh.members, Capacity: map[string]int{}, Request: sh.req[:]}
		for n, free := range c.free {
			shape.Capacity[n] = c.fit(free, sh.req, len(sh.members))
		}
		req.Shapes = append(req.Shapes, shape)
		req.Pending = append(req.Pending, sh.members...)
	}
	for n, free := range c.free {
		req.Nodes[n] = Node{Used: []float64{c.alloc[0] - free[0], c.alloc[1] - free[1]}, Allocatable: c.alloc[:]}
	}
	req.Fit = func(node string, planned []int, shape, limit int) int {
		free := c.free[node]
		for s, count := range planned {
			for r := range 2 {
				free[r] -= float64(count) * shapes[s].req[r]
			}
		}
		return c.fit(free, shapes[shape].req, limit)
	}
	return req
}

func TestMakeMixedShapes(t *testing.T) {
	tree := seed001()
	// Every node: 8 CPUs and 8 GPUs; s0's GPUs are all taken, the rest is free.
	mpi := shapedCluster{alloc: [2]float64{8, 8}, free: map[string][2]float64{"loose-0": {8, 8}}}
	for i := range 8 {
		mpi.free[fmt.Sprintf("node-%d", i)] = [2]float64{8, 8}
	}
	mpi.free["node-0"], mpi.free["node-1"] = [2]float64{8, 0}, [2]float64{8, 0}
	launcher := testShape{name: "cpu=1", members: []string{"launcher"}, req: [2]float64{1, 0}}
	workers := testShape{name: "cpu=4,gpu=8", members: []string{"worker-0", "worker-1"}, req: [2]float64{4, 8}}
	// Workers that take a whole node: the launcher cannot join them.
	bigWorkers := testShape{name: "cpu=8,gpu=8", members: []string{"worker-0", "worker-1"}, req: [2]float64{8, 8}}

	// Volcano's heterogeneous bin-pack case: s1's nodes are partly used, with room for a
	// 2-CPU and a 4-CPU pod only together (2 CPUs on node-2, 4 on node-3); the other leaves
	// are empty. BinPack must pick the fuller s1.
	partly := shapedCluster{alloc: [2]float64{8, 0}, free: map[string][2]float64{"loose-0": {8, 0}}}
	for i := range 8 {
		partly.free[fmt.Sprintf("node-%d", i)] = [2]float64{8, 0}
	}
	partly.free["node-2"], partly.free["node-3"] = [2]float64{2, 0}, [2]float64{4, 0}
	small := testShape{name: "cpu=2", members: []string{"a"}, req: [2]float64{2, 0}}
	large := testShape{name: "cpu=4", members: []string{"b"}, req: [2]float64{4, 0}}

	tests := []struct {
		name       string
		cluster    shapedCluster
		shapes     []testShape
		maxTier    int
		constraint string
		want       *Plan
		wantErr    string
	}{
		{
			name:    "MPI launcher and workers: the leaf with free GPUs, the launcher next to a worker",
			cluster: mpi, shapes: []testShape{launcher, workers}, maxTier: 1,
			want: &Plan{Domain: "s1", Tier: 1,
				PodLeaf:  map[string]string{"launcher": "s1", "worker-0": "s1", "worker-1": "s1"},
				LeafPods: map[string][]string{"s1": {"worker-0", "worker-1", "launcher"}},
				PodNode:  map[string]string{"worker-0": "node-2", "worker-1": "node-3", "launcher": "node-2"}},
		},
		{
			name:    "workers fill their nodes: no leaf holds all three, and the message counts real members",
			cluster: mpi, shapes: []testShape{launcher, bigWorkers}, maxTier: 1,
			wantErr: "hard topology (tier<=1): no HyperNode can host 3 pods (2 x cpu=8,gpu=8, 1 x cpu=1); tier 1: s1 2/3, s2 2/3 (+2 more)",
		},
		{
			name:    "at tier 2 the launcher takes the CPU-only leaf next to the workers' leaf",
			cluster: mpi, shapes: []testShape{launcher, bigWorkers}, maxTier: 2,
			want: &Plan{Domain: "s4", Tier: 2,
				PodLeaf:  map[string]string{"launcher": "s0", "worker-0": "s1", "worker-1": "s1"},
				LeafPods: map[string][]string{"s0": {"launcher"}, "s1": {"worker-0", "worker-1"}},
				PodNode:  map[string]string{"worker-0": "node-2", "worker-1": "node-3", "launcher": "node-0"}},
		},
		{
			name:    "Volcano's heterogeneous gang: 2 and 4 CPUs fit only together in the partly used leaf, which BinPack prefers",
			cluster: partly, shapes: []testShape{small, large}, maxTier: 1,
			want: &Plan{Domain: "s1", Tier: 1,
				PodLeaf:  map[string]string{"a": "s1", "b": "s1"},
				LeafPods: map[string][]string{"s1": {"b", "a"}},
				PodNode:  map[string]string{"a": "node-2", "b": "node-3"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.cluster.request(tc.shapes)
			req.Tree, req.MaxTier = tree, tc.maxTier
			req.Constraint = fmt.Sprintf("hard topology (tier<=%d)", tc.maxTier)
			got, err := Make(req)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v\nwant    %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestMakeMixedShapesNeverPicksALeafThatHoldsOneShape: with the launcher's shape alone, s0 (free CPUs,
// no GPU) looks like it holds all three; with the workers' alone, it holds none. The mixed
// search never picks s0 for the gang, whichever member plans.
func TestMakeMixedShapesNeverPicksALeafThatHoldsOneShape(t *testing.T) {
	c := shapedCluster{alloc: [2]float64{8, 8}, free: map[string][2]float64{
		"node-0": {8, 0}, "node-1": {8, 0}, "node-2": {8, 8}, "node-3": {8, 8}}}
	for _, order := range [][]testShape{
		{{name: "cpu=1", members: []string{"launcher"}, req: [2]float64{1, 0}}, {name: "gpu=8", members: []string{"w0", "w1"}, req: [2]float64{0, 8}}},
		{{name: "gpu=8", members: []string{"w0", "w1"}, req: [2]float64{0, 8}}, {name: "cpu=1", members: []string{"launcher"}, req: [2]float64{1, 0}}},
	} {
		req := c.request(order)
		req.Tree, req.MaxTier, req.Constraint = seed001(), 1, "hard topology (tier<=1)"
		got, err := Make(req)
		if err != nil {
			t.Fatal(err)
		}
		if got.Domain != "s1" {
			var names []string
			for _, s := range order {
				names = append(names, s.name)
			}
			t.Errorf("shapes %s: domain = %s, want s1", strings.Join(names, ", "), got.Domain)
		}
	}
}

// TestMakeMixedShapesSubGroups covers sub-groups of a job whose members differ in shape: a
// sub-group is tried in its best HyperNode first and a trial that fails half-way leaves
// nothing behind, and a leaf that earlier sub-groups use is still chosen while it has room.
func TestMakeMixedShapesSubGroups(t *testing.T) {
	cpuOnly := func(free map[string]float64) shapedCluster {
		c := shapedCluster{alloc: [2]float64{8, 0}, free: map[string][2]float64{}}
		for n, cpu := range free {
			c.free[n] = [2]float64{cpu, 0}
		}
		return c
	}
	allFree := map[string]float64{"loose-0": 8}
	for i := range 8 {
		allFree[fmt.Sprintf("node-%d", i)] = 8
	}
	halfUsed := maps.Clone(allFree)
	halfUsed["node-1"] = 4 // a placed member of the sub-group runs there
	tests := []struct {
		name      string
		cluster   shapedCluster
		shapes    []testShape
		subGroups []SubGroup
		placed    []string
		maxTier   int
		want      *Plan
	}{
		{
			// In s0 the big member takes node-0, then the two small ones find room for one:
			// that trial is undone, and the sub-group goes to s4 with b on node-0 again.
			name:    "a sub-group whose trial in its first HyperNode fails half-way",
			cluster: cpuOnly(halfUsed),
			shapes: []testShape{
				{name: "cpu=8", members: []string{"b"}, req: [2]float64{8, 0}},
				{name: "cpu=4", members: []string{"a0", "a1"}, req: [2]float64{4, 0}},
			},
			subGroups: []SubGroup{{ID: "sg", Constraint: "hard topology (tier<=2)", MaxTier: 2,
				Pending: []string{"b", "a0", "a1"}, Placed: []string{"node-1"}}},
			placed:  []string{"node-1"},
			maxTier: 2,
			want: &Plan{Domain: "s4", Tier: 2,
				PodLeaf:  map[string]string{"b": "s0", "a0": "s0", "a1": "s1"},
				LeafPods: map[string][]string{"s0": {"b", "a0"}, "s1": {"a1"}},
				PodNode:  map[string]string{"b": "node-0", "a0": "node-1", "a1": "node-2"}},
		},
		{
			// Four workers fill a leaf: the second sub-group joins the first in s0, the third
			// finds s0 full and takes s1; the launcher goes next to them.
			name:    "sub-groups share a leaf while it has room",
			cluster: cpuOnly(allFree),
			shapes: []testShape{
				{name: "cpu=4", members: []string{"w0", "w1", "w2", "w3", "w4", "w5"}, req: [2]float64{4, 0}},
				{name: "cpu=1", members: []string{"launcher"}, req: [2]float64{1, 0}},
			},
			subGroups: []SubGroup{
				{ID: "sg-0", Constraint: "hard topology (tier<=1)", MaxTier: 1, Pending: []string{"w0", "w1"}},
				{ID: "sg-1", Constraint: "hard topology (tier<=1)", MaxTier: 1, Pending: []string{"w2", "w3"}},
				{ID: "sg-2", Constraint: "hard topology (tier<=1)", MaxTier: 1, Pending: []string{"w4", "w5"}},
			},
			maxTier: 2,
			want: &Plan{Domain: "s4", Tier: 2,
				PodLeaf: map[string]string{"w0": "s0", "w1": "s0", "w2": "s0", "w3": "s0", "w4": "s1", "w5": "s1",
					"launcher": "s1"},
				LeafPods: map[string][]string{"s0": {"w0", "w1", "w2", "w3"}, "s1": {"w4", "w5", "launcher"}},
				PodNode: map[string]string{"w0": "node-0", "w1": "node-0", "w2": "node-1", "w3": "node-1",
					"w4": "node-2", "w5": "node-2", "launcher": "node-3"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.cluster.request(tc.shapes)
			req.Tree, req.MaxTier, req.Placed, req.SubGroups = seed001(), tc.maxTier, tc.placed, tc.subGroups
			req.Constraint = fmt.Sprintf("hard topology (tier<=%d)", tc.maxTier)
			got, err := Make(req)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestPackingUndo: undo returns a packing to exactly what it was at the mark, the nodes and
// leaves first used after it included (no zero counts left behind: code tests their presence).
func TestPackingUndo(t *testing.T) {
	build := func() *packing {
		pk := newPacking("s4", 2)
		pk.put("node-0", "s0", 0, 2, []string{"w0", "w1"})
		pk.put("node-1", "s0", 1, 2, []string{"launcher"})
		return pk
	}
	pk := build()
	mark := pk.mark()
	pk.put("node-0", "s0", 1, 2, []string{"l2"})       // a node and a leaf used before
	pk.put("node-2", "s1", 0, 2, []string{"w2", "w3"}) // a new node in a new leaf
	pk.put("node-3", "s1", 0, 2, []string{"w4"})
	pk.undo(mark)
	if diff := cmp.Diff(build(), pk, cmp.AllowUnexported(packing{}, put{})); diff != "" {
		t.Errorf("packing after undo (-want,+got):\n%s", diff)
	}
}
