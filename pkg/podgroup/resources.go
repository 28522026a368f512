package podgroup

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"
)

// Amount reads one resource of a NodeInfo's sums (its allocatable, or what its pods request)
// in the units of QuantityAmount: CPU in millicores, the rest in whole units.
func Amount(r fwk.Resource, name v1.ResourceName) int64 {
	switch name {
	case v1.ResourceCPU:
		return r.GetMilliCPU()
	case v1.ResourceMemory:
		return r.GetMemory()
	case v1.ResourceEphemeralStorage:
		return r.GetEphemeralStorage()
	case v1.ResourcePods:
		return int64(r.GetAllowedPodNumber())
	}
	return r.GetScalarResources()[name]
}

// QuantityAmount is a request of the resource in Amount's units.
func QuantityAmount(name v1.ResourceName, q resource.Quantity) int64 {
	if name == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// Scalar reports whether NodeInfo keeps the resource among its scalar resources (an
// extended resource, hugepages): one a node may not advertise at all.
func Scalar(name v1.ResourceName) bool {
	switch name {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, v1.ResourcePods:
		return false
	}
	return true
}
