package devices

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"
)

// Demand is the fewest devices of each DeviceClass a pod's own claims take (claims generated
// for it from templates; a shared claim is allocated once for all its users, so it is not
// part of a member's demand): ExactCount its count, All at least one, firstAvailable the
// fewest of its alternatives when they are of one class, admin access none.
type Demand struct {
	ByClass map[string]int64
	// Bounded says that ByClass covers every request: a node with fewer free devices of a
	// class than ByClass asks holds no such pod. A firstAvailable request whose
	// alternatives are of several classes leaves the pod unbounded.
	Bounded bool
	// Exact says that ByClass is all the pod asks for and any devices of the class serve
	// it: its own claims, unallocated and not being allocated, ask only for counts of a
	// class (ExactCount, no selectors, capacity, admin access or tolerations, no
	// constraints, no alternatives), and it has no shared claim and no extended resource a
	// class provides. See Bound.Exact.
	Exact bool
}

// DemandOf reads a pod's demand from its claims (their specs, through the scheduler's DRA
// manager); a pod without claims has none.
func DemandOf(dra fwk.SharedDRAManager, pod *v1.Pod) (Demand, error) {
	if dra == nil {
		return Demand{Bounded: true}, nil
	}
	pending := false
	d, err := DemandOfClaims(pod, func(namespace, name string) (*resourceapi.ResourceClaim, error) {
		claim, err := dra.ResourceClaims().Get(namespace, name)
		if err == nil && dra.ResourceClaims().GetPendingAllocation(claim.UID) != nil {
			pending = true
		}
		return claim, err
	})
	if resolver := dra.DeviceClassResolver(); pending || (resolver != nil && asksForExtended(pod, resolver)) {
		d.Exact = false
	}
	return d, err
}

// DemandOfClaims is DemandOf with the claims read by get (kubectl hypernode reads them from
// its lists).
func DemandOfClaims(pod *v1.Pod, get func(namespace, name string) (*resourceapi.ResourceClaim, error)) (Demand, error) {
	d := Demand{Bounded: true, Exact: true}
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		if pc.ResourceClaimTemplateName == nil {
			d.Exact = false // a shared claim: allocated once, for every user
			continue
		}
		name, _, err := resourceclaim.Name(pod, pc)
		if err != nil {
			return Demand{}, err
		}
		if name == nil {
			continue
		}
		claim, err := get(pod.Namespace, *name)
		if err != nil {
			return Demand{}, fmt.Errorf("resourceclaim %s/%s: %w", pod.Namespace, *name, err)
		}
		if claim.Status.Allocation != nil || len(claim.Spec.Devices.Constraints) > 0 {
			d.Exact = false
		}
		for _, r := range claim.Spec.Devices.Requests {
			d.add(r)
		}
	}
	return d, nil
}

// add counts one request.
func (d *Demand) add(r resourceapi.DeviceRequest) {
	if e := r.Exactly; e == nil || e.AllocationMode != resourceapi.DeviceAllocationModeExactCount || len(e.Selectors) > 0 ||
		e.Capacity != nil || ptr.Deref(e.AdminAccess, false) || len(e.Tolerations) > 0 {
		d.Exact = false
	}
	if r.Exactly != nil {
		if !ptr.Deref(r.Exactly.AdminAccess, false) {
			d.take(r.Exactly.DeviceClassName, fewest(r.Exactly.AllocationMode, r.Exactly.Count))
		}
		return
	}
	if len(r.FirstAvailable) == 0 {
		return
	}
	class, least := r.FirstAvailable[0].DeviceClassName, int64(-1)
	for _, sub := range r.FirstAvailable {
		if sub.DeviceClassName != class {
			d.Bounded = false
			return
		}
		if n := fewest(sub.AllocationMode, sub.Count); least < 0 || n < least {
			least = n
		}
	}
	d.take(class, least)
}

func (d *Demand) take(class string, n int64) {
	if n <= 0 {
		return
	}
	if d.ByClass == nil {
		d.ByClass = map[string]int64{}
	}
	d.ByClass[class] += n
}

// fewest is the fewest devices an allocation mode takes.
func fewest(mode resourceapi.DeviceAllocationMode, count int64) int64 {
	if mode == resourceapi.DeviceAllocationModeAll {
		return 1
	}
	return max(count, 1)
}

// ClassResource names a class's devices in a hold's need: the name Kubernetes gives every
// class (deviceclass.resource.kubernetes.io/<class>).
func ClassResource(class string) v1.ResourceName {
	return v1.ResourceName(resourceapi.ResourceDeviceClassPrefix + class)
}

// ClassOf is the class a ClassResource name is of.
func ClassOf(name v1.ResourceName) (string, bool) {
	return strings.CutPrefix(string(name), resourceapi.ResourceDeviceClassPrefix)
}

// Requests returns the demand as resources named by ClassResource (nil when none).
func (d Demand) Requests() v1.ResourceList {
	if len(d.ByClass) == 0 {
		return nil
	}
	out := v1.ResourceList{}
	for class, n := range d.ByClass {
		out[ClassResource(class)] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	return out
}

// Amounts returns the demand as the given resources (a class's devices count as
// ResourceName(class); a class the manager does not know counts as its own name).
func (d Demand) Amounts(dra fwk.SharedDRAManager, resources []v1.ResourceName) []int64 {
	out := make([]int64, len(resources))
	for class, n := range d.ByClass {
		name := v1.ResourceName(resourceapi.ResourceDeviceClassPrefix + class)
		if dra != nil {
			if c, err := dra.DeviceClasses().Get(class); err == nil {
				name = ResourceName(c)
			}
		}
		for i, r := range resources {
			if r == name {
				out[i] += n
			}
		}
	}
	return out
}

// FreeFor is how many pods of demand d a node's free devices hold by the inventory's counts,
// and false when d bounds nothing (see Bound.Members; kubectl hypernode, which has no
// allocations in flight to add, reads it).
func (inv *Inventory) FreeFor(node string, d Demand) (int, bool) {
	if !d.Bounded || len(d.ByClass) == 0 {
		return 0, false
	}
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return inv.membersLocked(node, d, func(n *nodeDevices, class string) int64 { return n.total[class] - n.used[class] })
}

// membersLocked is the rule both bounds share: per class the demand takes, the node's free
// devices (free says how many) divided by what a pod takes, the least of them; false when
// devices a node's own slices do not list may serve it, or a class's devices may be shared
// between claims (consumable capacity): a count of free devices bounds neither. The
// inventory's lock must be held.
func (inv *Inventory) membersLocked(node string, d Demand, free func(n *nodeDevices, class string) int64) (int, bool) {
	if inv.elsewhere.Len() > 0 {
		return 0, false
	}
	n := inv.nodes[node]
	bound := -1
	for class, need := range d.ByClass {
		var f int64
		if n != nil {
			if n.shared[class] > 0 {
				return 0, false
			}
			f = free(n, class)
		}
		if m := int(max(f, 0) / need); bound < 0 || m < bound {
			bound = m
		}
	}
	return bound, true
}

// Bound caps how many pods of one demand a node can take by its free devices, for a plan's
// bounds before any simulation.
type Bound struct {
	inv       *Inventory
	demand    Demand
	allocated sets.Set[structured.DeviceID]
}

// NewBound reads the devices allocated now from the scheduler's DRA manager (its assume
// cache and the allocations in flight, current when kube-scheduler calls a hint): the
// inventory's own claim counts may trail the event that requeued the gang. Nil when d
// bounds nothing (no device demand, or a request the bound cannot read).
func (inv *Inventory) NewBound(dra fwk.SharedDRAManager, d Demand) (*Bound, error) {
	if inv == nil || dra == nil || !d.Bounded || len(d.ByClass) == 0 {
		return nil, nil
	}
	var err error
	for range gatherAttempts {
		var state *structured.AllocatedState
		if state, err = dra.ResourceClaims().GatherAllocatedState(); err == nil && state != nil {
			return &Bound{inv: inv, demand: d, allocated: state.AllocatedDevices}, nil
		}
	}
	return nil, fmt.Errorf("allocated devices: %w", err)
}

// Members is an upper bound of the pods of the demand node can take (in-flight allocations
// are counted; other plans' promises only lower the real number); false as membersLocked
// says.
func (b *Bound) Members(node string) (int, bool) {
	if b == nil {
		return 0, false
	}
	b.inv.mu.RLock()
	defer b.inv.mu.RUnlock()
	return b.inv.membersLocked(node, b.demand, func(n *nodeDevices, class string) int64 {
		var f int64
		for id, classes := range n.classesOf {
			if !b.allocated.Has(id) && slices.Contains(classes, class) {
				f++
			}
		}
		return f
	})
}
