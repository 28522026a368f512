package networktopology

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
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
