package devices_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
)

// selecting is a class selecting the devices of a driver, providing extended when set.
func selecting(name, drv, extended string) *resourceapi.DeviceClass {
	c := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", drv)},
		}}},
	}
	if extended != "" {
		c.Spec.ExtendedResourceName = ptr.To(extended)
	}
	return c
}

// TestInventory follows one cluster through events: counts per node and class, kept by
// slice, claim and class events, in any order.
func TestInventory(t *testing.T) {
	inv := devices.NewInventory()
	var changed []string
	inv.OnChange(func(node string) { changed = append(changed, node) })
	expect := func(step, node string, want map[string]devices.ClassCount, wantChanged ...string) {
		t.Helper()
		if diff := cmp.Diff(want, inv.Counts(node)); diff != "" {
			t.Errorf("%s: counts of %s (-want +got):\n%s", step, node, diff)
		}
		if diff := cmp.Diff(wantChanged, changed); diff != "" {
			t.Errorf("%s: nodes changed (-want +got):\n%s", step, diff)
		}
		changed = nil
	}
	_, sliceA := gpuNode("node-a", 8)
	_, sliceB := gpuNode("node-b", 4)
	holder, claim := claimPod("holder", 3)
	allocate(claim, "node-a", span(0, 3), holder)

	// A claim seen before its devices' slice counts once the slice comes.
	inv.SetClaim(claim)
	expect("claim before its slice", "node-a", nil)
	inv.SetSlice(sliceA)
	expect("slice without a class", "node-a", map[string]devices.ClassCount{}, "node-a")
	inv.SetClass(selecting(className, driver, ""))
	expect("class added", "node-a", map[string]devices.ClassCount{className: {Total: 8, Used: 3}}, "node-a")
	inv.SetSlice(sliceB)
	expect("second node", "node-b", map[string]devices.ClassCount{className: {Total: 4}}, "node-b")
	inv.SetClass(selecting("other", "other.test", ""))
	expect("a class selecting nothing here", "node-a", map[string]devices.ClassCount{className: {Total: 8, Used: 3}}, "node-a", "node-b")

	// Two claims sharing a device count it once, until both let go.
	shared := sharedClaim("shared", 1)
	allocate(shared, "node-a", span(2, 4))
	inv.SetClaim(shared)
	expect("a second claim on device 2 and a new one on 3", "node-a", map[string]devices.ClassCount{className: {Total: 8, Used: 4}}, "node-a")
	released := claim.DeepCopy()
	released.Status = resourceapi.ResourceClaimStatus{}
	inv.SetClaim(released)
	expect("first claim deallocated", "node-a", map[string]devices.ClassCount{className: {Total: 8, Used: 2}}, "node-a")
	inv.RemoveClaim(shared.UID)
	expect("second claim deleted", "node-a", map[string]devices.ClassCount{className: {Total: 8}}, "node-a")

	// A newer generation of the pool replaces the old one.
	newer := sliceA.DeepCopy()
	newer.Name = "node-a-gpus-2"
	newer.Spec.Pool.Generation = 2
	newer.Spec.Devices = newer.Spec.Devices[:6]
	inv.SetSlice(newer)
	expect("newer pool generation", "node-a", map[string]devices.ClassCount{className: {Total: 6}}, "node-a")
	inv.RemoveSlice(newer)
	expect("newer generation gone", "node-a", map[string]devices.ClassCount{className: {Total: 8}}, "node-a")

	// Devices as resources: the class's extended resource name, or the class's own name.
	inv.SetClass(selecting(className, driver, "nvidia.com/gpu"))
	changed = nil
	holder2, claim2 := claimPod("holder2", 2)
	allocate(claim2, "node-b", span(0, 2), holder2)
	inv.SetClaim(claim2)
	used, total := inv.Amounts("node-b", []v1.ResourceName{v1.ResourceCPU, "nvidia.com/gpu"})
	if diff := cmp.Diff([][]int64{{0, 2}, {0, 4}}, [][]int64{used, total}); diff != "" {
		t.Errorf("amounts of node-b (-want +got):\n%s", diff)
	}
	inv.SetClass(selecting(className, driver, ""))
	used, total = inv.Amounts("node-b", []v1.ResourceName{v1.ResourceName(resourceapi.ResourceDeviceClassPrefix + className)})
	if diff := cmp.Diff([][]int64{{2}, {4}}, [][]int64{used, total}); diff != "" {
		t.Errorf("amounts of node-b by the class's name (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string][2]int64{className: {12, 2}}, inv.Totals()); diff != "" {
		t.Errorf("totals [total, allocated] (-want +got):\n%s", diff)
	}
	inv.RemoveSlice(sliceB)
	if got := inv.Counts("node-b"); got != nil {
		t.Errorf("node-b after its slice went: %v, want nothing", got)
	}
}

// TestDemandAndBound: a member's demand per class from its claims, and the members a node's
// free devices can hold by it (an upper bound: the allocator decides).
func TestDemandAndBound(t *testing.T) {
	dra, _ := world(8)
	inv := devices.NewInventory()
	inv.SetClass(selecting(className, driver, ""))
	_, slice := gpuNode("node-a", 8)
	inv.SetSlice(slice)
	holder, held := claimPod("holder", 3)
	allocate(held, "node-a", span(0, 3), holder)
	dra.AddClaims(held)
	inv.SetClaim(held)

	exact := member(dra, 2)
	d, err := devices.DemandOf(dra, exact)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(devices.Demand{ByClass: map[string]int64{className: 2}, Bounded: true, Exact: true}, d); diff != "" {
		t.Errorf("demand of an ExactCount 2 claim (-want +got):\n%s", diff)
	}
	b, err := inv.NewBound(dra, d)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		node   string
		want   int
		wantOK bool
	}{
		{"node-a", 2, true}, // 8 devices, 3 held: 5 free, 2 per member
		{"node-b", 0, true}, // no devices
	} {
		if got, ok := b.Members(tc.node); got != tc.want || ok != tc.wantOK {
			t.Errorf("members on %s = %d, %v; want %d, %v", tc.node, got, ok, tc.want, tc.wantOK)
		}
	}
	// A slice for several nodes may serve any node: nothing is bounded then.
	inv.SetSlice(&resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "fabric"},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, AllNodes: ptr.To(true), Pool: resourceapi.ResourcePool{Name: "fabric", ResourceSliceCount: 1}}})
	if got, ok := b.Members("node-b"); ok {
		t.Errorf("members on node-b with a slice for all nodes = %d, bounded; want unbounded", got)
	}

	// firstAvailable of one class: the fewest alternative; of two classes: unbounded.
	pod, claim := claimPod("flexible", 0)
	claim.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "eight", DeviceClassName: className, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 8},
		{Name: "four", DeviceClassName: className, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 4},
	}}}
	dra.AddClaims(claim)
	if d, err := devices.DemandOf(dra, pod); err != nil || !cmp.Equal(devices.Demand{ByClass: map[string]int64{className: 4}, Bounded: true}, d) {
		t.Errorf("demand of firstAvailable [8, 4] = %+v, %v; want 4 of %s, bounded", d, err, className)
	}
	claim.Spec.Devices.Requests[0].FirstAvailable[1].DeviceClassName = "other"
	if d, err := devices.DemandOf(dra, pod); err != nil || d.Bounded {
		t.Errorf("demand of firstAvailable across classes = %+v, %v; want unbounded", d, err)
	}
	// A shared claim is allocated once for all its users: no member's demand.
	if d, err := devices.DemandOf(dra, sharingPod("sharer", "shared")); err != nil || len(d.ByClass) != 0 {
		t.Errorf("demand of a pod using a shared claim = %+v, %v; want none", d, err)
	}
}
