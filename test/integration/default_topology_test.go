package integration

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestTopologyDefaultForPodGroupsWithoutOne: with defaultNetworkTopology hard at tier 1 in the
// scheduler's args, PodGroups that carry no constraint (what mpi-operator and the training
// operators create) are placed by it: a gang of two lands in one leaf (as a plain gang the
// normal-pod score would put it on the free nodes of the half-full leaves s0 and s1), a gang
// of three fits no two-node leaf and stays pending with the planner's explanation instead of
// spanning leaves, and a PodGroup's own annotation still wins over the default.
func TestTopologyDefaultForPodGroupsWithoutOne(t *testing.T) {
	e := newTopoEnv(t, nodesWithCPU("1", "node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"), nil, seedHyperNodes(t)...)
	e.filler("node-1", "1")
	e.filler("node-3", "1")
	startScheduler(t, map[string]map[string]any{"NetworkTopologyAware": {
		"defaultNetworkTopology": map[string]any{"mode": "hard", "highestTierAllowed": 1},
	}})
	leafOf := map[string]string{"node-0": "s0", "node-1": "s0", "node-2": "s1", "node-3": "s1", "node-4": "s2", "node-5": "s2", "node-6": "s3", "node-7": "s3"}

	pair := e.waitBound(e.gang("pair", 2, "", cpu("1")))
	leaves := map[string]bool{}
	for _, n := range pair {
		leaves[leafOf[n]] = true
	}
	if len(pair) != 2 || len(leaves) != 1 || leaves["s0"] || leaves["s1"] {
		t.Errorf("the pair on %v: want both in one leaf with two free nodes (s2 or s3)", pair)
	}

	trio := e.gang("trio", 3, "", cpu("1"))
	const want = "hard topology (tier<=1): no HyperNode can host 3 pods; tier 1: "
	e.waitCondition(trio[0], v1.PodReasonUnschedulable, want)
	bound := e.bound()
	for _, n := range trio {
		if _, ok := bound[n]; ok {
			t.Errorf("%s bound although the default allows no gang of three", n)
		}
	}

	// Its own constraint, soft at tier 1, lets a gang of three span two leaves of a spine.
	own := e.waitBound(e.gang("own", 3, `{"mode":"soft","highestTierAllowed":1}`, cpu("1")))
	if len(own) != 3 {
		t.Errorf("the annotated gang: %v, want its 3 members bound", own)
	}
}
