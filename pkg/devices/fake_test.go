package devices_test

import (
	"fmt"
	"sort"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
)

const (
	driver    = "gpu.test"
	className = "gpu"
	namespace = "default"
)

// fakeDRA is a SharedDRAManager over fixed objects: what the package reads of the scheduler's
// DRA manager, nothing it writes (those methods panic).
type fakeDRA struct {
	classes map[string]*resourceapi.DeviceClass
	slices  []*resourceapi.ResourceSlice
	claims  map[string]*resourceapi.ResourceClaim // by namespace/name
	pending map[types.UID]*resourceapi.AllocationResult
	// gatherErrs makes GatherAllocatedState fail that many times first (a claim changed
	// while read); gathers counts its calls.
	gatherErrs int
	gathers    int
}

func newFakeDRA() *fakeDRA {
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: className},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)},
		}}},
	}
	return &fakeDRA{
		classes: map[string]*resourceapi.DeviceClass{className: class},
		claims:  map[string]*resourceapi.ResourceClaim{},
		pending: map[types.UID]*resourceapi.AllocationResult{},
	}
}

func (f *fakeDRA) addClaims(claims ...*resourceapi.ResourceClaim) {
	for _, c := range claims {
		f.claims[c.Namespace+"/"+c.Name] = c
	}
}

func (f *fakeDRA) ResourceClaims() fwk.ResourceClaimTracker     { return fakeClaims{f} }
func (f *fakeDRA) ResourceSlices() fwk.ResourceSliceLister      { return fakeSlices{f} }
func (f *fakeDRA) DeviceClasses() fwk.DeviceClassLister         { return fakeClasses{f} }
func (f *fakeDRA) DeviceClassResolver() fwk.DeviceClassResolver { return nil }

type fakeSlices struct{ f *fakeDRA }
type fakeClasses struct{ f *fakeDRA }
type fakeClaims struct{ f *fakeDRA }

func (s fakeSlices) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	return s.f.slices, nil
}

func (c fakeClasses) List() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for _, class := range c.f.classes {
		out = append(out, class)
	}
	return out, nil
}

func (c fakeClasses) Get(name string) (*resourceapi.DeviceClass, error) {
	if class, ok := c.f.classes[name]; ok {
		return class, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

// List is sorted by key so that every run sees the claims in the same order.
func (c fakeClaims) List() ([]*resourceapi.ResourceClaim, error) {
	keys := make([]string, 0, len(c.f.claims))
	for k := range c.f.claims {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*resourceapi.ResourceClaim, 0, len(keys))
	for _, k := range keys {
		out = append(out, c.f.claims[k])
	}
	return out, nil
}

func (c fakeClaims) Get(ns, name string) (*resourceapi.ResourceClaim, error) {
	if claim, ok := c.f.claims[ns+"/"+name]; ok {
		return claim, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), name)
}

// GatherAllocatedState is the scheduler's view: allocated claims plus allocations in flight.
func (c fakeClaims) GatherAllocatedState() (*structured.AllocatedState, error) {
	c.f.gathers++
	if c.f.gatherErrs > 0 {
		c.f.gatherErrs--
		return nil, fmt.Errorf("claim changed while read")
	}
	state := &structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	add := func(a *resourceapi.AllocationResult) {
		for _, r := range a.Devices.Results {
			if !ptr.Deref(r.AdminAccess, false) {
				state.AllocatedDevices.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
			}
		}
	}
	for _, claim := range c.f.claims {
		if claim.Status.Allocation != nil {
			add(claim.Status.Allocation)
		}
	}
	for _, a := range c.f.pending {
		add(a)
	}
	return state, nil
}

func (c fakeClaims) GetPendingAllocation(uid types.UID) *resourceapi.AllocationResult {
	return c.f.pending[uid]
}

func (c fakeClaims) ListAllAllocatedDevices() (sets.Set[structured.DeviceID], error) {
	panic("not used")
}
func (c fakeClaims) SignalClaimPendingAllocation(types.UID, *resourceapi.ResourceClaim) error {
	panic("not used")
}
func (c fakeClaims) MaybeRemoveClaimPendingAllocation(types.UID, bool) bool { panic("not used") }
func (c fakeClaims) AssumeClaimAfterAPICall(*resourceapi.ResourceClaim) error {
	panic("not used")
}
func (c fakeClaims) AssumedClaimRestore(string, string) { panic("not used") }

// gpuNode is a node with n devices of the driver in one slice of a pool named after it.
func gpuNode(name string, n int) (*v1.Node, *resourceapi.ResourceSlice) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("node-" + name)}}
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-gpus"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   driver,
			Pool:     resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(name),
		},
	}
	for i := range n {
		slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{Name: deviceName(i)})
	}
	return node, slice
}

func deviceName(i int) string { return fmt.Sprintf("dev-%d", i) }

// gpuRequest asks for n devices of the class.
func gpuRequest(n int) resourceapi.DeviceClaim {
	return resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name: "gpu",
		Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: className,
			AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
			Count:           int64(n),
		},
	}}}
}

// claimPod is a pod whose claim "gpus" kube-scheduler's claim controller generated from a
// template: the claim asks for n devices and is controlled by the pod.
func claimPod(name string, n int) (*v1.Pod, *resourceapi.ResourceClaim) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{ResourceClaims: []v1.PodResourceClaim{{
			Name: "gpus", ResourceClaimTemplateName: ptr.To("gpu-template"),
		}}},
		Status: v1.PodStatus{ResourceClaimStatuses: []v1.PodResourceClaimStatus{{
			Name: "gpus", ResourceClaimName: ptr.To(name + "-gpus"),
		}}},
	}
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-gpus", Namespace: namespace, UID: types.UID("claim-" + name),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: name, UID: pod.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: resourceapi.ResourceClaimSpec{Devices: gpuRequest(n)},
	}
	return pod, claim
}

// sharingPod is a pod using the claim named claim directly (PodResourceClaim.ResourceClaimName).
func sharingPod(name, claim string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{ResourceClaims: []v1.PodResourceClaim{{
			Name: "gpus", ResourceClaimName: ptr.To(claim),
		}}},
	}
}

// sharedClaim is a claim of n devices no pod owns.
func sharedClaim(name string, n int) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID("claim-" + name)},
		Spec:       resourceapi.ResourceClaimSpec{Devices: gpuRequest(n)},
	}
}

// allocation holds the devices of node named by their indices.
func allocation(node string, devs ...int) *resourceapi.AllocationResult {
	a := &resourceapi.AllocationResult{}
	for _, i := range devs {
		a.Devices.Results = append(a.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "gpu", Driver: driver, Pool: node, Device: deviceName(i),
		})
	}
	return a
}

// allocate gives claim the devices of node, reserved for users (none: allocated, unused).
func allocate(claim *resourceapi.ResourceClaim, node string, devs []int, users ...*v1.Pod) {
	claim.Status.Allocation = allocation(node, devs...)
	for _, u := range users {
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{
			Resource: "pods", Name: u.Name, UID: u.UID,
		})
	}
}

// bound places pod on node, as the API server has it.
func bound(pod *v1.Pod, node string) *v1.Pod {
	pod.Spec.NodeName = node
	return pod
}

// copyOf is a copy of pod on node as networktopology.SimulatedPod makes it for CountFits.
func copyOf(pod *v1.Pod, node string, i int) *v1.Pod {
	c := pod.DeepCopy()
	suffix := fmt.Sprintf("-capacity-%d", i)
	c.Name += suffix
	c.UID += types.UID(suffix)
	c.Spec.NodeName = node
	return c
}

func nodeInfo(node *v1.Node, pods ...*v1.Pod) *framework.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	for _, p := range pods {
		ni.AddPod(p)
	}
	return ni
}

// stateFor is a simulation's CycleState with a device source over dra attached.
func stateFor(t *testing.T, dra fwk.SharedDRAManager) fwk.CycleState {
	t.Helper()
	state := framework.NewCycleState()
	devices.Attach(state, devices.NewSource(dra, structured.Features{}).WithVictims())
	return state
}

// verdict is what Fits answers, compared whole.
type verdict struct {
	Fits   bool
	Reason string
}
