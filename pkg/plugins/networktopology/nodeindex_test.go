package networktopology

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

func tableNodes(n int) []*framework.NodeInfo {
	out := make([]*framework.NodeInfo, n)
	for i := range out {
		out[i] = framework.NewNodeInfo()
		out[i].SetNode(st.MakeNode().Name(fmt.Sprintf("node-%d", i)).Obj())
	}
	return out
}

// contents reads every node of nodes from the table: its value, or -1 when absent.
func contents(t *nodeTable[int32], nodes []*framework.NodeInfo) []int32 {
	out := make([]int32, len(nodes))
	for i, ni := range nodes {
		v, ok := t.get(ni)
		if !ok {
			v = -1
		}
		out[i] = v
	}
	return out
}

func TestNodeTable(t *testing.T) {
	nodes := tableNodes(1000)
	values := func(from, to int, f func(int) int32) []int32 {
		out := make([]int32, len(nodes))
		for i := range out {
			out[i] = -1
			if i >= from && i < to {
				out[i] = f(i)
			}
		}
		return out
	}
	tests := []struct {
		name string
		// epoch, when set, is where the table's epoch stands before the second fill.
		epoch uint32
		want  []int32
	}{
		{name: "refill after reset", want: values(500, 1000, func(i int) int32 { return int32(2 * i) })},
		{name: "epoch wraps", epoch: math.MaxUint32, want: values(500, 1000, func(i int) int32 { return int32(2 * i) })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var table nodeTable[int32]
			if got := contents(&table, nodes); !cmp.Equal(got, values(0, 0, nil)) {
				t.Fatalf("a new table holds %v", got)
			}
			// Every node, each set twice: the second value wins, nothing is lost to collisions.
			table.reset(len(nodes))
			for i, ni := range nodes {
				table.set(ni, int32(-i))
			}
			for i, ni := range nodes {
				table.set(ni, int32(i))
			}
			if diff := cmp.Diff(values(0, 1000, func(i int) int32 { return int32(i) }), contents(&table, nodes)); diff != "" {
				t.Fatalf("first fill (-want,+got):\n%s", diff)
			}
			if tc.epoch != 0 {
				table.epoch = tc.epoch
			}
			// Half the nodes: the others read as absent, not as the previous pod's values.
			table.reset(len(nodes) / 2)
			for i, ni := range nodes[500:] {
				table.set(ni, int32(2*(i+500)))
			}
			if diff := cmp.Diff(tc.want, contents(&table, nodes)); diff != "" {
				t.Errorf("after reset (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestNodeTableGrows(t *testing.T) {
	nodes := tableNodes(100)
	var table nodeTable[int32]
	table.reset(10)
	small := len(table.slots)
	table.reset(len(nodes))
	for i, ni := range nodes {
		table.set(ni, int32(i))
	}
	if len(table.slots) <= small || len(table.slots) < len(nodes)*3/2 {
		t.Errorf("table of %d slots for %d nodes (was %d)", len(table.slots), len(nodes), small)
	}
	for i, ni := range nodes {
		if v, ok := table.get(ni); !ok || v != int32(i) {
			t.Errorf("node %d: got %d, %v", i, v, ok)
		}
	}
}

// TestNodeList: every order kube-scheduler can list feasible nodes in finds each node's own
// value, whether the slot after a recent find holds it or the table does.
func TestNodeList(t *testing.T) {
	const n = 200
	nodes := tableNodes(n)
	list := make([]fwk.NodeInfo, n)
	for i, ni := range nodes {
		list[i] = ni
	}
	// interleaved takes streams runs of consecutive positions, one node of each in turn, as
	// Filter workers on consecutive chunks list them.
	interleaved := func(streams, from, length int) []int {
		var out []int
		for i := range length {
			for s := range streams {
				out = append(out, (from+s*length+i)%n)
			}
		}
		return out
	}
	seq := func(from, to int) []int {
		var out []int
		for i := from; i < to; i++ {
			out = append(out, i%n)
		}
		return out
	}
	backwards := func(s []int) []int {
		slices.Reverse(s)
		return s
	}
	tests := []struct {
		name  string
		order []int
	}{
		{name: "in list order", order: seq(0, n)},
		{name: "around the end of the list", order: seq(n-5, n+5)},
		{name: "two workers", order: interleaved(2, 10, 40)},
		{name: "as many workers as followed", order: interleaved(listStreams, 0, n/listStreams)},
		{name: "more workers than followed", order: interleaved(listStreams+3, 7, 15)},
		{name: "backwards", order: backwards(seq(0, n))},
		{name: "the same node twice", order: []int{5, 5, 6, 6, 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var l nodeList[string]
			l.reset(list, func(ni *framework.NodeInfo) string { return ni.Node().Name })
			var want, got []string
			for _, pos := range tc.order {
				want = append(want, nodes[pos].Node().Name)
				v, ok := l.get(nodes[pos])
				if !ok {
					v = "(absent)"
				}
				got = append(got, v)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("values (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestNodeListReset: a list holds the slice it was reset to; after a reset to another list,
// the previous list's nodes are absent and positions found in the longer list before are not
// read past the end of the new one.
func TestNodeListReset(t *testing.T) {
	nodes := tableNodes(50)
	asList := func(nodes []*framework.NodeInfo) []fwk.NodeInfo {
		out := []fwk.NodeInfo{framework.NewNodeInfo()} // no Node: never asked for, still listed
		for _, ni := range nodes {
			out = append(out, ni)
		}
		return out
	}
	var l nodeList[int]
	index := func(ni *framework.NodeInfo) int { return slices.Index(nodes, ni) }
	long := asList(nodes)
	l.reset(long, index)
	// The list itself, not an equal copy nor a part of it (kube-scheduler allocates a new
	// list whenever nodes come or go).
	if holds := []bool{l.holds(long), l.holds(asList(nodes)), l.holds(long[:10])}; !cmp.Equal(holds, []bool{true, false, false}) {
		t.Errorf("holds the list, a copy, a part: %v, want [true false false]", holds)
	}
	for _, ni := range nodes[40:] {
		l.get(ni)
	}
	l.reset(asList(nodes[:10]), index)
	got := map[int]bool{}
	for i, ni := range nodes {
		v, ok := l.get(ni)
		if ok && v != i {
			t.Errorf("node %d: value %d", i, v)
		}
		got[i] = ok
	}
	want := map[int]bool{}
	for i := range nodes {
		want[i] = i < 10
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("found (-want,+got):\n%s", diff)
	}
	if _, ok := l.get(nil); ok {
		t.Error("a nil NodeInfo was found")
	}
}
