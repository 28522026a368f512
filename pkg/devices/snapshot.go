package devices

import (
	"context"
	"fmt"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// Snapshot is the cluster's devices as one simulation sees them: every ResourceSlice (device
// taints applied), every allocated or in-flight device, and the allocated claims by the node
// whose devices they hold. It is taken once per simulation, as DynamicResources' PreFilter
// takes the same per pod, and never changes.
type Snapshot struct {
	source *Source
	// allocated is the scheduler's view: claims in its assume cache plus allocations in
	// flight (reserved, not yet written).
	allocated structured.AllocatedState
	// slicesOn are the slices of each node's own devices; shared are the others (node
	// selectors, all nodes, per-device node selection), which the allocator matches per
	// node itself.
	slicesOn map[string][]*resourceapi.ResourceSlice
	shared   []*resourceapi.ResourceSlice
	// claimsOn are the allocated claims holding devices of each node's own slices.
	claimsOn map[string][]*resourceapi.ResourceClaim
	// sharesOf indexes allocated.AllocatedSharedDeviceIDs by device (consumable capacity).
	sharesOf map[structured.DeviceID][]structured.SharedDeviceID
}

// gatherAttempts bounds the retries of the DRA manager's allocated state, which fails when a
// claim changed while it was read (DynamicResources retries the same way).
const gatherAttempts = 20

// Snapshot takes the cluster's devices now.
func (s *Source) Snapshot(ctx context.Context) (*Snapshot, error) {
	var state *structured.AllocatedState
	var err error
	for range gatherAttempts {
		if state, err = s.dra.ResourceClaims().GatherAllocatedState(); err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("allocated devices: %w", err)
	}
	if state == nil {
		return nil, fmt.Errorf("allocated devices: the DRA manager returned none")
	}
	slices, err := s.dra.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return nil, fmt.Errorf("resource slices: %w", err)
	}
	claims, err := s.dra.ResourceClaims().List()
	if err != nil {
		return nil, fmt.Errorf("resource claims: %w", err)
	}
	snap := &Snapshot{
		source:    s,
		allocated: *state,
		slicesOn:  map[string][]*resourceapi.ResourceSlice{},
		claimsOn:  map[string][]*resourceapi.ResourceClaim{},
		sharesOf:  map[structured.DeviceID][]structured.SharedDeviceID{},
	}
	nodeOf := map[structured.DeviceID]string{}
	for _, slice := range slices {
		node := ptr.Deref(slice.Spec.NodeName, "")
		if node == "" {
			snap.shared = append(snap.shared, slice)
			continue
		}
		snap.slicesOn[node] = append(snap.slicesOn[node], slice)
		for _, d := range slice.Spec.Devices {
			nodeOf[structured.MakeDeviceID(slice.Spec.Driver, slice.Spec.Pool.Name, d.Name)] = node
		}
	}
	for _, claim := range claims {
		if claim.Status.Allocation == nil {
			continue
		}
		seen := ""
		for _, r := range claim.Status.Allocation.Devices.Results {
			if node, ok := nodeOf[structured.MakeDeviceID(r.Driver, r.Pool, r.Device)]; ok && node != seen {
				snap.claimsOn[node] = append(snap.claimsOn[node], claim)
				seen = node
			}
		}
	}
	for id := range state.AllocatedSharedDeviceIDs {
		snap.sharesOf[id.GetDeviceID()] = append(snap.sharesOf[id.GetDeviceID()], id)
	}
	return snap, nil
}

// slicesFor are the slices the allocator considers for a node.
func (s *Snapshot) slicesFor(node string) []*resourceapi.ResourceSlice {
	if len(s.shared) == 0 {
		return s.slicesOn[node]
	}
	return append(append([]*resourceapi.ResourceSlice(nil), s.slicesOn[node]...), s.shared...)
}

// localState copies the allocated state of the devices a node can use, for one simulation
// on that node to change: the cluster-wide state is shared by every node's simulation.
func (s *Snapshot) localState(node string) structured.AllocatedState {
	local := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, slice := range s.slicesFor(node) {
		for _, d := range slice.Spec.Devices {
			id := structured.MakeDeviceID(slice.Spec.Driver, slice.Spec.Pool.Name, d.Name)
			if s.allocated.AllocatedDevices.Has(id) {
				local.AllocatedDevices.Insert(id)
			}
			for _, share := range s.sharesOf[id] {
				local.AllocatedSharedDeviceIDs.Insert(share)
			}
			if c, ok := s.allocated.AggregatedCapacity[id]; ok {
				local.AggregatedCapacity[id] = c.Clone()
			}
		}
	}
	return local
}

// take records an allocation's devices in a node's local state (the allocator's own
// bookkeeping: admin access takes nothing; a shared device takes a share and its capacity).
func take(local structured.AllocatedState, results []resourceapi.DeviceRequestAllocationResult) {
	account(local, results, true)
}

// release removes an allocation's devices from a node's local state: its users left.
func release(local structured.AllocatedState, results []resourceapi.DeviceRequestAllocationResult) {
	account(local, results, false)
}

// account adds (taken) or removes an allocation's devices, shares and capacity.
func account(local structured.AllocatedState, results []resourceapi.DeviceRequestAllocationResult, taken bool) {
	for _, r := range results {
		if ptr.Deref(r.AdminAccess, false) {
			continue
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		switch {
		case r.ShareID == nil && taken:
			local.AllocatedDevices.Insert(id)
		case r.ShareID == nil:
			local.AllocatedDevices.Delete(id)
		case taken:
			local.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
			if r.ConsumedCapacity != nil {
				local.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			}
		default:
			local.AllocatedSharedDeviceIDs.Delete(structured.MakeSharedDeviceID(id, r.ShareID))
			if r.ConsumedCapacity != nil {
				local.AggregatedCapacity.Remove(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			}
		}
	}
}

// onceValue computes a value once, for whichever caller asks first.
type onceValue[T any] struct {
	once  sync.Once
	value T
	err   error
}

func (o *onceValue[T]) get(compute func() (T, error)) (T, error) {
	o.once.Do(func() { o.value, o.err = compute() })
	return o.value, o.err
}
