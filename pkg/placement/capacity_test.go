package placement

import (
	"testing"
)

// TestLedgerWithCappedCapacity: capacities are capped at demand plus the slots promised in
// the node's leaf, so promised slots never hide free ones.
func TestLedgerWithCappedCapacity(t *testing.T) {
	got, err := Make(Request{Tree: seed001(), Constraint: "hard topology (tier<=1)", MaxTier: 1, Pending: pods(3),
		Nodes: capacities(map[string]int{"node-0": 53}), Promised: map[string]int{"s0": 50},
		Weights: []float64{1}, PodRequest: []float64{0}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Domain != "s0" {
		t.Errorf("domain = %s, want s0 (53 slots, 50 promised, 3 free)", got.Domain)
	}
}
