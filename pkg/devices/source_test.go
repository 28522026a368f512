package devices_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
)

// Without DRA (no manager, or no source attached to the state) every pod fits and nothing is
// freed: kube-scheduler allocates nothing then.
func TestFitsWithoutDevices(t *testing.T) {
	dra, node := world(8)
	m := member(dra, 8)
	holder(dra, "victim", node, 0)
	ni := nodeInfo(node, copyOf(m, node.Name, 1))
	nilSource := framework.NewCycleState()
	devices.Attach(nilSource, devices.NewSource(nil, structured.Features{}))
	states := map[string]fwk.CycleState{"nothing attached": framework.NewCycleState(), "nil source": nilSource}
	for name, state := range states {
		for _, filtered := range []bool{true, false} {
			fits, reason, err := devices.Fits(context.Background(), state, ni, m, filtered)
			if diff := cmp.Diff(verdict{Fits: true}, verdict{Fits: fits, Reason: reason}); diff != "" || err != nil {
				t.Errorf("%s, filtered %v: Fits (-want +got):\n%s, err %v", name, filtered, diff, err)
			}
		}
		if frees, err := devices.Frees(context.Background(), state, ni, m); frees || err != nil {
			t.Errorf("%s: Frees = %v, %v; want false", name, frees, err)
		}
	}
}

// The snapshot is taken once per simulation, shared by the state's clones, and the DRA
// manager's allocated state is asked again while a claim changes under it.
func TestFitsSnapshotOnceWithRetries(t *testing.T) {
	dra, node := world(8)
	dra.GatherErrs = 2
	m := member(dra, 4)
	state := stateFor(t, dra)
	ni := nodeInfo(node, copyOf(m, node.Name, 1))
	for _, st := range []fwk.CycleState{state, state.Clone()} {
		fits, reason, err := devices.Fits(context.Background(), st, ni, m, true)
		if diff := cmp.Diff(verdict{Fits: true}, verdict{Fits: fits, Reason: reason}); diff != "" || err != nil {
			t.Fatalf("Fits (-want +got):\n%s, err %v", diff, err)
		}
	}
	if dra.Gathers != 3 {
		t.Errorf("GatherAllocatedState called %d times, want 3 (two failures, one snapshot)", dra.Gathers)
	}
}

// A manager that never gives a consistent state is an error, not an answer.
func TestFitsGatherFails(t *testing.T) {
	dra, node := world(8)
	dra.GatherErrs = 1000
	m := member(dra, 4)
	_, _, err := devices.Fits(context.Background(), stateFor(t, dra), nodeInfo(node, copyOf(m, node.Name, 1)), m, true)
	if err == nil || !strings.Contains(err.Error(), "reading the cluster's devices: allocated devices: claim changed while read") {
		t.Errorf("Fits error = %v, want the manager's error wrapped", err)
	}
}

// Unfiltered, Fits checks what DynamicResources' Filter would have: a claim already allocated
// must select the node; allocated for it, the pod needs nothing more.
func TestFitsUnfilteredAllocatedClaim(t *testing.T) {
	onNode := func(name string) *v1.NodeSelector {
		return &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{name},
		}}}}}
	}
	tests := []struct {
		name string
		on   string // the node holding the pod's devices
		want verdict
	}{
		{name: "allocated on the node", on: "node-a", want: verdict{Fits: true}},
		{name: "allocated on another node", on: "node-b", want: verdict{Reason: "resourceclaim not available on the node"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dra, node := world(8)
			_, other := gpuNode("node-b", 8)
			dra.Slices = append(dra.Slices, other)
			pod, claim := claimPod("placed", 2)
			allocate(claim, tc.on, []int{0, 1}, pod)
			claim.Status.Allocation.NodeSelector = onNode(tc.on)
			dra.AddClaims(claim)
			fits, reason, err := devices.Fits(context.Background(), stateFor(t, dra), nodeInfo(node), pod, false)
			if err != nil {
				t.Fatalf("Fits: %v", err)
			}
			if diff := cmp.Diff(tc.want, verdict{Fits: fits, Reason: reason}); diff != "" {
				t.Errorf("Fits (-want +got):\n%s", diff)
			}
		})
	}
}

// A claim reserved for a PodGroup (DRAWorkloadResourceClaims: ReservedFor names the group,
// not its pods) whose pods are all on ni is in use: its devices stay taken.
func TestFitsClaimReservedForPodGroup(t *testing.T) {
	dra, node := world(8)
	gang := sharedClaim("gang", 8)
	allocate(gang, node.Name, span(0, 8))
	gang.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{
		APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: "pg", UID: "uid-pg",
	}}
	dra.AddClaims(gang)
	a, b := bound(sharingPod("a", "gang"), node.Name), bound(sharingPod("b", "gang"), node.Name)
	m := member(dra, 8)
	state, ni := stateFor(t, dra), nodeInfo(node, a, b)
	if frees, err := devices.Frees(context.Background(), state, ni, m); frees || err != nil {
		t.Errorf("Frees = %v, %v; want false", frees, err)
	}
	fits, reason, err := devices.Fits(context.Background(), state, ni, m, false)
	if diff := cmp.Diff(verdict{Reason: noRoomAlone}, verdict{Fits: fits, Reason: reason}); diff != "" || err != nil {
		t.Errorf("Fits (-want +got):\n%s, err %v", diff, err)
	}
}

// The pod asked about is never on ni; a claim of its own already allocated on the node and
// reserved for it is still its own, not a victim's: its 4 devices stay taken, so two copies
// asking 4 fresh devices each leave no room.
func TestFitsOwnReservedClaim(t *testing.T) {
	dra, node := world(8)
	pod, claim := claimPod("member", 4)
	allocate(claim, node.Name, span(0, 4), pod)
	dra.AddClaims(claim)
	state := stateFor(t, dra)
	if frees, err := devices.Frees(context.Background(), state, nodeInfo(node), pod); frees || err != nil {
		t.Errorf("Frees = %v, %v; want false", frees, err)
	}
	ni := nodeInfo(node, copyOf(pod, node.Name, 1), copyOf(pod, node.Name, 2))
	fits, reason, err := devices.Fits(context.Background(), state, ni, pod, true)
	if diff := cmp.Diff(verdict{Reason: noRoom(2)}, verdict{Fits: fits, Reason: reason}); diff != "" || err != nil {
		t.Errorf("Fits (-want +got):\n%s, err %v", diff, err)
	}
}

// Outside preemption (a Source without WithVictims) a claim reserved for a pod missing from
// ni keeps its devices: the pod left the scheduler's cache before the claim controller
// released its claim, and DynamicResources still counts them taken.
func TestFitsWithoutVictims(t *testing.T) {
	dra, node := world(8)
	holder(dra, "gone", node, span(0, 8)...)
	m := member(dra, 8)
	state := framework.NewCycleState()
	devices.Attach(state, devices.NewSource(dra, structured.Features{}))
	ni := nodeInfo(node)
	if frees, err := devices.Frees(context.Background(), state, ni, m); frees || err != nil {
		t.Errorf("Frees = %v, %v; want false", frees, err)
	}
	fits, reason, err := devices.Fits(context.Background(), state, ni, m, false)
	if diff := cmp.Diff(verdict{Reason: noRoomAlone}, verdict{Fits: fits, Reason: reason}); diff != "" || err != nil {
		t.Errorf("Fits (-want +got):\n%s, err %v", diff, err)
	}
}
