package devices

import (
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
)

// Extended resources a DeviceClass provides (Kubernetes 1.37's DRA extended resources, GA):
// a pod asking for, say, nvidia.com/gpu on a node that does not advertise it gets its GPUs
// through DRA, from a claim DynamicResources makes for it. A simulation counts that claim
// like any other: copies of a member take their devices one after another.

// TakesDevices reports whether pod asks for devices a simulation counts: through its
// ResourceClaims, or through extended resources a DeviceClass provides.
func (s *Source) TakesDevices(pod *v1.Pod) bool {
	if s == nil {
		return false
	}
	if len(pod.Spec.ResourceClaims) > 0 {
		return true
	}
	resolver := s.dra.DeviceClassResolver()
	return resolver != nil && asksForExtended(pod, resolver)
}

// extendedRequests are pod's requests of extended resources that a DeviceClass provides,
// by resource (nil: none). Only container requests are looked at first, so that a pod
// without extended resources costs no request arithmetic.
func (s *Source) extendedRequests(pod *v1.Pod) map[v1.ResourceName]int64 {
	resolver := s.dra.DeviceClassResolver()
	if resolver == nil || !asksForExtended(pod, resolver) {
		return nil
	}
	var out map[v1.ResourceName]int64
	for name, q := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
		if !schedutil.IsDRAExtendedResourceName(name) || q.IsZero() || resolver.GetDeviceClass(name) == nil {
			continue
		}
		if out == nil {
			out = map[v1.ResourceName]int64{}
		}
		out[name] = q.Value()
	}
	return out
}

// asksForExtended reports whether a container of pod requests an extended resource that a
// DeviceClass provides.
func asksForExtended(pod *v1.Pod, resolver fwk.DeviceClassResolver) bool {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			for name, q := range cs[i].Resources.Requests {
				if !q.IsZero() && schedutil.IsDRAExtendedResourceName(name) && resolver.GetDeviceClass(name) != nil {
					return true
				}
			}
		}
	}
	return false
}

// CopyAnnotation marks a pod a simulation made (a copy of a member, a planned sibling): it
// has a node, and no claim yet (MarkCopy).
const CopyAnnotation = "hypernode.dev/simulated-copy"

// MarkCopy marks pod, a simulation's copy of a pod that it placed on a node.
func MarkCopy(pod *v1.Pod) {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[CopyAnnotation] = "true"
}

// extendedClaim is the claim DynamicResources allocates for pod's extended resources on ni's
// node (nil: none to allocate): for each resource the node does not advertise, as many
// devices of its class as the pod's effective request (init containers included, as
// Kubernetes sums them), one ExactCount request per class. DynamicResources writes one
// request per container; without constraints between them, the same devices satisfy both.
// A pod whose claim was made already (its status names it) and is allocated or being
// allocated takes nothing more: the allocated state counts it.
func (s *Source) extendedClaim(pod *v1.Pod, ni fwk.NodeInfo) (*resourceapi.ResourceClaim, error) {
	reqs := s.extendedRequests(pod)
	if len(reqs) == 0 {
		return nil, nil
	}
	if pod.Spec.NodeName != "" && pod.Annotations[CopyAnnotation] == "" {
		// Reserved (assumed) or bound: its claim is allocated, or in flight under a UID of
		// DynamicResources' own until PreBind names it in the pod's status; either way the
		// allocated state holds its devices.
		return nil, nil
	}
	if made := pod.Status.ExtendedResourceClaimStatus; made != nil {
		claim, err := s.dra.ResourceClaims().Get(pod.Namespace, made.ResourceClaimName)
		if err == nil && metav1.IsControlledBy(claim, pod) &&
			(claim.Status.Allocation != nil || s.dra.ResourceClaims().GetPendingAllocation(claim.UID) != nil) {
			return nil, nil
		}
	}
	allocatable := ni.GetAllocatable().GetScalarResources()
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: pod.Namespace,
		Name:      pod.Name + "-extended-resources",
		UID:       types.UID(string(pod.UID) + "/extended-resources"),
	}}
	for _, name := range slices.Sorted(maps.Keys(reqs)) {
		if allocatable[name] > 0 {
			continue // a device plugin provides it here: NodeResourcesFit counts it
		}
		class := s.dra.DeviceClassResolver().GetDeviceClass(name)
		claim.Spec.Devices.Requests = append(claim.Spec.Devices.Requests, resourceapi.DeviceRequest{
			Name: fmt.Sprintf("extended-%d", len(claim.Spec.Devices.Requests)),
			Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: class.Name, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: reqs[name],
			},
		})
	}
	if len(claim.Spec.Devices.Requests) == 0 {
		return nil, nil
	}
	return claim, nil
}
