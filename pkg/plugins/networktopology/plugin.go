// Package networktopology implements the NetworkTopologyAware plugin: it places each gang
// inside the smallest network domain (HyperNode) that can hold it.
//
// PreFilter plans a constrained gang once (pkg/placement) and narrows every member to the
// nodes of its planned leaf; Filter enforces the same set; Reserve/Unreserve keep the ledger
// of promised slots; Score ranks nodes by their distance (LCA tier) to the gang's members, or,
// for pods without a constraint, by the tier-weighted fading bin-pack (docs/design.md,
// "Topology placement").
package networktopology

import (
	"context"
	"fmt"
	"sync/atomic"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	"github.com/hypernode-dev/hypernode-scheduler/apis/config/validation"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/eventlog"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/names"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podstatus"
)

// Name is the name of the plugin used in the plugin registry and configurations.
const Name = names.NetworkTopologyAware

// Event reasons recorded on PodGroups.
const (
	// EventInvalidConstraint: the PodGroup's topology annotation is unusable.
	EventInvalidConstraint = "InvalidTopologyConstraint"
	// EventTopologyUnsatisfiable: no allowed network domain can host the gang now.
	EventTopologyUnsatisfiable = "TopologyUnsatisfiable"
	// EventPlanned: the gang was planned into a domain.
	EventPlanned = "TopologyPlanned"
	// EventMemberRelocated: a planned member found no room in its planned leaf or node and
	// moved to another node of its gang's domain.
	EventMemberRelocated = "MemberRelocated"
	eventAction          = "Plan"
)

const (
	preFilterStateKey fwk.StateKey = "PreFilter" + Name
	preScoreStateKey  fwk.StateKey = "PreScore" + Name
)

// readState returns the state stored under key, or nil.
func readState[T fwk.StateData](state fwk.CycleState, key fwk.StateKey) T {
	var zero T
	data, err := state.Read(key)
	if err != nil {
		return zero
	}
	t, _ := data.(T)
	return t
}

// NetworkTopologyAware is the plugin.
type NetworkTopologyAware struct {
	args     config.NetworkTopologyAwareArgs
	handle   fwk.Handle
	cache    *hypernode.Cache
	registry *podgroup.Registry
	gangs    *gangstate.Tracker
	events   *eventlog.Log
	// devices counts members' DRA devices in the capacity simulations; nil without DRA.
	devices *devices.Source
	// inventory counts each node's devices as the weighted resources of the bin-pack scores
	// (a node's devices of a class count as the class's resource); nil in some tests.
	inventory *devices.Inventory
	// resources are the weighted resources of the bin-pack scores, in a fixed order.
	resources []v1.ResourceName
	weights   []float64
	// usageSums sums the HyperNodes' resources for the normal-pod score; nil when it is off.
	usageSums *usageCache
	// nominations rewrites a member's status.nominatedNodeName to its planned node when the
	// field already names another (nominate.go).
	nominations *podstatus.Writer

	// lastPreScore is the latest pod's PreScore state. It keeps that pod's CycleState alive,
	// so a CycleState at the same address is the same cycle.
	lastPreScore atomic.Pointer[preScoreState]
	// lastSimulated is how many nodes the latest plan ran the Filter plugins on.
	lastSimulated atomic.Int64
	// roomEpoch counts the changes that can make room (an assigned pod gone, a node added or
	// changed, promised slots released).
	roomEpoch atomic.Uint64

	// The gangs' plans, failed plans and refusals are in the gang state (gangstate.Plan,
	// gangstate.PlanFailure); the fields below are guarded by its lock too.
	// roomFreed stamps each HyperNode (and the virtual root) room was freed in with the
	// roomEpoch count of that change, roomFreedAll the last change that can help anywhere. A
	// plan that places nobody holds while neither is newer than the count read before it was
	// made (gangstate.Plan.WaitsForRoom): O(depth) per event.
	roomFreed    map[string]uint64
	roomFreedAll uint64
	// lastFreed is the last departure that marked the failures stale, and allStaleAt the
	// count of failures recorded when every failure was last marked stale: a failure once
	// stale stays stale until it is replaced, so an event that marked every failure it can
	// help needs no second pass while the count holds (kube-scheduler asks the hint of every
	// waiting gang about one event).
	lastFreed  freedMark
	allStaleAt uint64
	// relocations counts the relocated members not nominated again yet (relocate.go), so
	// that pod updates cost nothing while there are none.
	relocations atomic.Int64
	// cycle is how PreFilter begins a member's cycle (judge.go).
	cycle gangstate.Cycle

	// attempts remembers the native pod groups whose placements all failed (native.go).
	attempts nativeAttempts
}

var (
	_ fwk.PreFilterPlugin   = &NetworkTopologyAware{}
	_ fwk.FilterPlugin      = &NetworkTopologyAware{}
	_ fwk.PostFilterPlugin  = &NetworkTopologyAware{}
	_ fwk.PreScorePlugin    = &NetworkTopologyAware{}
	_ fwk.ScorePlugin       = &NetworkTopologyAware{}
	_ fwk.ReservePlugin     = &NetworkTopologyAware{}
	_ fwk.EnqueueExtensions = &NetworkTopologyAware{}
	_ fwk.SignPlugin        = &NetworkTopologyAware{}
)

// New validates the args and builds the plugin around the scheduler's HyperNode tree cache
// and gang state (with its PodGroup registry). Invalid args fail the scheduler's start.
func New(ctx context.Context, obj runtime.Object, handle fwk.Handle, cache *hypernode.Cache, gangs *gangstate.Tracker, inventory *devices.Inventory) (fwk.Plugin, error) {
	registry := gangs.Registry()
	args, ok := obj.(*config.NetworkTopologyAwareArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type NetworkTopologyAwareArgs, got %T", obj)
	}
	if err := validation.ValidateNetworkTopologyAwareArgs(nil, args); err != nil {
		return nil, err
	}
	// Every profile's NetworkTopologyAware sets the registry's default (none included), so two
	// profiles that disagree fail the start instead of one overriding the other.
	defaultTopology, err := podgroup.TopologyFromArgs(args.DefaultNetworkTopology)
	if err != nil {
		return nil, err
	}
	if err := registry.SetDefaultTopology(defaultTopology); err != nil {
		return nil, err
	}
	if defaultTopology != nil {
		klog.FromContext(ctx).V(2).Info("PodGroups without a topology constraint take the default", "constraint", defaultTopology.String())
	}
	p := newPlugin(*args, handle, cache, gangs)
	p.useInventory(inventory)
	p.nominations.Run(ctx)
	cache.OnChange(func(tree *hypernode.Snapshot) { p.treeChanged(klog.FromContext(ctx), tree) })
	if err := p.watchCapacity(handle.SharedInformerFactory()); err != nil {
		return nil, err
	}
	if p.usageSums != nil {
		if err := p.usageSums.watch(handle.SharedInformerFactory()); err != nil {
			return nil, err
		}
	}
	// Expired plans are dropped when a gang plans, and at least this often: their members'
	// nominations hold room for every pod of lower or equal priority.
	go wait.UntilWithContext(ctx, func(ctx context.Context) { p.dropExpiredPlans(klog.FromContext(ctx)) }, planSweepPeriod)
	return p, nil
}

func newPlugin(args config.NetworkTopologyAwareArgs, handle fwk.Handle, cache *hypernode.Cache, gangs *gangstate.Tracker) *NetworkTopologyAware {
	registry := gangs.Registry()
	p := &NetworkTopologyAware{
		args:     args,
		handle:   handle,
		cache:    cache,
		registry: registry,
		gangs:    gangs,
		events:   eventlog.New(handle.EventRecorder(), eventAction),
		devices:  devices.NewSource(handle.SharedDRAManager(), dynamicresources.AllocatorFeatures(plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate))),
	}
	p.cycle = p.cycleOf()
	registry.OnGroupDelete(p.forget)
	p.nominations = podstatus.NewWriter("hypernode-nominations", handle.ClientSet(), handle.SharedInformerFactory().Core().V1().Pods().Lister(), p.nominationUpdate)
	binPack := args.HyperNodeBinPack
	p.resources, p.weights = placement.Weights(binPack.CPU, binPack.Memory, binPack.Resources)
	if args.NormalPod.Enable {
		p.usageSums = newUsageCache(p.resources, args.NormalPod.Fading)
	}
	return p
}

// Name returns the name of the plugin.
func (p *NetworkTopologyAware) Name() string { return Name }

// constraint returns the gang of a pod and its constraint; ok is false for pods that the
// plugin does not place (not in a gang, no PodGroup, no constraint).
func (p *NetworkTopologyAware) constraint(pod *v1.Pod) (podgroup.Key, podgroup.Info, bool) {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return key, podgroup.Info{}, false
	}
	info := p.registry.Info(key)
	if info.PodGroup == nil || !info.PlacedByTopology() {
		return key, info, false
	}
	return key, info, true
}

// SignPod: a constrained member's nodes come from its own plan, so its result must never be
// reused for another pod. With the normal-pod score on, a pod placed on a node changes the
// score of every node sharing a HyperNode with it, which breaks the batching assumption that
// only the chosen node's score changed; such pods are refused too, as PodTopologySpread
// refuses pods whose score depends on other nodes. While gangs hold domains, Filter depends on
// the pod's place in queue order: refused too. Otherwise the score depends on nothing of the
// pod: an empty signature.
func (p *NetworkTopologyAware) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if _, _, ok := p.constraint(pod); ok {
		return nil, fwk.NewStatus(fwk.Unschedulable, "a topology-constrained gang member is planned individually")
	}
	if p.gangs.Holds() != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, "the holds of waiting gangs keep pods off nodes by the pods' priority and arrival")
	}
	if p.usageSums != nil && p.cache.Snapshot().Len() > 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, "the normal-pod score depends on the usage of every node in the pod's HyperNodes")
	}
	return nil, nil
}
