// Package networktopology implements the NetworkTopologyAware plugin: it places each gang
// inside the smallest network domain (HyperNode) that can hold it.
//
// PreFilter plans a constrained gang once (pkg/placement) and narrows every member to the
// nodes of its planned leaf; Filter enforces the same set; Reserve/Unreserve keep the ledger
// of promised slots; Score ranks nodes by their distance (LCA tier) to the gang's members, or,
// for pods without a constraint, by the tier-weighted fading bin-pack of seed 000.
package networktopology

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	"github.com/hypernode-dev/hypernode-scheduler/apis/config/validation"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// Name is the name of the plugin used in the plugin registry and configurations.
const Name = "NetworkTopologyAware"

// Event reasons recorded on PodGroups.
const (
	// EventInvalidConstraint: the PodGroup's topology annotation is unusable.
	EventInvalidConstraint = "InvalidTopologyConstraint"
	// EventTopologyUnsatisfiable: no allowed network domain can host the gang now.
	EventTopologyUnsatisfiable = "TopologyUnsatisfiable"
	// EventPlanned: the gang was planned into a domain.
	EventPlanned = "TopologyPlanned"
	eventAction  = "Plan"
)

// HyperNodeResource is the scheduler event resource of HyperNodes.
const HyperNodeResource fwk.EventResource = "hypernodes.v1alpha1.topology.volcano.sh"

// PodGroupResource is the scheduler event resource of scheduler-plugins PodGroups.
const PodGroupResource fwk.EventResource = "podgroups.v1alpha1.scheduling.x-k8s.io"

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
	events   *podgroup.EventLog
	// resources are the weighted resources of the bin-pack scores, in a fixed order.
	resources []v1.ResourceName
	weights   []float64

	mu    sync.Mutex
	plans map[podgroup.Key]*gangPlan
	// unsatisfied are the gangs whose last plan failed; they are activated when another
	// gang's promised slots are released, since no cluster event announces that.
	unsatisfied sets.Set[podgroup.Key]
	// lastSimulated is how many nodes the latest plan ran the Filter plugins on.
	lastSimulated atomic.Int64
}

// gangPlan is a gang's current plan. It is replaced, never modified, except for the
// bookkeeping of reservations (promised, reserved, placedByLeaf), under the plugin's lock.
type gangPlan struct {
	created time.Time
	domain  string
	tier    int
	podLeaf map[string]string
	// leafInfos are the planned leaves as the tree described them: the plan holds while
	// every one of them is unchanged (the tree shares unchanged HyperNodes between
	// snapshots, so pointer equality says "unchanged").
	leafInfos map[string]*hypernode.HyperNodeInfo
	leafNodes map[string]sets.Set[string]
	// promised counts, per leaf, the planned members that have not reserved yet; reserved
	// are the members that did (so that Reserve is idempotent).
	promised map[string]int
	reserved sets.Set[string]
	// placedByLeaf counts the gang's bound and reserved members per leaf, for Score.
	placedByLeaf map[string]int
	// deferred are the members of sub-groups that did not fit next to the others; they wait
	// until the plan is dropped (capacity freed, a member failed).
	deferred sets.Set[string]
}

// planTTL bounds how long a plan's promises are honoured: a gang that stopped scheduling
// (deleted, its members gone) must not hold slots forever.
const planTTL = 10 * time.Minute

// pending returns the promised slots that are still open.
func (g *gangPlan) pending() int {
	n := 0
	for _, c := range g.promised {
		n += c
	}
	return n
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
// and PodGroup registry. Invalid args fail the scheduler's start.
func New(_ context.Context, obj runtime.Object, handle fwk.Handle, cache *hypernode.Cache, registry *podgroup.Registry) (fwk.Plugin, error) {
	args, ok := obj.(*config.NetworkTopologyAwareArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type NetworkTopologyAwareArgs, got %T", obj)
	}
	if err := validation.ValidateNetworkTopologyAwareArgs(nil, args); err != nil {
		return nil, err
	}
	return newPlugin(*args, handle, cache, registry), nil
}

func newPlugin(args config.NetworkTopologyAwareArgs, handle fwk.Handle, cache *hypernode.Cache, registry *podgroup.Registry) *NetworkTopologyAware {
	p := &NetworkTopologyAware{
		args:        args,
		handle:      handle,
		cache:       cache,
		registry:    registry,
		events:      podgroup.NewEventLog(handle.EventRecorder(), eventAction),
		plans:       map[podgroup.Key]*gangPlan{},
		unsatisfied: sets.New[podgroup.Key](),
	}
	add := func(name v1.ResourceName, w int64) {
		if w > 0 {
			p.resources = append(p.resources, name)
			p.weights = append(p.weights, float64(w))
		}
	}
	add(v1.ResourceCPU, args.HyperNodeBinPack.CPU)
	add(v1.ResourceMemory, args.HyperNodeBinPack.Memory)
	var extra []string
	for name := range args.HyperNodeBinPack.Resources {
		extra = append(extra, string(name))
	}
	sort.Strings(extra)
	for _, name := range extra {
		add(v1.ResourceName(name), args.HyperNodeBinPack.Resources[v1.ResourceName(name)])
	}
	return p
}

// Name returns the name of the plugin.
func (p *NetworkTopologyAware) Name() string { return Name }

// preFilterState is the planned node set of a constrained member.
type preFilterState struct {
	leaf  string
	nodes sets.Set[string]
}

func (s *preFilterState) Clone() fwk.StateData { return s }

// constraint returns the gang of a pod and its constraint; ok is false for pods that the
// plugin does not place (not in a gang, no PodGroup, no constraint).
func (p *NetworkTopologyAware) constraint(pod *v1.Pod) (podgroup.Key, podgroup.Info, bool) {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return key, podgroup.Info{}, false
	}
	info := p.registry.Info(key)
	if info.PodGroup == nil || (info.Topology == nil && info.TopologyErr == nil && !hasSubGroupTopology(info)) {
		return key, info, false
	}
	return key, info, true
}

// hasSubGroupTopology reports whether a sub-group policy of the gang carries a constraint.
func hasSubGroupTopology(info podgroup.Info) bool {
	for _, sp := range info.SubGroupPolicies {
		if sp.NetworkTopology != nil {
			return true
		}
	}
	return false
}

// jobTopology is the gang's constraint; a gang whose only constraints are its sub-groups'
// may span the whole cluster.
func jobTopology(info podgroup.Info) *podgroup.NetworkTopology {
	if info.Topology != nil {
		return info.Topology
	}
	return &podgroup.NetworkTopology{Mode: podgroup.ModeSoft}
}

// PreFilter plans the member's gang (once per gang) and narrows the pod to its planned leaf.
func (p *NetworkTopologyAware) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	key, info, ok := p.constraint(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if _, err := state.Read(simulationKey); err == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if info.TopologyErr != nil {
		msg := fmt.Sprintf("PodGroup %s: %v", key, info.TopologyErr)
		p.events.Record(info.PodGroup, v1.EventTypeWarning, EventInvalidConstraint, msg)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	if err := p.cache.WaitForSync(ctx); err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("waiting for the HyperNode cache: %w", err))
	}
	tree := p.cache.Snapshot()
	maxTier, err := p.maxTier(tree, jobTopology(info))
	if err != nil {
		msg := fmt.Sprintf("PodGroup %s: annotation %s: %v", key, podgroup.NetworkTopologyAnnotation, err)
		p.events.Record(info.PodGroup, v1.EventTypeWarning, EventInvalidConstraint, msg)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}

	plan := p.currentPlan(key, tree, pod.Name)
	if plan == nil {
		var status *fwk.Status
		plan, status = p.makePlan(ctx, state, pod, key, info, tree, maxTier, nodes)
		if !status.IsSuccess() {
			return nil, status
		}
	}
	if plan.deferred.Has(pod.Name) {
		sub, _ := podgroup.SubGroupOf(info.SubGroupPolicies, pod)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
			"gang %s: sub-group %s does not fit next to the job's other sub-groups in %s now", key, sub.ID, plan.domain))
	}
	leaf := plan.podLeaf[pod.Name]
	nodeSet := plan.leafNodes[leaf]
	state.Write(preFilterStateKey, &preFilterState{leaf: leaf, nodes: nodeSet})
	return &fwk.PreFilterResult{NodeNames: nodeSet}, nil
}

// maxTier resolves the highest tier a gang may span.
func (p *NetworkTopologyAware) maxTier(tree *hypernode.Snapshot, nt *podgroup.NetworkTopology) (int, error) {
	switch {
	case nt.HighestTierAllowed != nil:
		return *nt.HighestTierAllowed, nil
	case nt.HighestTierName != "":
		return tree.TierByName(nt.HighestTierName)
	}
	// Soft without a tier: anything up to the whole cluster.
	return tree.RootTier(), nil
}

// currentPlan returns the gang's plan if it is still valid for this member: the member is in
// it and none of its leaves changed in the tree.
func (p *NetworkTopologyAware) currentPlan(key podgroup.Key, tree *hypernode.Snapshot, pod string) *gangPlan {
	p.mu.Lock()
	defer p.mu.Unlock()
	plan := p.plans[key]
	if plan == nil {
		return nil
	}
	if _, ok := plan.podLeaf[pod]; !ok && !plan.deferred.Has(pod) {
		return nil
	}
	if plan.deferred.Has(pod) && plan.pending() == 0 {
		// Every planned member has its place: plan the deferred sub-groups now, around them.
		return nil
	}
	for leaf, info := range plan.leafInfos {
		if now, _ := tree.HyperNode(leaf); now != info {
			return nil
		}
	}
	return plan
}

// invalidate drops a gang's plan and its promises.
func (p *NetworkTopologyAware) invalidate(logger klog.Logger, key podgroup.Key) {
	p.mu.Lock()
	plan := p.plans[key]
	delete(p.plans, key)
	released := plan != nil && plan.pending() > 0
	p.mu.Unlock()
	if released {
		p.activateUnsatisfied(logger)
	}
}

// activateUnsatisfied retries the gangs whose planning failed, after promised slots were
// released.
func (p *NetworkTopologyAware) activateUnsatisfied(logger klog.Logger) {
	p.mu.Lock()
	keys := p.unsatisfied.UnsortedList()
	p.unsatisfied.Clear()
	p.mu.Unlock()
	pods := map[string]*v1.Pod{}
	for _, k := range keys {
		for _, m := range p.registry.PendingMembers(k) {
			pods[m.Namespace+"/"+m.Name] = m
		}
	}
	if len(pods) > 0 {
		p.handle.Activate(logger, pods)
	}
}

// makePlan computes and records a plan for the gang of pod.
func (p *NetworkTopologyAware) makePlan(ctx context.Context, state fwk.CycleState, pod *v1.Pod, key podgroup.Key, info podgroup.Info, tree *hypernode.Snapshot, maxTier int, nodes []fwk.NodeInfo) (*gangPlan, *fwk.Status) {
	logger := klog.FromContext(ctx)
	start := time.Now()
	pending := p.registry.PendingMembers(key)
	found := false
	for _, m := range pending {
		if m.UID == pod.UID {
			found = true
		}
	}
	if !found {
		// The registry has not seen this member yet: plan it too.
		pending = append(pending, pod)
	}
	sortByRank(pending)
	names := make([]string, len(pending))
	for i, m := range pending {
		names[i] = m.Name
	}
	placed := p.registry.PlacedMembers(key)
	placedNodes := make([]string, len(placed))
	for i, pm := range placed {
		placedNodes[i] = pm.Node
	}
	simState, status := p.simulationState(ctx, pod)
	if !status.IsSuccess() {
		return nil, status
	}
	promised := p.promisedByOthers(key)

	subGroups, status := p.subGroupRequests(tree, key, info, pending, maxTier)
	if !status.IsSuccess() {
		return nil, status
	}
	constraint := jobTopology(info).String()
	if len(subGroups) > 0 {
		constraint = "job " + constraint
	}
	req := placement.Request{
		Tree:       tree,
		Constraint: constraint,
		MaxTier:    maxTier,
		Soft:       jobTopology(info).Mode == podgroup.ModeSoft,
		SubGroups:  subGroups,
		Pending:    names,
		Placed:     placedNodes,
		Promised:   promised,
		Strategy:   placement.Strategy(p.args.CandidateScoringStrategy),
		PodRequest: p.podRequest(pod),
		Weights:    p.weights,
	}
	var result *placement.Plan
	var err error
	simulated := len(nodes)
	if req.Strategy == placement.BinPack && len(subGroups) == 0 {
		result, req.Nodes, simulated, err = p.planLazily(ctx, simState, pod, nodes, req)
	} else {
		// LeastWaste ranks by capacity surplus and sub-groups compare every candidate of a
		// tier: bounds could change their choice, so they simulate every node.
		req.Nodes = p.nodeCapacities(ctx, simState, pod, nodes, nil, tree, len(names), promised)
		result, err = placement.Make(req)
	}
	p.lastSimulated.Store(int64(simulated))
	// A job that needs fewer sub-groups than it has (minSubGroups, minMember) is planned with
	// as many whole sub-groups as fit, dropping them from the last in order; the members of
	// the dropped ones wait for room (Gang keeps them all or nothing).
	var deferred []string
	states, _, _ := p.registry.SubGroups(key, nil)
	droppedPerPolicy := map[string]int{}
	for err != nil && len(req.SubGroups) > 0 {
		last := req.SubGroups[len(req.SubGroups)-1]
		remaining := len(req.Pending) - len(last.Pending) + len(placedNodes)
		if remaining < info.MinMember() || len(last.Pending) == 0 || !canDrop(info, states, droppedPerPolicy, last.Policy) {
			break
		}
		droppedPerPolicy[last.Policy]++
		drop := sets.New(last.Pending...)
		var kept []string
		for _, n := range req.Pending {
			if !drop.Has(n) {
				kept = append(kept, n)
			}
		}
		if retry, retryErr := placement.Make(withPending(req, kept, len(req.SubGroups)-1)); retryErr == nil {
			result, err = retry, nil
		}
		req = withPending(req, kept, len(req.SubGroups)-1)
		deferred = append(deferred, last.Pending...)
	}
	if err != nil {
		var unsat *placement.Unsatisfiable
		if errors.As(err, &unsat) {
			p.mu.Lock()
			p.unsatisfied.Insert(key)
			p.mu.Unlock()
			p.events.Record(info.PodGroup, v1.EventTypeWarning, EventTopologyUnsatisfiable, unsat.Message)
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, unsat.Message)
		}
		return nil, fwk.AsStatus(err)
	}
	plan := &gangPlan{
		created:      time.Now(),
		domain:       result.Domain,
		tier:         result.Tier,
		podLeaf:      result.PodLeaf,
		deferred:     sets.New(deferred...),
		leafInfos:    map[string]*hypernode.HyperNodeInfo{},
		leafNodes:    map[string]sets.Set[string]{},
		promised:     map[string]int{},
		reserved:     sets.New[string](),
		placedByLeaf: map[string]int{},
	}
	for leaf, pods := range result.LeafPods {
		plan.promised[leaf] = len(pods)
		leafInfo, _ := tree.HyperNode(leaf)
		plan.leafInfos[leaf] = leafInfo
		if leaf == placement.LooseLeaf {
			plan.leafNodes[leaf] = sets.New(placement.LooseNodes(tree, req.Nodes)...)
			continue
		}
		plan.leafNodes[leaf] = sets.New(leafInfo.Nodes...)
	}
	for _, n := range placedNodes {
		leaf, ok := tree.LeafOf(n)
		if !ok {
			leaf = placement.LooseLeaf
		}
		plan.placedByLeaf[leaf]++
	}
	p.mu.Lock()
	p.plans[key] = plan
	if len(deferred) == 0 {
		p.unsatisfied.Delete(key)
	} else {
		// Retried when another gang releases promised slots.
		p.unsatisfied.Insert(key)
	}
	p.mu.Unlock()
	leaves := make([]string, 0, len(result.LeafPods))
	for leaf := range result.LeafPods {
		leaves = append(leaves, leaf)
	}
	sort.Strings(leaves)
	msg := fmt.Sprintf("gang %s planned in %s (tier %d): %d pending members over leaves %v", key, result.Domain, result.Tier, len(names), leaves)
	p.events.Record(info.PodGroup, v1.EventTypeNormal, EventPlanned, msg)
	// V(2): once per gang (not per member), and the benchmark harness reads the duration.
	logger.V(2).Info("Gang planned", "podGroup", key, "domain", result.Domain, "tier", result.Tier, "pending", len(names), "leaves", leaves, "simulatedNodes", simulated, "duration", time.Since(start))
	return plan, nil
}

// preFilterRunner is the part of kube-scheduler's framework that runs every PreFilter plugin
// of the profile; the Handle a plugin receives is that framework.
type preFilterRunner interface {
	RunPreFilterPlugins(ctx context.Context, state fwk.CycleState, pod *v1.Pod) (*fwk.PreFilterResult, *fwk.Status, sets.Set[string])
}

// simulationKey marks the cycle state of a capacity simulation: this plugin's PreFilter
// skips it (it would otherwise plan recursively).
const simulationKey fwk.StateKey = "Simulation" + Name

type simulationMarker struct{}

func (simulationMarker) Clone() fwk.StateData { return simulationMarker{} }

// simulationState prepares a cycle state for simulating pod with the Filter plugins: every
// PreFilter plugin of the profile runs on a fresh state, which also records the Filter plugins
// to skip. The scheduling cycle's own state cannot serve: kube-scheduler records the plugins
// to skip only after the last PreFilter plugin, this one, has returned.
func (p *NetworkTopologyAware) simulationState(ctx context.Context, pod *v1.Pod) (fwk.CycleState, *fwk.Status) {
	runner, ok := p.handle.(preFilterRunner)
	if !ok {
		return nil, fwk.AsStatus(fmt.Errorf("the scheduler framework cannot run PreFilter plugins for a capacity simulation"))
	}
	state := framework.NewCycleState()
	state.Write(simulationKey, simulationMarker{})
	if _, status, _ := runner.RunPreFilterPlugins(ctx, state, pod); !status.IsSuccess() {
		return nil, status
	}
	return state, nil
}

// canDrop reports whether the job can still reach minSubGroups of policy without one more of
// its sub-groups.
func canDrop(info podgroup.Info, states []podgroup.SubGroupState, dropped map[string]int, policy string) bool {
	total := 0
	for _, s := range states {
		if s.Policy == policy {
			total++
		}
	}
	for _, sp := range info.SubGroupPolicies {
		if sp.Name == policy {
			return total-dropped[policy]-1 >= int(sp.MinSubGroups)
		}
	}
	return false
}

// withPending returns req with only the given pending members and its first n sub-groups.
func withPending(req placement.Request, pending []string, n int) placement.Request {
	req.Pending = pending
	req.SubGroups = req.SubGroups[:n]
	return req
}

// subGroupRequests splits the pending members by sub-group, in seed 003's order, with each
// sub-group's resolved constraint and placed members.
func (p *NetworkTopologyAware) subGroupRequests(tree *hypernode.Snapshot, key podgroup.Key, info podgroup.Info, pending []*v1.Pod, jobMaxTier int) ([]placement.SubGroup, *fwk.Status) {
	if len(info.SubGroupPolicies) == 0 {
		return nil, nil
	}
	policies := map[string]podgroup.SubGroupPolicy{}
	for _, sp := range info.SubGroupPolicies {
		policies[sp.Name] = sp
	}
	byID := map[string]*placement.SubGroup{}
	var order []podgroup.SubGroup
	add := func(sub podgroup.SubGroup) (*placement.SubGroup, *fwk.Status) {
		if sg := byID[sub.ID]; sg != nil {
			return sg, nil
		}
		sp := policies[sub.Policy]
		nt := sp.NetworkTopology
		if nt == nil {
			nt = jobTopology(info)
		}
		maxTier, err := p.maxTier(tree, nt)
		if nt.HighestTierAllowed == nil && nt.HighestTierName == "" {
			// No tier of its own: anything inside the job's domain.
			maxTier, err = jobMaxTier, nil
		}
		if err == nil && maxTier > jobMaxTier {
			err = fmt.Errorf("its tier %d is above the job's %d", maxTier, jobMaxTier)
		}
		if err != nil {
			msg := fmt.Sprintf("PodGroup %s: annotation %s: policy %q: %v", key, podgroup.SubGroupPolicyAnnotation, sp.Name, err)
			p.events.Record(info.PodGroup, v1.EventTypeWarning, EventInvalidConstraint, msg)
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
		}
		sg := &placement.SubGroup{ID: sub.ID, Policy: sub.Policy, Constraint: nt.String(), MaxTier: maxTier, Soft: nt.Mode == podgroup.ModeSoft}
		byID[sub.ID] = sg
		order = append(order, sub)
		return sg, nil
	}
	for _, m := range pending {
		if sub, ok := podgroup.SubGroupOf(info.SubGroupPolicies, m); ok {
			sg, status := add(sub)
			if !status.IsSuccess() {
				return nil, status
			}
			sg.Pending = append(sg.Pending, m.Name)
		}
	}
	for _, pm := range p.registry.PlacedMembers(key) {
		if sub, ok := podgroup.SubGroupOf(info.SubGroupPolicies, pm.Pod); ok {
			if sg := byID[sub.ID]; sg != nil {
				sg.Placed = append(sg.Placed, pm.Node)
			}
		}
	}
	podgroup.SortSubGroups(order)
	out := make([]placement.SubGroup, 0, len(order))
	for _, sub := range order {
		out = append(out, *byID[sub.ID])
	}
	return out, nil
}

// maxRefinements bounds how many domains planLazily simulates one by one before it simulates
// every node that is left.
const maxRefinements = 4

// planLazily plans a BinPack gang without simulating every node. The planner first works on an
// upper bound of each node's capacity (free resources divided by the pod's request, no plugin
// called); the nodes of the domain it picks are then simulated for real and the gang planned
// again, until the chosen domain's nodes all have real capacities. The result is the one a
// full simulation gives: an upper bound can only make a candidate look feasible, never hide
// one; BinPack ranks candidates by resource usage, not by capacity; and the spread inside the
// domain uses real capacities. When the gang fits nowhere, every node is simulated, so that
// the explanation quotes real capacities. It returns the plan, the capacities it used and
// how many nodes it simulated.
func (p *NetworkTopologyAware) planLazily(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo, req placement.Request) (*placement.Plan, map[string]placement.Node, int, error) {
	demand := len(req.Pending)
	req.Nodes = p.capacityBounds(pod, nodes, req.Tree, demand, req.Promised)
	real := sets.New[string]()
	simulate := func(names sets.Set[string]) {
		for name, node := range p.nodeCapacities(ctx, state, pod, nodes, names, req.Tree, demand, req.Promised) {
			req.Nodes[name] = node
			real.Insert(name)
		}
	}
	for round := 0; ; round++ {
		result, err := placement.Make(req)
		if err != nil || round == maxRefinements {
			if real.Len() == len(req.Nodes) {
				return result, req.Nodes, real.Len(), err
			}
			// Every node left: an exact explanation, or a plan from real capacities only.
			rest := sets.New[string]()
			for n := range req.Nodes {
				if !real.Has(n) {
					rest.Insert(n)
				}
			}
			simulate(rest)
			result, err = placement.Make(req)
			return result, req.Nodes, real.Len(), err
		}
		var domain []string
		if result.Domain == hypernode.VirtualRootName {
			domain = slices.Collect(maps.Keys(req.Nodes)) // the whole cluster, loose nodes included
		} else {
			domain = req.Tree.Nodes(result.Domain)
		}
		missing := sets.New[string]()
		for _, n := range domain {
			if !real.Has(n) {
				missing.Insert(n)
			}
		}
		if missing.Len() == 0 {
			return result, req.Nodes, real.Len(), nil
		}
		simulate(missing)
	}
}

// capacityBounds is an upper bound of nodeCapacities without calling any plugin: per node,
// the free amount of every resource the pod requests (and free pod slots) divided by the
// request, under the same cap.
func (p *NetworkTopologyAware) capacityBounds(pod *v1.Pod, nodes []fwk.NodeInfo, tree *hypernode.Snapshot, demand int, promised map[string]int) map[string]placement.Node {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	out := make(map[string]placement.Node, len(nodes))
	for _, ni := range nodes {
		if ni.Node() == nil {
			continue
		}
		node := placement.Node{}
		node.Used, node.Allocatable = p.usage(ni)
		leaf, ok := tree.LeafOf(ni.Node().Name)
		if !ok {
			leaf = placement.LooseLeaf
		}
		limit := demand + promised[leaf]
		requested, allocatable := ni.GetRequested(), ni.GetAllocatable()
		limit = min(limit, max(allocatable.GetAllowedPodNumber()-len(ni.GetPods()), 0))
		for name, q := range reqs {
			var free, want int64
			switch name {
			case v1.ResourceCPU:
				free, want = allocatable.GetMilliCPU()-requested.GetMilliCPU(), q.MilliValue()
			case v1.ResourceMemory:
				free, want = allocatable.GetMemory()-requested.GetMemory(), q.Value()
			case v1.ResourceEphemeralStorage:
				free, want = allocatable.GetEphemeralStorage()-requested.GetEphemeralStorage(), q.Value()
			default:
				free, want = allocatable.GetScalarResources()[name]-requested.GetScalarResources()[name], q.Value()
			}
			if want > 0 {
				limit = min(limit, int(max(free, 0)/want))
			}
		}
		node.Capacity = limit
		out[ni.Node().Name] = node
	}
	return out
}

// nodeCapacities counts, per node, how many copies of pod pass the Filter plugins when added
// one after another, capped at demand plus the slots other gangs' plans promised in the
// node's leaf (the planner subtracts those per leaf, so the cap must leave room for them). It
// runs on copies of the nodes and of the cycle state. With only set, it simulates just those
// nodes.
func (p *NetworkTopologyAware) nodeCapacities(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo, only sets.Set[string], tree *hypernode.Snapshot, demand int, promised map[string]int) map[string]placement.Node {
	if only != nil {
		subset := make([]fwk.NodeInfo, 0, only.Len())
		for _, ni := range nodes {
			if ni.Node() != nil && only.Has(ni.Node().Name) {
				subset = append(subset, ni)
			}
		}
		nodes = subset
	}
	out := make([]placement.Node, len(nodes))
	logger := klog.FromContext(ctx)
	p.handle.Parallelizer().Until(ctx, len(nodes), func(i int) {
		ni := nodes[i]
		node := placement.Node{}
		node.Used, node.Allocatable = p.usage(ni)
		if ni.Node() == nil {
			out[i] = node
			return
		}
		leaf, ok := tree.LeafOf(ni.Node().Name)
		if !ok {
			leaf = placement.LooseLeaf
		}
		demand := demand + promised[leaf]
		trial := ni
		trialState := state
		for node.Capacity < demand {
			if st := p.handle.RunFilterPluginsWithNominatedPods(ctx, trialState, pod, trial); !st.IsSuccess() {
				logger.V(5).Info("Gang member capacity on node", "node", ni.Node().Name, "fits", node.Capacity, "stop", st.Message())
				break
			}
			node.Capacity++
			if node.Capacity == demand {
				break
			}
			if trial == ni {
				// Copy before the first change: the node and the state are shared.
				trial = ni.Snapshot()
				trialState = state.Clone()
			}
			copyPod := pod.DeepCopy()
			copyPod.Name = fmt.Sprintf("%s-capacity-%d", pod.Name, node.Capacity)
			copyPod.UID = k8stypes.UID(fmt.Sprintf("%s-capacity-%d", pod.UID, node.Capacity))
			copyPod.Spec.NodeName = ni.Node().Name
			pi, err := framework.NewPodInfo(copyPod)
			if err != nil {
				logger.V(4).Info("Could not simulate a gang member", "err", err)
				break
			}
			trial.AddPodInfo(pi)
			if s := p.handle.RunPreFilterExtensionAddPod(ctx, trialState, pod, pi, trial); !s.IsSuccess() {
				break
			}
		}
		out[i] = node
	}, Name)
	result := make(map[string]placement.Node, len(nodes))
	for i, ni := range nodes {
		if ni.Node() != nil {
			result[ni.Node().Name] = out[i]
		}
	}
	return result
}

// usage returns a node's used (requested) and allocatable weighted resources.
func (p *NetworkTopologyAware) usage(ni fwk.NodeInfo) (used, alloc []float64) {
	used = make([]float64, len(p.resources))
	alloc = make([]float64, len(p.resources))
	requested, allocatable := ni.GetRequested(), ni.GetAllocatable()
	for i, r := range p.resources {
		switch r {
		case v1.ResourceCPU:
			used[i], alloc[i] = float64(requested.GetMilliCPU()), float64(allocatable.GetMilliCPU())
		case v1.ResourceMemory:
			used[i], alloc[i] = float64(requested.GetMemory()), float64(allocatable.GetMemory())
		default:
			used[i], alloc[i] = float64(requested.GetScalarResources()[r]), float64(allocatable.GetScalarResources()[r])
		}
	}
	return used, alloc
}

// podRequest returns a pod's weighted resource requests.
func (p *NetworkTopologyAware) podRequest(pod *v1.Pod) []float64 {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	out := make([]float64, len(p.resources))
	for i, r := range p.resources {
		q := reqs[r]
		if r == v1.ResourceCPU {
			out[i] = float64(q.MilliValue())
		} else {
			out[i] = float64(q.Value())
		}
	}
	return out
}

// promisedByOthers sums the ledger of every other gang's plan. Plans older than planTTL, and
// plans of gangs whose PodGroup is gone, are dropped first.
func (p *NetworkTopologyAware) promisedByOthers(key podgroup.Key) map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, plan := range p.plans {
		if time.Since(plan.created) > planTTL || p.registry.Info(k).PodGroup == nil {
			delete(p.plans, k)
			continue
		}
		if k == key {
			continue
		}
		for leaf, n := range plan.promised {
			out[leaf] += n
		}
	}
	return out
}

// PreFilterExtensions returns nil: the planned set does not depend on other pods.
func (p *NetworkTopologyAware) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter keeps a constrained member inside its planned leaf.
func (p *NetworkTopologyAware) Filter(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s := readState[*preFilterState](state, preFilterStateKey)
	if s == nil {
		// Not planned (no constraint), or our PreFilter is running its own capacity
		// simulation: the plan must not veto it.
		return nil
	}
	if !s.nodes.Has(nodeInfo.Node().Name) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("node is outside the HyperNode %s planned for this gang member", s.leaf))
	}
	return nil
}

// PostFilter drops the plan of a member's gang when the member fits nowhere in it, so the
// next attempt plans again from the cluster as it is.
func (p *NetworkTopologyAware) PostFilter(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	if key, _, ok := p.constraint(pod); ok {
		p.invalidate(klog.FromContext(ctx), key)
	}
	return nil, fwk.NewStatus(fwk.Unschedulable)
}

// Reserve turns the member's promised slot into a reservation.
func (p *NetworkTopologyAware) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	key, _, ok := p.constraint(pod)
	if !ok {
		return nil
	}
	p.registry.Reserve(pod, nodeName)
	p.mu.Lock()
	wakeDeferred := false
	if plan := p.plans[key]; plan != nil && !plan.reserved.Has(pod.Name) {
		if leaf, ok := plan.podLeaf[pod.Name]; ok && plan.promised[leaf] > 0 {
			plan.promised[leaf]--
			plan.reserved.Insert(pod.Name)
			plan.placedByLeaf[leaf]++
			wakeDeferred = plan.pending() == 0 && plan.deferred.Len() > 0
		}
	}
	p.mu.Unlock()
	if wakeDeferred {
		// Every planned member has its place: the deferred sub-groups can be planned now.
		pods := map[string]*v1.Pod{}
		for _, m := range p.registry.PendingMembers(key) {
			pods[m.Namespace+"/"+m.Name] = m
		}
		p.handle.Activate(klog.FromContext(ctx), pods)
	}
	return nil
}

// Unreserve drops the gang's plan when the member was reserved under it: a member was
// rejected or timed out, so the plan no longer holds, and the next member plans again around
// the members still placed. The late Unreserve of a member of an earlier plan leaves the
// current plan alone.
func (p *NetworkTopologyAware) Unreserve(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	key, _, ok := p.constraint(pod)
	if !ok {
		return
	}
	p.registry.Unreserve(pod)
	p.mu.Lock()
	plan := p.plans[key]
	current := plan != nil && plan.reserved.Has(pod.Name)
	p.mu.Unlock()
	if current {
		p.invalidate(klog.FromContext(ctx), key)
	}
}

// SignPod: a constrained member's nodes come from its own plan, so its scheduling result must
// never be reused for another pod; other pods are scored by the node's HyperNodes only.
func (p *NetworkTopologyAware) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if _, _, ok := p.constraint(pod); ok {
		return nil, fwk.NewStatus(fwk.Unschedulable, "a topology-constrained gang member is planned individually")
	}
	return []fwk.SignFragment{{Key: "hypernode.dev/NetworkTopologyAware", Value: "unconstrained"}}, nil
}

// preScoreState holds what Score needs for one pod.
type preScoreState struct {
	tree *hypernode.Snapshot
	// Constrained members: the HyperNode their gang occupies (placed members and plan), and
	// the number of placed members per leaf.
	reference    string
	placedByLeaf map[string]int
	members      int
	// Unconstrained pods: the bin-pack score of every HyperNode with the pod added.
	hyperNodeScore map[string]float64
	// tiers with their fading weights.
	tiers   []int
	weights []float64
}

func (s *preScoreState) Clone() fwk.StateData { return s }

// PreScore prepares the scores of one pod: O(members) for a gang member, O(nodes) for a pod
// without a constraint (the HyperNodes' usage), never O(nodes x HyperNodes).
func (p *NetworkTopologyAware) PreScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	tree := p.cache.Snapshot()
	s := &preScoreState{tree: tree}
	if key, info, ok := p.constraint(pod); ok {
		ps := readState[*preFilterState](state, preFilterStateKey)
		if info.TopologyErr != nil || ps == nil {
			return fwk.NewStatus(fwk.Skip)
		}
		// The reference is the member's planned leaf: the plan already put it inside the
		// gang's domain, next to the placed members. O(leaves of the plan) per pod, never
		// O(members).
		s.reference = ps.leaf
		if ps.leaf == placement.LooseLeaf {
			s.reference = hypernode.VirtualRootName
		}
		s.members = max(info.Members, 1)
		s.placedByLeaf = map[string]int{}
		p.mu.Lock()
		if plan := p.plans[key]; plan != nil {
			for leaf, n := range plan.placedByLeaf {
				s.placedByLeaf[leaf] = n
			}
		}
		p.mu.Unlock()
		state.Write(preScoreStateKey, s)
		return nil
	}
	if !p.args.NormalPod.Enable || tree.Len() == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	// Aggregate usage per HyperNode over every node (not only the feasible ones).
	all, err := p.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return fwk.AsStatus(err)
	}
	used := map[string][]float64{}
	alloc := map[string][]float64{}
	for _, ni := range all {
		if ni.Node() == nil {
			continue
		}
		leaf, ok := tree.LeafOf(ni.Node().Name)
		if !ok {
			continue
		}
		u, a := p.usage(ni)
		for h := leaf; h != "" && h != hypernode.VirtualRootName; {
			addTo(used, h, u)
			addTo(alloc, h, a)
			info, _ := tree.HyperNode(h)
			h = info.Parent
		}
	}
	req := p.podRequest(pod)
	s.hyperNodeScore = make(map[string]float64, len(used))
	for h := range used {
		s.hyperNodeScore[h] = placement.BinPackScore(used[h], alloc[h], req, 1, p.weights)
	}
	s.tiers = tree.Tiers()
	s.weights = make([]float64, len(s.tiers))
	for i, t := range s.tiers {
		s.weights[i] = math.Pow(p.args.NormalPod.Fading, float64(t-1))
	}
	state.Write(preScoreStateKey, s)
	return nil
}

func addTo(m map[string][]float64, key string, v []float64) {
	cur := m[key]
	if cur == nil {
		cur = make([]float64, len(v))
		m[key] = cur
	}
	for i := range v {
		cur[i] += v[i]
	}
}

// Score ranks a node for the pod.
func (p *NetworkTopologyAware) Score(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s := readState[*preScoreState](state, preScoreStateKey)
	if s == nil {
		return 0, nil
	}
	name := nodeInfo.Node().Name
	if s.hyperNodeScore == nil {
		return p.scoreMember(s, name), nil
	}
	return p.scoreNormal(s, name), nil
}

// scoreMember: (maxTier - tier(LCA(leaf(node), reference))) / (maxTier - minTier), full in the
// reference leaf itself; 90% of the score, the other 10% the share of the gang already in the
// node's leaf (seed 000 section 5.2).
func (p *NetworkTopologyAware) scoreMember(s *preScoreState, node string) int64 {
	tree := s.tree
	leaf, ok := tree.LeafOf(node)
	if !ok {
		leaf = hypernode.VirtualRootName
	}
	tierScore := 0.0
	if s.reference == "" || leaf == s.reference {
		tierScore = 1
	} else if lca, ok := tree.LCA(leaf, s.reference); ok {
		info, _ := tree.HyperNode(lca)
		maxTier, minTier := tree.RootTier(), 1
		if tiers := tree.Tiers(); len(tiers) > 0 {
			minTier = tiers[0]
		}
		if maxTier > minTier {
			tierScore = float64(maxTier-info.Tier) / float64(maxTier-minTier)
		}
	}
	share := float64(s.placedByLeaf[leaf]) / float64(s.members)
	return int64(math.Round(float64(fwk.MaxNodeScore) * (0.9*tierScore + 0.1*share)))
}

// scoreNormal: sum_t w_t * binpack(HyperNode of tier t holding the node) / sum_t w_t, with 1
// for a tier where no HyperNode holds the node (seed 000 section 5.1).
func (p *NetworkTopologyAware) scoreNormal(s *preScoreState, node string) int64 {
	tree := s.tree
	byTier := map[int]float64{}
	if leaf, ok := tree.LeafOf(node); ok {
		for h := leaf; h != "" && h != hypernode.VirtualRootName; {
			info, _ := tree.HyperNode(h)
			byTier[info.Tier] = s.hyperNodeScore[h]
			h = info.Parent
		}
	}
	total, weightSum := 0.0, 0.0
	for i, t := range s.tiers {
		score, ok := byTier[t]
		if !ok {
			score = 1
		}
		total += s.weights[i] * score
		weightSum += s.weights[i]
	}
	if weightSum == 0 {
		return 0
	}
	return int64(math.Round(float64(fwk.MaxNodeScore) * total / weightSum))
}

// ScoreExtensions returns nil: scores are already in [0, MaxNodeScore].
func (p *NetworkTopologyAware) ScoreExtensions() fwk.ScoreExtensions { return nil }

// sortByRank orders members by rank (Job completion index or hypernode.dev/rank), then name.
func sortByRank(pods []*v1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		ri, iok := podgroup.Rank(pods[i])
		rj, jok := podgroup.Rank(pods[j])
		if iok != jok {
			return iok
		}
		if iok && ri != rj {
			return ri < rj
		}
		return pods[i].Name < pods[j].Name
	})
}

// EventsToRegister returns the events that can make a member that failed here schedulable.
func (p *NetworkTopologyAware) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint}, QueueingHintFn: p.isConstrainedMember},
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: p.isConstrainedMember},
		{Event: fwk.ClusterEvent{Resource: HyperNodeResource, ActionType: fwk.All}, QueueingHintFn: p.isConstrainedMember},
		{Event: fwk.ClusterEvent{Resource: PodGroupResource, ActionType: fwk.Update}, QueueingHintFn: p.isConstrainedMember},
	}, nil
}

// isConstrainedMember requeues only the pods this plugin can have rejected.
func (p *NetworkTopologyAware) isConstrainedMember(_ klog.Logger, pod *v1.Pod, _, _ any) (fwk.QueueingHint, error) {
	if _, _, ok := p.constraint(pod); ok {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}
