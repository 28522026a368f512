package devices_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
)

// TestDemandExact: only a count of one class's devices from the pod's own, unallocated claims
// is exact; anything the allocator must weigh device by device is not.
func TestDemandExact(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(dra *fakeDRA, pod *v1.Pod, claim *resourceapi.ResourceClaim)
		want bool
	}{
		{name: "ExactCount of a class", want: true},
		{name: "All", edit: func(_ *fakeDRA, _ *v1.Pod, c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
		}},
		{name: "a request selector", edit: func(_ *fakeDRA, _ *v1.Pod, c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "true"}}}
		}},
		{name: "admin access", edit: func(_ *fakeDRA, _ *v1.Pod, c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
		}},
		{name: "tolerations", edit: func(_ *fakeDRA, _ *v1.Pod, c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.Tolerations = []resourceapi.DeviceToleration{{Operator: resourceapi.DeviceTolerationOpExists}}
		}},
		{name: "a capacity request", edit: func(_ *fakeDRA, _ *v1.Pod, c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.Capacity = &resourceapi.CapacityRequirements{}
		}},
		{name: "a constraint", edit: func(_ *fakeDRA, _ *v1.Pod, c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To[resourceapi.FullyQualifiedName]("gpu.test/numa")}}
		}},
		{name: "firstAvailable", edit: func(_ *fakeDRA, _ *v1.Pod, c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests[0] = resourceapi.DeviceRequest{Name: "gpu", FirstAvailable: []resourceapi.DeviceSubRequest{
				{Name: "two", DeviceClassName: className, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2}}}
		}},
		{name: "the claim is allocated", edit: func(_ *fakeDRA, _ *v1.Pod, c *resourceapi.ResourceClaim) {
			allocate(c, "node-a", span(0, 2))
		}},
		{name: "the claim is being allocated", edit: func(dra *fakeDRA, _ *v1.Pod, c *resourceapi.ResourceClaim) {
			dra.Pending[c.UID] = allocation("node-a", 0, 1)
		}},
		{name: "a shared claim too", edit: func(dra *fakeDRA, p *v1.Pod, _ *resourceapi.ResourceClaim) {
			dra.AddClaims(sharedClaim("shared", 1))
			p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: "shared", ResourceClaimName: ptr.To("shared")})
		}},
		{name: "an extended resource a class provides too", edit: func(dra *fakeDRA, p *v1.Pod, _ *resourceapi.ResourceClaim) {
			dra.Extended = map[v1.ResourceName]string{gpuResource: className}
			p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{gpuResource: resource.MustParse("1")}}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dra := newFakeDRA()
			pod, claim := claimPod("member", 2)
			if tc.edit != nil {
				tc.edit(dra, pod, claim)
			}
			dra.AddClaims(claim)
			d, err := devices.DemandOf(dra, pod)
			if err != nil {
				t.Fatal(err)
			}
			if d.Exact != tc.want {
				t.Errorf("Exact = %v, want %v (demand %+v)", d.Exact, tc.want, d)
			}
		})
	}
}

// TestBoundExact: a node's count of free devices is exact only where the allocator treats
// its devices alike.
func TestBoundExact(t *testing.T) {
	for _, tc := range []struct {
		name string
		// edit changes node-a's slice (or the inventory) before the bound is taken.
		edit func(inv *devices.Inventory, s *resourceapi.ResourceSlice)
		want bool
	}{
		{name: "plain devices", want: true},
		{name: "a tainted device", edit: func(_ *devices.Inventory, s *resourceapi.ResourceSlice) {
			s.Spec.Devices[3].Taints = []resourceapi.DeviceTaint{{Key: "broken", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
		}},
		{name: "a device consuming counters", edit: func(_ *devices.Inventory, s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: "memory"}}
		}},
		{name: "shared counters", edit: func(_ *devices.Inventory, s *resourceapi.ResourceSlice) {
			s.Spec.SharedCounters = []resourceapi.CounterSet{{Name: "memory"}}
		}},
		{name: "binding conditions", edit: func(_ *devices.Inventory, s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].BindingConditions = []string{"attached"}
		}},
		{name: "a device taking node resources", edit: func(_ *devices.Inventory, s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].NodeAllocatableResources = map[v1.ResourceName]resourceapi.NodeAllocatableResource{v1.ResourceMemory: {}}
		}},
		{name: "skipped node operations", edit: func(_ *devices.Inventory, s *resourceapi.ResourceSlice) {
			s.Spec.SkipNodeOperations = []resourceapi.SkipNodeOperation{"Prepare"}
		}},
		{name: "an incomplete pool", edit: func(_ *devices.Inventory, s *resourceapi.ResourceSlice) {
			s.Spec.Pool.ResourceSliceCount = 2
		}},
		{name: "a duplicate device name", edit: func(_ *devices.Inventory, s *resourceapi.ResourceSlice) {
			s.Spec.Devices[1].Name = s.Spec.Devices[0].Name
		}},
		{name: "a class selector the inventory cannot evaluate", edit: func(inv *devices.Inventory, _ *resourceapi.ResourceSlice) {
			broken := selecting("broken", driver, "")
			broken.Spec.Selectors[0].CEL.Expression = `device.attributes["gpu.test"].missing == 1`
			inv.SetClass(broken)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dra, _ := world(8)
			inv := devices.NewInventory()
			inv.SetClass(selecting(className, driver, ""))
			_, slice := gpuNode("node-a", 8)
			if tc.edit != nil {
				tc.edit(inv, slice)
			}
			inv.SetSlice(slice)
			b := boundFor(t, inv, dra, member(dra, 2))
			if got := b.Exact("node-a"); got != tc.want {
				t.Errorf("Exact(node-a) = %v, want %v", got, tc.want)
			}
			if !b.Exact("node-none") {
				t.Error("a node without devices holds exactly none")
			}
		})
	}
}

// TestBoundNotExactWhileATaintRuleExists: a DeviceTaintRule may taint any device.
func TestBoundNotExactWhileATaintRuleExists(t *testing.T) {
	dra, _ := world(8)
	inv := devices.NewInventory()
	inv.SetClass(selecting(className, driver, ""))
	_, slice := gpuNode("node-a", 8)
	inv.SetSlice(slice)
	rule := &resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "maintenance", UID: types.UID("rule")}}
	b := boundFor(t, inv, dra, member(dra, 2))
	inv.SetTaintRule(rule)
	if b.Exact("node-a") {
		t.Error("exact with a DeviceTaintRule")
	}
	inv.RemoveTaintRule(rule)
	if !b.Exact("node-a") {
		t.Error("not exact after the DeviceTaintRule went")
	}
}

// boundFor is inv's bound of pod's demand (its claims read from dra).
func boundFor(t *testing.T, inv *devices.Inventory, dra *fakeDRA, pod *v1.Pod) *devices.Bound {
	t.Helper()
	d, err := devices.DemandOf(dra, pod)
	if err != nil {
		t.Fatal(err)
	}
	b, err := inv.NewBound(dra, d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
