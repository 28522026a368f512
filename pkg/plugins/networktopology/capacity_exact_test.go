package networktopology

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices/devicestest"
)

// filteringHandle runs a Filter that every pod passes, and records the nodes on which
// DynamicResources' Filter would have run (not skipped); the devices decide the counts.
type filteringHandle struct {
	nominatingHandle
	dra *devicestest.FakeDRA

	mu         sync.Mutex
	draAskedOn map[string]bool
}

func (h *filteringHandle) SharedDRAManager() fwk.SharedDRAManager { return h.dra }
func (h *filteringHandle) Parallelizer() fwk.Parallelizer         { return parallelize.NewParallelizer(1) }

func (h *filteringHandle) RunFilterPlugins(_ context.Context, state fwk.CycleState, _ *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	if !state.GetSkipFilterPlugins().Has(dynamicresources.Name) {
		h.mu.Lock()
		h.draAskedOn[ni.Node().Name] = true
		h.mu.Unlock()
	}
	return nil
}

func (h *filteringHandle) RunPreFilterExtensionAddPod(context.Context, fwk.CycleState, *v1.Pod, fwk.PodInfo, fwk.NodeInfo) *fwk.Status {
	return nil
}

// TestNodeCapacitiesCountDevicesExactly: where a node's free devices say exactly how many
// members it takes (a count of one class, plain devices), the plan counts them without
// DynamicResources' Filter or the allocator; elsewhere it simulates, and the counts agree
// with the allocator's.
func TestNodeCapacitiesCountDevicesExactly(t *testing.T) {
	schedmetrics.Register() // the parallelizer's
	for _, tc := range []struct {
		name string
		// edit changes node-a's slice, the member's claim, or the pods nominated on node-a.
		edit          func(slice *resourceapi.ResourceSlice, claim *resourceapi.ResourceClaim, dra *devicestest.FakeDRA) []fwk.PodInfo
		want          int
		wantDRAFilter bool
	}{
		{name: "plain devices: 8 free hold two members of 4, counted", want: 2},
		{name: "a tainted device: simulated, 7 usable hold one", edit: func(s *resourceapi.ResourceSlice, _ *resourceapi.ResourceClaim, _ *devicestest.FakeDRA) []fwk.PodInfo {
			s.Spec.Devices[7].Taints = []resourceapi.DeviceTaint{{Key: "broken", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
			return nil
		}, want: 1, wantDRAFilter: true},
		{name: "a request selector: simulated", edit: func(_ *resourceapi.ResourceSlice, c *resourceapi.ResourceClaim, _ *devicestest.FakeDRA) []fwk.PodInfo {
			c.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.test"`}}}
			return nil
		}, want: 2, wantDRAFilter: true},
		{name: "another gang's member nominated with a claim of 4: simulated, one more fits", edit: func(_ *resourceapi.ResourceSlice, _ *resourceapi.ResourceClaim, dra *devicestest.FakeDRA) []fwk.PodInfo {
			other, claim := devicestest.ClaimPod("other", 4)
			other.Spec.Priority = ptr.To[int32](0)
			dra.AddClaims(claim)
			pi, err := framework.NewPodInfo(other)
			if err != nil {
				t.Fatal(err)
			}
			return []fwk.PodInfo{pi}
		}, want: 1, wantDRAFilter: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dra := devicestest.NewFakeDRA()
			node, slice := devicestest.GPUNode("node-a", 8)
			member, claim := devicestest.ClaimPod("member", 4)
			member.Spec.Priority = ptr.To[int32](0)
			var nominated []fwk.PodInfo
			if tc.edit != nil {
				nominated = tc.edit(slice, claim, dra)
			}
			dra.Slices = append(dra.Slices, slice)
			dra.AddClaims(claim)
			inventory := devices.NewInventory()
			for _, c := range dra.Classes {
				inventory.SetClass(c)
			}
			inventory.SetSlice(slice)

			h := &filteringHandle{nominatingHandle: nominatingHandle{nominated: map[string][]fwk.PodInfo{node.Name: nominated}}, dra: dra, draAskedOn: map[string]bool{}}
			p := &NetworkTopologyAware{handle: h, devices: devices.NewSource(dra, structured.Features{DeviceTaints: true}), inventory: inventory}
			state := framework.NewCycleState()
			devices.Attach(state, p.devices)
			got := p.nodeCapacities(context.Background(), state, member, []fwk.NodeInfo{devicestest.NodeInfo(node)}, nil, 10)
			if diff := cmp.Diff(tc.want, got[node.Name].Capacity); diff != "" {
				t.Errorf("members node-a holds (-want +got):\n%s", diff)
			}
			if h.draAskedOn[node.Name] != tc.wantDRAFilter {
				t.Errorf("DynamicResources' Filter run: %v, want %v", h.draAskedOn[node.Name], tc.wantDRAFilter)
			}
		})
	}
}
