// Package devicestest has a fake of the scheduler's DRA manager and builders of devices,
// claims and pods for the tests of packages that count DRA devices.
package devicestest

import (
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
)

// The driver of the fake devices, the class selecting them, and the namespace of the pods
// and claims the builders make.
const (
	Driver    = "gpu.test"
	ClassName = "gpu"
	Namespace = "default"
)

// FakeDRA is a SharedDRAManager over fixed objects: what the package reads of the scheduler's
// DRA manager, nothing it writes (those methods panic).
type FakeDRA struct {
	Classes map[string]*resourceapi.DeviceClass
	Slices  []*resourceapi.ResourceSlice
	Claims  map[string]*resourceapi.ResourceClaim // by namespace/name
	Pending map[types.UID]*resourceapi.AllocationResult
	// gatherErrs makes GatherAllocatedState fail that many times first (a claim changed
	// while read); gathers counts its calls.
	GatherErrs int
	Gathers    int
	// Extended maps the extended resources DRA provides to the name of their class
	// (DeviceClassSpec.ExtendedResourceName); none: no resolver, as with the feature off.
	Extended map[v1.ResourceName]string
}

func NewFakeDRA() *FakeDRA {
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: ClassName},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", Driver)},
		}}},
	}
	return &FakeDRA{
		Classes: map[string]*resourceapi.DeviceClass{ClassName: class},
		Claims:  map[string]*resourceapi.ResourceClaim{},
		Pending: map[types.UID]*resourceapi.AllocationResult{},
	}
}

func (f *FakeDRA) AddClaims(claims ...*resourceapi.ResourceClaim) {
	for _, c := range claims {
		f.Claims[c.Namespace+"/"+c.Name] = c
	}
}

func (f *FakeDRA) ResourceClaims() fwk.ResourceClaimTracker { return fakeClaims{f} }
func (f *FakeDRA) ResourceSlices() fwk.ResourceSliceLister  { return fakeSlices{f} }
func (f *FakeDRA) DeviceClasses() fwk.DeviceClassLister     { return fakeClasses{f} }
func (f *FakeDRA) DeviceClassResolver() fwk.DeviceClassResolver {
	if len(f.Extended) == 0 {
		return nil
	}
	return fakeResolver{f}
}

type fakeResolver struct{ f *FakeDRA }

func (r fakeResolver) GetDeviceClass(name v1.ResourceName) *resourceapi.DeviceClass {
	return r.f.Classes[r.f.Extended[name]]
}

type fakeSlices struct{ f *FakeDRA }
type fakeClasses struct{ f *FakeDRA }
type fakeClaims struct{ f *FakeDRA }

func (s fakeSlices) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	return s.f.Slices, nil
}

func (c fakeClasses) List() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for _, class := range c.f.Classes {
		out = append(out, class)
	}
	return out, nil
}

func (c fakeClasses) Get(name string) (*resourceapi.DeviceClass, error) {
	if class, ok := c.f.Classes[name]; ok {
		return class, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

// List is sorted by key so that every run sees the claims in the same order.
func (c fakeClaims) List() ([]*resourceapi.ResourceClaim, error) {
	keys := make([]string, 0, len(c.f.Claims))
	for k := range c.f.Claims {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*resourceapi.ResourceClaim, 0, len(keys))
	for _, k := range keys {
		out = append(out, c.f.Claims[k])
	}
	return out, nil
}

func (c fakeClaims) Get(ns, name string) (*resourceapi.ResourceClaim, error) {
	if claim, ok := c.f.Claims[ns+"/"+name]; ok {
		return claim, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), name)
}

// GatherAllocatedState is the scheduler's view: allocated claims plus allocations in flight.
func (c fakeClaims) GatherAllocatedState() (*structured.AllocatedState, error) {
	c.f.Gathers++
	if c.f.GatherErrs > 0 {
		c.f.GatherErrs--
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
	for _, claim := range c.f.Claims {
		if claim.Status.Allocation != nil {
			add(claim.Status.Allocation)
		}
	}
	for _, a := range c.f.Pending {
		add(a)
	}
	return state, nil
}

func (c fakeClaims) GetPendingAllocation(uid types.UID) *resourceapi.AllocationResult {
	return c.f.Pending[uid]
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

// GPUNode is a node with n devices of the driver in one slice of a pool named after it.
func GPUNode(name string, n int) (*v1.Node, *resourceapi.ResourceSlice) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("node-" + name)}}
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-gpus"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   Driver,
			Pool:     resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(name),
		},
	}
	for i := range n {
		slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{Name: DeviceName(i)})
	}
	return node, slice
}

func DeviceName(i int) string { return fmt.Sprintf("dev-%d", i) }

// GPURequest asks for n devices of the class.
func GPURequest(n int) resourceapi.DeviceClaim {
	return resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name: "gpu",
		Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: ClassName,
			AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
			Count:           int64(n),
		},
	}}}
}

// FromTemplate makes pod request claim "gpus" from ResourceClaimTemplate gpu-template, as a
// workload's pod is before the resource claim controller has created the claim (its status
// does not name it yet), and returns it.
func FromTemplate(pod *v1.Pod) *v1.Pod {
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("gpu-template")}}
	return pod
}

// ClaimCreated returns a copy of a FromTemplate pod whose status names its claim
// <pod>-gpus, as the resource claim controller writes once it has created the claim.
func ClaimCreated(pod *v1.Pod) *v1.Pod {
	named := pod.DeepCopy()
	named.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: ptr.To(pod.Name + "-gpus")}}
	return named
}

// ClaimPod is a pod whose claim "gpus" kube-scheduler's claim controller generated from a
// template: the claim asks for n devices and is controlled by the pod.
func ClaimPod(name string, n int) (*v1.Pod, *resourceapi.ResourceClaim) {
	pod := ClaimCreated(FromTemplate(&v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, UID: types.UID("uid-" + name)},
	}))
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-gpus", Namespace: Namespace, UID: types.UID("claim-" + name),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: name, UID: pod.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: resourceapi.ResourceClaimSpec{Devices: GPURequest(n)},
	}
	return pod, claim
}

// ExtendedPod is a pod whose container asks for n of the extended resource name (a class
// may provide it through DRA: FakeDRA.Extended).
func ExtendedPod(name string, extended v1.ResourceName, n int) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{extended: *resource.NewQuantity(int64(n), resource.DecimalSI)},
		}}}},
	}
}

// SharingPod is a pod using the claim named claim directly (PodResourceClaim.ResourceClaimName).
func SharingPod(name, claim string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{ResourceClaims: []v1.PodResourceClaim{{
			Name: "gpus", ResourceClaimName: ptr.To(claim),
		}}},
	}
}

// SharedClaim is a claim of n devices no pod owns.
func SharedClaim(name string, n int) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, UID: types.UID("claim-" + name)},
		Spec:       resourceapi.ResourceClaimSpec{Devices: GPURequest(n)},
	}
}

// allocation holds the devices of node named by their indices.
func Allocation(node string, devs ...int) *resourceapi.AllocationResult {
	a := &resourceapi.AllocationResult{}
	for _, i := range devs {
		a.Devices.Results = append(a.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "gpu", Driver: Driver, Pool: node, Device: DeviceName(i),
		})
	}
	return a
}

// allocate gives claim the devices of node, reserved for users (none: allocated, unused).
func Allocate(claim *resourceapi.ResourceClaim, node string, devs []int, users ...*v1.Pod) {
	claim.Status.Allocation = Allocation(node, devs...)
	for _, u := range users {
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{
			Resource: "pods", Name: u.Name, UID: u.UID,
		})
	}
}

// bound places pod on node, as the API server has it.
func Bound(pod *v1.Pod, node string) *v1.Pod {
	pod.Spec.NodeName = node
	return pod
}

// copyOf is a copy of pod on node as networktopology.SimulatedPod makes it for CountFits.
func CopyOf(pod *v1.Pod, node string, i int) *v1.Pod {
	c := pod.DeepCopy()
	suffix := fmt.Sprintf("-capacity-%d", i)
	c.Name += suffix
	c.UID += types.UID(suffix)
	c.Spec.NodeName = node
	devices.MarkCopy(c)
	return c
}

func NodeInfo(node *v1.Node, pods ...*v1.Pod) *framework.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	for _, p := range pods {
		ni.AddPod(p)
	}
	return ni
}
