package devices_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
)

// countLimit is the most copies counted, as networktopology's capacity simulations ask.
const countLimit = 20

// filterDevices is the device half of networktopology.FilterWithDevices: DynamicResources'
// Filter sees the cluster as is (clusterFree devices); where it refuses, Fits is asked only
// if the simulation freed devices (Frees), and then allocates pod's claims itself.
func filterDevices(t *testing.T, state fwk.CycleState, ni fwk.NodeInfo, pod *v1.Pod, clusterFree, request int) bool {
	t.Helper()
	ctx := context.Background()
	filtered := clusterFree >= request
	if !filtered {
		frees, err := devices.Frees(ctx, state, ni, pod)
		if err != nil {
			t.Fatalf("Frees: %v", err)
		}
		if !frees {
			return false
		}
	}
	fits, _, err := devices.Fits(ctx, state, ni, pod, filtered)
	if err != nil {
		t.Fatalf("Fits: %v", err)
	}
	return fits
}

// countCopies counts copies of pod on ni the way networktopology.CountFits does: ask, add a
// copy, ask again, until the answer is no or the limit.
func countCopies(t *testing.T, state fwk.CycleState, ni *framework.NodeInfo, pod *v1.Pod, clusterFree, request int) int {
	t.Helper()
	count := 0
	for count < countLimit && filterDevices(t, state, ni, pod, clusterFree, request) {
		count++
		ni.AddPod(copyOf(pod, ni.Node().Name, count))
	}
	return count
}

// On a node of 1-16 devices, some held by bound pods' claims (some of those pods preemption
// victims the simulation removed from ni), a member asking 1-8 devices has exactly
// floor(free/request) copies counted, free being the devices the pods left on ni do not hold.
func TestFitsCountsCopies(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 2026))
	// mix counts the kinds of cases drawn, so that a change of seed or generator that
	// stops drawing some of them is seen.
	var mix struct{ none, several, withVictims int }
	for c := range 200 {
		n := 1 + rng.IntN(16)
		request := 1 + rng.IntN(8)
		dra, node := world(n)
		ni := nodeInfo(node)

		// Every device is held with a probability of the case's own, in claims of 1-3
		// devices; a holder is a victim (not on ni) with probability 1/3.
		held := rng.Float64()
		var claim []int
		holders, taken, kept, victims, size := 0, 0, 0, 0, 1+rng.IntN(3)
		flush := func() {
			if len(claim) == 0 {
				return
			}
			h := holder(dra, fmt.Sprintf("holder-%d", holders), node, claim...)
			holders++
			taken += len(claim)
			if rng.IntN(3) == 0 {
				victims++
			} else {
				ni.AddPod(h)
				kept += len(claim)
			}
			claim, size = nil, 1+rng.IntN(3)
		}
		for d := range n {
			if rng.Float64() < held {
				if claim = append(claim, d); len(claim) == size {
					flush()
				}
			}
		}
		flush()

		m := member(dra, request)
		state := stateFor(t, dra)
		frees, err := devices.Frees(context.Background(), state, ni, m)
		if err != nil || frees != (victims > 0) {
			t.Errorf("case %d: Frees = %v, %v with %d victims", c, frees, err, victims)
		}
		free := n - kept
		want := min(free/request, countLimit)
		got := countCopies(t, state, ni, m, n-taken, request)
		switch {
		case want == 0:
			mix.none++
		case want >= 2:
			mix.several++
		}
		if victims > 0 {
			mix.withVictims++
		}
		if got != want {
			t.Errorf("case %d: %d devices, %d held by %d pods (%d by %d victims), member asks %d: counted %d copies, want %d",
				c, n, taken, holders, taken-kept, victims, request, got, want)
		}
		// Without victims (a plan's simulation), the bound counts the same, exactly.
		if victims == 0 {
			exact, members := boundOf(t, dra, m, node.Name)
			if !exact || min(members, countLimit) != got {
				t.Errorf("case %d: bound counts %d members (exact %v), the allocator %d", c, members, exact, got)
			}
		}
	}
	if mix.none < 10 || mix.several < 10 || mix.withVictims < 10 {
		t.Errorf("the cases drawn miss a kind: %+v", mix)
	}
}

// boundOf is the bound of pod's demand on node from an inventory of dra's classes, slices and
// allocated claims: whether it is exact there, and the members it counts.
func boundOf(t *testing.T, dra *fakeDRA, pod *v1.Pod, node string) (bool, int) {
	t.Helper()
	inv := devices.NewInventory()
	for _, c := range dra.Classes {
		inv.SetClass(c)
	}
	for _, s := range dra.Slices {
		inv.SetSlice(s)
	}
	for _, c := range dra.Claims {
		inv.SetClaim(c)
	}
	b := boundFor(t, inv, dra, pod)
	members, _ := b.Members(node)
	return b.Exact(node), members
}
