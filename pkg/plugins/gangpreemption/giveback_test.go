package gangpreemption

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// giveBackCase is a domain of n victim units, each with a weight (the room it takes back)
// and a leaf. The gang fits while the units given back leave it room overall (the count,
// cheap) and leave at least leaves leaves with at most perLeaf taken (the planner, a run over
// the domain, for a sub-group constraint): both monotone.
type giveBackCase struct {
	weight, leaf            []int
	budget, leaves, perLeaf int
}

// run gives back in batches or one at a time; it returns the victims and the planner runs.
func (gc giveBackCase) run(t *testing.T, batches bool) ([]int, int) {
	n := len(gc.weight)
	given := make([]bool, n)
	planned := 0
	fits := func() bool {
		used, inLeaf := 0, make([]int, 8)
		for i, g := range given {
			if g {
				used += gc.weight[i]
				inLeaf[gc.leaf[i]] += gc.weight[i]
			}
		}
		if used > gc.budget {
			return false
		}
		planned++
		roomy := 0
		for _, w := range inLeaf {
			if w <= gc.perLeaf {
				roomy++
			}
		}
		return roomy >= gc.leaves
	}
	victims := giveBack(n, batches, func(lo, hi int) bool {
		for i := lo; i < hi; i++ {
			if given[i] {
				t.Fatalf("unit %d given back twice", i)
			}
			given[i] = true
		}
		if fits() {
			return true
		}
		for i := lo; i < hi; i++ {
			given[i] = false
		}
		return false
	})
	for _, v := range victims {
		if given[v] {
			t.Fatalf("victim %d is given back", v)
		}
	}
	if spared := n - len(victims); spared != count(given) {
		t.Fatalf("%d units given back, %d not victims", count(given), spared)
	}
	return victims, planned
}

// TestGiveBack: in batches, the victims are exactly those of one unit at a time whenever
// fitting is monotone (fewer units given back never fits worse), and a batch that does not
// fit leaves nothing given back; on 500 random domains.
func TestGiveBack(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for c := range 500 {
		n := rng.IntN(300) + 1
		gc := giveBackCase{weight: make([]int, n), leaf: make([]int, n), leaves: rng.IntN(9), perLeaf: rng.IntN(40)}
		total := 0
		for i := range n {
			gc.weight[i], gc.leaf[i] = rng.IntN(4)+1, rng.IntN(8)
			total += gc.weight[i]
		}
		gc.budget = rng.IntN(total + 1)
		single, _ := gc.run(t, false)
		batched, _ := gc.run(t, true)
		if diff := cmp.Diff(single, batched); diff != "" {
			t.Fatalf("case %d (%+v): victims (-one at a time, +batches):\n%s", c, gc, diff)
		}
	}
}

// TestGiveBackPlansLess: the shape of the benchmark's decision (a gang that needs a fifth of
// a spine: 512 units of one node each, 412 can be given back) asks the planner 412 times one
// at a time and a few dozen times in batches, for the same victims.
func TestGiveBackPlansLess(t *testing.T) {
	gc := giveBackCase{weight: make([]int, 512), leaf: make([]int, 512), budget: 412, leaves: 1, perLeaf: 1 << 20}
	for i := range gc.weight {
		gc.weight[i], gc.leaf[i] = 1, i%8
	}
	single, singlePlans := gc.run(t, false)
	batched, batchedPlans := gc.run(t, true)
	if diff := cmp.Diff(single, batched); diff != "" {
		t.Fatalf("victims (-one at a time, +batches):\n%s", diff)
	}
	if len(single) != 100 || singlePlans != 412 || batchedPlans > 20 {
		t.Errorf("%d victims, planner runs %d one at a time and %d in batches; want 100, 412 and at most 20", len(single), singlePlans, batchedPlans)
	}
}

func count(given []bool) int {
	n := 0
	for _, g := range given {
		if g {
			n++
		}
	}
	return n
}
