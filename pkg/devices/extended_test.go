package devices_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices/devicestest"
)

// gpuResource is the extended resource the class provides through DRA in these tests.
const gpuResource v1.ResourceName = "example.com/gpu"

// extendedWorld is world(n) with the class providing gpuResource.
func extendedWorld(n int) (*fakeDRA, *v1.Node) {
	dra, node := world(n)
	dra.Extended = map[v1.ResourceName]string{gpuResource: className}
	return dra, node
}

// TestFitsExtendedResources: a member asking for an extended resource that a DeviceClass
// provides takes that many devices of the class, and so does each copy of it: DynamicResources'
// Filter, blind to the copies, answered yes for every one of them.
func TestFitsExtendedResources(t *testing.T) {
	extended := func(name string, n int) *v1.Pod { return devicestest.ExtendedPod(name, gpuResource, n) }
	tests := []struct {
		name       string
		build      func() (*fakeDRA, *framework.NodeInfo, *v1.Pod)
		unfiltered bool
		want       verdict
	}{{
		name: "member asks 8 of 8 next to one copy",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := extendedWorld(8)
			m := extended("member", 8)
			return dra, nodeInfo(node, copyOf(m, node.Name, 1)), m
		},
		want: verdict{Reason: noRoom(1)},
	}, {
		name: "member asks 4 of 8 next to one copy",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := extendedWorld(8)
			m := extended("member", 4)
			return dra, nodeInfo(node, copyOf(m, node.Name, 1)), m
		},
		want: verdict{Fits: true},
	}, {
		name: "member asks 4 of 8 next to two copies",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := extendedWorld(8)
			m := extended("member", 4)
			return dra, nodeInfo(node, copyOf(m, node.Name, 1), copyOf(m, node.Name, 2)), m
		},
		want: verdict{Reason: noRoom(2)},
	}, {
		name: "unfiltered: member asks 9 of 8",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := extendedWorld(8)
			return dra, nodeInfo(node), extended("member", 9)
		},
		unfiltered: true,
		want:       verdict{Reason: noRoomAlone},
	}, {
		// An init container's request counts as Kubernetes sums requests: the larger of
		// the init container's and the regular containers' (3 here, not 3+2).
		name: "unfiltered: init container asks 3, container 2, of 3 free",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := extendedWorld(3)
			m := extended("member", 2)
			m.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{gpuResource: resource.MustParse("3")}}}}
			return dra, nodeInfo(node), m
		},
		unfiltered: true,
		want:       verdict{Fits: true},
	}, {
		// The node advertises the resource (a device plugin): NodeResourcesFit counts it
		// there, DRA allocates nothing.
		name: "the node advertises the resource",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := extendedWorld(8)
			node.Status.Allocatable = v1.ResourceList{gpuResource: resource.MustParse("8")}
			m := extended("member", 8)
			return dra, nodeInfo(node, copyOf(m, node.Name, 1)), m
		},
		want: verdict{Fits: true},
	}, {
		// A member reserved on the node (waiting in Permit): its claim is in flight under
		// DynamicResources' own UID, in the allocated state already (devices 0-3), and its
		// status does not name it yet. It takes no more (it took 4 twice).
		name: "unfiltered: a reserved member's claim in flight holds 4, member asks 4",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := extendedWorld(8)
			dra.Pending["in-flight"] = allocation(node.Name, span(0, 4)...)
			return dra, nodeInfo(node, bound(extended("reserved", 4), node.Name)), extended("member", 4)
		},
		unfiltered: true,
		want:       verdict{Fits: true},
	}, {
		// A bound pod's claim for its extended resources holds devices 0-3: the allocated
		// state counts them, the pod takes no more.
		name: "unfiltered: a pod's made claim holds 4, member asks 4",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := extendedWorld(8)
			return dra, nodeInfo(node, madeClaimHolder(dra, node, 4)), extended("member", 4)
		},
		unfiltered: true,
		want:       verdict{Fits: true},
	}, {
		name: "unfiltered: a pod's made claim holds 4, member asks 5",
		build: func() (*fakeDRA, *framework.NodeInfo, *v1.Pod) {
			dra, node := extendedWorld(8)
			return dra, nodeInfo(node, madeClaimHolder(dra, node, 4)), extended("member", 5)
		},
		unfiltered: true,
		want:       verdict{Reason: noRoomAlone},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dra, ni, pod := tc.build()
			fits, reason, err := devices.Fits(context.Background(), stateFor(t, dra), ni, pod, !tc.unfiltered)
			if err != nil {
				t.Fatalf("Fits: %v", err)
			}
			if diff := cmp.Diff(tc.want, verdict{Fits: fits, Reason: reason}); diff != "" {
				t.Errorf("Fits (-want +got):\n%s", diff)
			}
		})
	}
}

// madeClaimHolder is a pod bound to node with n of gpuResource whose claim DynamicResources
// made and allocated (devices 0 to n-1), as the pod's status names it.
func madeClaimHolder(dra *fakeDRA, node *v1.Node, n int) *v1.Pod {
	pod := bound(devicestest.ExtendedPod("holder", gpuResource, n), node.Name)
	_, claim := claimPod("holder", n)
	claim.Name = "holder-extended-resources-x1"
	claim.OwnerReferences[0].UID = pod.UID
	allocate(claim, node.Name, span(0, n), pod)
	dra.AddClaims(claim)
	pod.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: claim.Name}
	return pod
}

// TestTakesDevices: a pod takes devices through its claims, or through an extended resource
// a DeviceClass provides (in any container); nothing without a resolver (the feature off).
func TestTakesDevices(t *testing.T) {
	withInit := devicestest.ExtendedPod("init", v1.ResourceCPU, 1)
	withInit.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{gpuResource: resource.MustParse("1")}}}}
	claiming, _ := claimPod("claiming", 1)
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		resolver bool
		want     bool
	}{
		{name: "extended resource of a class", pod: devicestest.ExtendedPod("gpu", gpuResource, 1), resolver: true, want: true},
		{name: "extended resource, no resolver", pod: devicestest.ExtendedPod("gpu", gpuResource, 1)},
		{name: "extended resource of no class", pod: devicestest.ExtendedPod("other", "example.com/fpga", 1), resolver: true},
		{name: "zero of it", pod: devicestest.ExtendedPod("zero", gpuResource, 0), resolver: true},
		{name: "CPU only", pod: devicestest.ExtendedPod("cpu", v1.ResourceCPU, 1), resolver: true},
		{name: "in an init container", pod: withInit, resolver: true, want: true},
		{name: "a claim", pod: claiming, want: true},
		{name: "nothing", pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}, resolver: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dra := newFakeDRA()
			if tc.resolver {
				dra.Extended = map[v1.ResourceName]string{gpuResource: className}
			}
			source := devices.NewSource(dra, structured.Features{})
			if got := source.TakesDevices(tc.pod); got != tc.want {
				t.Errorf("TakesDevices = %v, want %v", got, tc.want)
			}
		})
	}
	if (*devices.Source)(nil).TakesDevices(claiming) {
		t.Error("a nil Source (DRA off) counts devices")
	}
}
