// Package devices counts DRA devices in the capacity simulations of a gang: how many members
// whose ResourceClaims ask for devices a node can take, next to the other pods a simulation
// puts there (more copies of the member, other gangs' nominated members, planned members of
// other shapes) and without the pods it takes away (preemption victims).
//
// kube-scheduler's DynamicResources Filter answers for one pod on the node as the cluster is:
// it has no PreFilter AddPod/RemovePod extension, so a simulation that adds a copy of a member
// to a node still sees every device the first copy would take as free. This package runs the
// same allocator (k8s.io/dynamic-resource-allocation/structured, the scheduler's DRA manager,
// device taints applied) with the simulation's pods taking their devices first: the count is
// exact for every request the allocator supports, constraints and partitionable devices
// included, and nothing is estimated.
package devices

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
)

// Source is what every simulation of one plugin shares: the scheduler's DRA manager, the
// allocator's features from the scheduler's feature gates, and a cache of compiled CEL
// selectors (compiling is the allocator's most expensive step).
type Source struct {
	dra      fwk.SharedDRAManager
	features structured.Features
	cel      *cel.Cache
	// victims says that the simulations take pods away (preemption, holds): the devices of
	// claims whose every user they took away are free in them. Elsewhere a claim still
	// reserved for a pod the scheduler's cache no longer has (deleted, its claim not yet
	// released by the claim controller) keeps its devices, as DynamicResources counts them.
	victims bool
}

// WithVictims is the Source of simulations that take pods away.
func (s *Source) WithVictims() *Source {
	if s == nil {
		return nil
	}
	c := *s
	c.victims = true
	return &c
}

// celCacheSize is how many compiled selectors a Source keeps: a few classes and request
// selectors per job shape.
const celCacheSize = 64

// NewSource returns the Source of a scheduler whose DRA manager is dra (nil when DRA is
// off: nothing is counted then, as kube-scheduler allocates nothing), with the allocator's
// features of its feature gates (dynamicresources.AllocatorFeatures).
func NewSource(dra fwk.SharedDRAManager, features structured.Features) *Source {
	if dra == nil {
		return nil
	}
	return &Source{
		dra:      dra,
		features: features,
		cel: cel.NewCache(celCacheSize, cel.Features{
			EnableConsumableCapacity: features.ConsumableCapacity,
			EnableListTypeAttributes: features.ListTypeAttributes,
		}),
	}
}

// stateKey is where a simulation's device state lives in its CycleState.
const stateKey fwk.StateKey = "hypernode.dev/devices"

// simulationState is a simulation's device state: the snapshot of devices and claims, taken
// on the first question about a pod with claims (a simulation of pods without claims never
// takes one). Clones of the CycleState share it: it is read-only once taken.
type simulationState struct {
	source *Source
	once   onceValue[*Snapshot]
	// counted: a bound counted the devices of this simulation's pods (CountedByBound).
	counted bool
}

// Clone shares the state: the snapshot is immutable, and every copy of the simulation's
// CycleState asks about the same cluster.
func (s *simulationState) Clone() fwk.StateData { return s }

// Attach prepares state for device questions. Callers attach before simulating in parallel:
// the snapshot is then taken once, by whichever question comes first.
func Attach(state fwk.CycleState, source *Source) {
	if source == nil {
		return
	}
	state.Write(stateKey, &simulationState{source: source})
}

// Attached reports whether a device source was attached to state (Attach).
func Attached(state fwk.CycleState) bool {
	_, err := state.Read(stateKey)
	return err == nil
}

// TakesDevices reports whether state has a device source (Attach) that counts devices pod
// asks for (Source.TakesDevices).
func TakesDevices(state fwk.CycleState, pod *v1.Pod) bool {
	s := stateOf(state)
	return s != nil && s.source.TakesDevices(pod)
}

// Fits reports whether pod's claims can be allocated on ni's node next to the claims of every
// pod the simulation put on ni, and without the devices of the claims whose every user it
// took away. filtered says that DynamicResources' Filter accepted pod on the node as the
// cluster is; otherwise Fits allocates pod's claims itself. A pod without claims, or a state
// no device source was attached to (DRA off), fits. The reason says why not.
func Fits(ctx context.Context, state fwk.CycleState, ni fwk.NodeInfo, pod *v1.Pod, filtered bool) (bool, string, error) {
	s := stateOf(state)
	if s == nil || s.counted || ni.Node() == nil || !s.source.TakesDevices(pod) {
		return true, "", nil
	}
	shared := sets.New[types.UID]()
	takers, uncounted := s.source.takers(ni, pod, shared)
	if uncounted != "" {
		return false, uncounted, nil
	}
	if filtered && !s.source.victims && len(takers) == 0 {
		return true, "", nil // DynamicResources answered on the same devices: no snapshot needed
	}
	snap, err := snapshotFor(ctx, state, ni, pod)
	if err != nil {
		return false, "", err
	}
	return snap.fits(ctx, ni, pod, filtered, takers, shared)
}

// Frees reports whether the simulation took away from ni every user of an allocated claim
// holding devices of the node (a preemption's victims): DynamicResources' Filter, which sees
// those devices taken, cannot answer for pod there then.
func Frees(ctx context.Context, state fwk.CycleState, ni fwk.NodeInfo, pod *v1.Pod) (bool, error) {
	snap, err := snapshotFor(ctx, state, ni, pod)
	if snap == nil || err != nil {
		return false, err
	}
	present := podUIDs(ni)
	present.Insert(pod.UID)
	return len(snap.freed(ni, present)) > 0, nil
}

// snapshotFor is the simulation's snapshot when pod has claims and state a device source;
// nil otherwise.
func snapshotFor(ctx context.Context, state fwk.CycleState, ni fwk.NodeInfo, pod *v1.Pod) (*Snapshot, error) {
	s := stateOf(state)
	if s == nil || ni.Node() == nil || !s.source.TakesDevices(pod) {
		return nil, nil
	}
	snap, err := s.once.get(func() (*Snapshot, error) { return s.source.Snapshot(ctx) })
	if err != nil {
		return nil, fmt.Errorf("reading the cluster's devices: %w", err)
	}
	return snap, nil
}

// stateOf is the device state attached to a simulation's CycleState, nil when none is.
func stateOf(state fwk.CycleState) *simulationState {
	data, err := state.Read(stateKey)
	if err != nil {
		return nil
	}
	s, _ := data.(*simulationState)
	return s
}
