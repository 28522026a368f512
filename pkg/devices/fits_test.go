package devices_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
)

// noRoom is the reason fits.go gives when the allocator finds no devices for the pod next to
// takers pods that took devices first; noRoomAlone when no pod did.
func noRoom(takers int) string {
	return fmt.Sprintf("cannot allocate all claims next to the %d pods with claims this simulation placed on the node", takers)
}

const noRoomAlone = "cannot allocate all claims"

// world is a cluster of one node, node-a, with n devices.
func world(n int) (*fakeDRA, *v1.Node) {
	dra := newFakeDRA()
	node, slice := gpuNode("node-a", n)
	dra.Slices = append(dra.Slices, slice)
	return dra, node
}

// member is the gang member whose copies are counted: its own claim of n devices, unallocated.
func member(dra *fakeDRA, n int) *v1.Pod {
	pod, claim := claimPod("member", n)
	dra.AddClaims(claim)
	return pod
}

// holder is a pod bound to node whose claim holds devs of it (reserved for the pod).
func holder(dra *fakeDRA, name string, node *v1.Node, devs ...int) *v1.Pod {
	pod, claim := claimPod(name, len(devs))
	bound(pod, node.Name)
	allocate(claim, node.Name, devs, pod)
	dra.AddClaims(claim)
	return pod
}

// span is the device indices from, ..., to-1.
func span(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func TestFits(t *testing.T) {
	tests := []struct {
		name string
		// build returns the cluster, the simulation's node and the pod asked about.
		build func() (*fakeDRA, *framework.NodeInfo, *v1.Pod)
		// unfiltered: DynamicResources' Filter refused pod on the cluster as is (the
		// caller then asks Fits only where Frees says victims freed devices).
		unfiltered bool
		want       verdict
		// frees is what Frees answers: the simulation took away every user of a claim.
		frees bool
	}{{
		// A pod without claims is not the package's business, even next to a pod whose
		// devices cannot be counted.
		name: "pod without claims",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(0)
			ghost, _ := claimPod("ghost", 1)
			plain := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: namespace, UID: "uid-plain"}}
			return dra, nodeInfo(node, ghost), plain
		},
		want: verdict{Fits: true},
	}, {
		name: "fast path: 8 free, member asks 8, no copy",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			return dra, nodeInfo(node), member(dra, 8)
		},
		want: verdict{Fits: true},
	}, {
		// Nothing on ni changes the cluster's devices: the DynamicResources Filter that ran
		// before answers, Fits does not allocate (9 of 8 would fail if it did).
		name: "fast path does not allocate",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			plain := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: namespace, UID: "uid-plain"}}
			return dra, nodeInfo(node, plain), member(dra, 9)
		},
		want: verdict{Fits: true},
	}, {
		// Without the Filter's word Fits allocates pod's claims itself, even on a node
		// the simulation left as it is.
		name: "unfiltered: member asks 9 of 8, no copy",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			return dra, nodeInfo(node), member(dra, 9)
		},
		unfiltered: true,
		want:       verdict{Reason: noRoomAlone},
	}, {
		name: "unfiltered: member asks 8 of 8, no copy",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			return dra, nodeInfo(node), member(dra, 8)
		},
		unfiltered: true,
		want:       verdict{Fits: true},
	}, {
		name: "member asks 8 of 8 next to one copy",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			m := member(dra, 8)
			return dra, nodeInfo(node, copyOf(m, node.Name, 1)), m
		},
		want: verdict{Reason: noRoom(1)},
	}, {
		name: "member asks 4 of 8 next to one copy",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			m := member(dra, 4)
			return dra, nodeInfo(node, copyOf(m, node.Name, 1)), m
		},
		want: verdict{Fits: true},
	}, {
		// Pods without claims on ni take no devices and are not counted in the reason.
		name: "member asks 4 of 8 next to two copies",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			m := member(dra, 4)
			plain := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: namespace, UID: "uid-plain"}}
			return dra, nodeInfo(node, copyOf(m, node.Name, 1), plain, copyOf(m, node.Name, 2)), m
		},
		want: verdict{Reason: noRoom(2)},
	}, {
		// The victim still on ni holds its 8 (the Filter refused; Fits agrees when asked).
		name: "victim holding 8 stays on ni",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			v := holder(dra, "victim", node, span(0, 8)...)
			return dra, nodeInfo(node, v), member(dra, 8)
		},
		unfiltered: true,
		want:       verdict{Reason: noRoomAlone},
	}, {
		name: "victim holding 8 removed from ni",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			holder(dra, "victim", node, span(0, 8)...)
			return dra, nodeInfo(node), member(dra, 8)
		},
		unfiltered: true,
		want:       verdict{Fits: true},
		frees:      true,
	}, {
		// A victim on ni keeps its devices when Fits allocates: 4 held, the copy takes 4.
		name: "victim holding 4 on ni, member asks 4 next to a copy",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			v := holder(dra, "victim", node, span(0, 4)...)
			m := member(dra, 4)
			return dra, nodeInfo(node, v, copyOf(m, node.Name, 1)), m
		},
		want: verdict{Reason: noRoom(1)},
	}, {
		name: "victim holding 4 removed, member asks 4 next to a copy",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			holder(dra, "victim", node, span(0, 4)...)
			m := member(dra, 4)
			return dra, nodeInfo(node, copyOf(m, node.Name, 1)), m
		},
		want:  verdict{Fits: true},
		frees: true,
	}, {
		// Only the removed victim's devices are freed: the one left keeps its 4.
		name: "one of two victims removed, member asks 8",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			holder(dra, "gone", node, span(0, 4)...)
			stays := holder(dra, "stays", node, span(4, 8)...)
			return dra, nodeInfo(node, stays), member(dra, 8)
		},
		unfiltered: true,
		want:       verdict{Reason: noRoomAlone},
		frees:      true,
	}, {
		// A claim several pods use is freed only once none of them is on ni.
		name: "claim reserved for a removed pod and one on ni stays taken",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			gone, stays := bound(sharingPod("gone", "both"), node.Name), bound(sharingPod("stays", "both"), node.Name)
			both := sharedClaim("both", 4)
			allocate(both, node.Name, span(0, 4), gone, stays)
			holder(dra, "victim", node, span(4, 8)...)
			dra.AddClaims(both)
			return dra, nodeInfo(node, stays), member(dra, 8)
		},
		unfiltered: true,
		want:       verdict{Reason: noRoomAlone},
		frees:      true,
	}, {
		// Allocated but reserved for nobody: kube-scheduler has not deallocated it yet.
		name: "unreserved claim stays taken next to a copy",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			idle := sharedClaim("idle", 4)
			allocate(idle, node.Name, span(0, 4))
			dra.AddClaims(idle)
			m := member(dra, 4)
			return dra, nodeInfo(node, copyOf(m, node.Name, 1)), m
		},
		want: verdict{Reason: noRoom(1)},
	}, {
		name: "unreserved claim stays taken next to a removed victim",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			idle := sharedClaim("idle", 4)
			allocate(idle, node.Name, span(0, 4))
			dra.AddClaims(idle)
			holder(dra, "victim", node, span(4, 8)...)
			return dra, nodeInfo(node), member(dra, 8)
		},
		unfiltered: true,
		want:       verdict{Reason: noRoomAlone},
		frees:      true,
	}, {
		// An allocation in flight (reserved, not yet written to the claim) holds its 4.
		name: "pending allocation is taken",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			assumed, claim := claimPod("assumed", 4)
			dra.AddClaims(claim)
			dra.Pending[claim.UID] = allocation(node.Name, span(0, 4)...)
			m := member(dra, 4)
			return dra, nodeInfo(node, bound(assumed, node.Name), copyOf(m, node.Name, 1)), m
		},
		want: verdict{Reason: noRoom(1)},
	}, {
		name: "pending allocation leaves 4, member asks 2 next to a copy",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			assumed, claim := claimPod("assumed", 4)
			dra.AddClaims(claim)
			dra.Pending[claim.UID] = allocation(node.Name, span(0, 4)...)
			m := member(dra, 2)
			return dra, nodeInfo(node, bound(assumed, node.Name), copyOf(m, node.Name, 1)), m
		},
		want: verdict{Fits: true},
	}, {
		// Two nominated pods share one unallocated claim of 4: it takes 4 once, not 8.
		name: "shared claim allocated once",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			dra.AddClaims(sharedClaim("shared", 4))
			a, b := sharingPod("a", "shared"), sharingPod("b", "shared")
			return dra, nodeInfo(node, a, b), member(dra, 4)
		},
		want: verdict{Fits: true},
	}, {
		// The second sharer adds no claim: the reason counts the one pod that took devices.
		name: "shared claim leaves 4, member asks 5",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			dra.AddClaims(sharedClaim("shared", 4))
			a, b := sharingPod("a", "shared"), sharingPod("b", "shared")
			return dra, nodeInfo(node, a, b), member(dra, 5)
		},
		want: verdict{Reason: noRoom(1)},
	}, {
		// A nominated pod whose generated claim is not in the cache yet: no count may
		// rely on its devices.
		name: "pod on ni whose claim does not exist yet",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			early, _ := claimPod("early", 1)
			return dra, nodeInfo(node, early), member(dra, 1)
		},
		want: verdict{Reason: "the devices of pod default/early on the node cannot be counted: resourceclaim default/early-gpus does not exist yet"},
	}, {
		name: "member's own claim does not exist yet next to a copy",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			other := member(dra, 1)
			m, _ := claimPod("lost", 1)
			return dra, nodeInfo(node, copyOf(other, node.Name, 1)), m
		},
		want: verdict{Reason: "resourceclaim default/lost-gpus does not exist yet"},
	}, {
		// The copy of a bound pod owns no claim: it takes 2 fresh devices of its own,
		// leaving 8-2-2 = 4.
		name: "copy of an allocated original takes fresh devices, member asks 4",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			o := holder(dra, "original", node, 0, 1)
			return dra, nodeInfo(node, o, copyOf(o, node.Name, 1)), member(dra, 4)
		},
		want: verdict{Fits: true},
	}, {
		name: "copy of an allocated original takes fresh devices, member asks 5",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := world(8)
			o := holder(dra, "original", node, 0, 1)
			return dra, nodeInfo(node, o, copyOf(o, node.Name, 1)), member(dra, 5)
		},
		want: verdict{Reason: noRoom(1)},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dra, ni, pod := tc.build()
			state := stateFor(t, dra)
			fits, reason, err := devices.Fits(context.Background(), state, ni, pod, !tc.unfiltered)
			if err != nil {
				t.Fatalf("Fits: %v", err)
			}
			if diff := cmp.Diff(tc.want, verdict{Fits: fits, Reason: reason}); diff != "" {
				t.Errorf("Fits (-want +got):\n%s", diff)
			}
			frees, err := devices.Frees(context.Background(), state, ni, pod)
			if err != nil || frees != tc.frees {
				t.Errorf("Frees = %v, %v; want %v", frees, err, tc.frees)
			}
		})
	}
}
