package networktopology

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/metrics"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// leftOutReuse bounds how long a plan that places nobody answers the left-out members: room
// can also appear without any event (a nomination dropped in memory), and kube-scheduler
// retries unschedulable pods every 5 minutes at most; one plan per gang per 30 s is cheap.
const leftOutReuse = 30 * time.Second

// planTTL bounds how long an unused plan's promises are honoured: a gang that stopped
// scheduling (its members gone or stuck) must not hold slots forever.
const planTTL = 10 * time.Minute

// planSweepPeriod is how often expired plans are dropped when no gang plans meanwhile.
const planSweepPeriod = time.Minute

// currentPlan returns the gang's plan if it is still valid for this member (answersLocked).
func (p *NetworkTopologyAware) currentPlan(key podgroup.Key, tree *hypernode.Snapshot, pod string, revision int) *gangstate.Plan {
	p.gangs.Lock()
	defer p.gangs.Unlock()
	plan := p.gangs.PlanLocked(key)
	if !p.answersLocked(plan, tree, pod, revision) {
		return nil
	}
	plan.LastUsed = time.Now()
	return plan
}

// answersLocked reports whether the plan answers this member: the member is in it, the
// PodGroup's spec and constraint are those it was made for, and none of its leaves changed
// in the tree; a member it leaves out, while planned members are pending, or until something
// that can make room happens (then it plans again, around the placed members). The gangs'
// lock must be held.
func (p *NetworkTopologyAware) answersLocked(plan *gangstate.Plan, tree *hypernode.Snapshot, pod string, revision int) bool {
	if plan == nil || plan.Revision != revision {
		// A changed constraint or minMember (an admin's edit) is planned for again, around
		// the members already placed.
		return false
	}
	if _, ok := plan.PodLeaf[pod]; !ok && !plan.Deferred.Has(pod) {
		return false
	}
	if plan.Deferred.Has(pod) && plan.Pending() == 0 && !p.waitsForRoomLocked(plan, tree) {
		// Every planned member has its place: plan the deferred sub-groups now, around them;
		// once, while nothing that can make room happens.
		return false
	}
	for leaf, info := range plan.LeafInfos {
		if now, _ := tree.HyperNode(leaf); now != info {
			return false
		}
	}
	return true
}

// invalidate drops a gang's plan and its promises.
func (p *NetworkTopologyAware) invalidate(logger klog.Logger, key podgroup.Key) {
	p.gangs.Lock()
	old := p.gangs.DropPlanLocked(key)
	released := old.PromisedLeaves()
	withdrawn := p.withdrawLocked(old)
	p.gangs.Unlock()
	p.withdraw(withdrawn)
	if len(released) > 0 {
		p.promisesReleased(logger, released)
	}
}

// makePlan computes and records a plan for the gang of pod.
func (p *NetworkTopologyAware) makePlan(ctx context.Context, state fwk.CycleState, pod *v1.Pod, key podgroup.Key, info podgroup.Info, tree *hypernode.Snapshot, nodes []fwk.NodeInfo) (*gangstate.Plan, *fwk.Status) {
	logger := klog.FromContext(ctx)
	start := time.Now()
	outcome, simulated := metrics.ResultError, 0
	defer func() { metrics.ObservePlan(outcome, time.Since(start), simulated) }()
	// The gang's previous plan goes, with its nominations: it must not hold the gang's own
	// slots against the new plan, and if no new plan comes, its members must not follow a
	// plan whose slots nobody holds.
	p.invalidate(logger, key)
	p.dropExpiredPlans(logger)
	// Read before planning: a change that can make room while it plans makes a plan that
	// places nobody stale at once.
	epoch := p.roomEpoch.Load()
	gang := p.registry.Gang(key).Including(pod)
	req, err := placement.GangRequest(tree, gang)
	if err != nil {
		return nil, p.refuseConstraint(logger, key, pod, info, tree, fmt.Sprintf("PodGroup %s: %v", key, err))
	}
	shapes := shapesOf(gang.Pending)
	simState, status := p.simulationState(ctx, pod)
	if !status.IsSuccess() {
		return nil, status
	}
	if len(shapes) > 1 {
		if status := p.simulateShapes(ctx, shapes); !status.IsSuccess() {
			return nil, status
		}
	}
	// Other plans hold their slots through nominations (nominate.go), which the simulation
	// sees; expired plans were dropped above.
	req.Strategy = placement.Strategy(p.args.CandidateScoringStrategy)
	req.PodRequest = p.podRequest(pod)
	req.Weights = p.weights
	// simulate fills the capacities of every node in nodes (the cluster, or the cluster
	// without the waiting members of lower gangs): one count per node for a gang of one
	// shape, one per shape and a Fitter otherwise.
	simulate := func(nodes []fwk.NodeInfo, req *placement.Request) {
		if len(shapes) > 1 {
			req.Nodes, req.Shapes, req.Fit = p.shapeCapacities(ctx, shapes, nodes)
			return
		}
		req.Nodes = p.nodeCapacities(ctx, simState, pod, nodes, nil, len(req.Pending))
	}
	// The deferral below narrows req; these are the gang's members as planned first.
	names, placedNodes := req.Pending, req.Placed
	var result *placement.Plan
	simulated = len(nodes)
	if req.Strategy == placement.BinPack && len(req.SubGroups) == 0 {
		// Bounds first, the chosen domains simulated (planLazily).
		var refine func(*placement.Request, sets.Set[string])
		if len(shapes) > 1 {
			req.Nodes, req.Shapes, req.Fit = p.shapeBounds(ctx, shapes, nodes)
			refine = func(req *placement.Request, only sets.Set[string]) {
				p.simulateShapeNodes(ctx, shapes, nodes, only, req)
			}
		} else {
			req.Nodes = p.capacityBounds(pod, nodes, len(req.Pending))
			refine = func(req *placement.Request, only sets.Set[string]) {
				maps.Copy(req.Nodes, p.nodeCapacities(ctx, simState, pod, nodes, only, len(req.Pending)))
			}
		}
		result, req, simulated, err = p.planLazily(req, refine)
	} else {
		// LeastWaste ranks by capacity surplus and sub-groups compare every candidate of a
		// tier: bounds could change their choice, so they simulate every node.
		simulate(nodes, &req)
		result, err = placement.Make(req)
	}
	p.lastSimulated.Store(int64(simulated))
	// A job that can run with fewer members than it has (sub-groups it can do without, an
	// elastic gang) is planned with as many as fit; the others wait for room (Gang keeps them
	// all or nothing).
	original := req
	var deferred []string
	if err != nil {
		var fallback *placement.Plan
		if fallback, req, deferred, err = placement.Fallback(req, err, gang.Info, gang.SubGroups, len(placedNodes)); err == nil {
			result = fallback
		}
	}
	var yielded []string
	if unsat := (*placement.Unsatisfiable)(nil); errors.As(err, &unsat) {
		// Lower-precedence gangs waiting in Permit may give their room back: the gang is
		// planned into it now, so that its promises keep the room while they release it.
		if plan, trial, names := p.yieldLowerGangs(ctx, pod, key, info, nodes, original, simulate); plan != nil {
			result, err, req, deferred, yielded = plan, nil, trial, nil, names
		}
	}
	if err != nil {
		var unsat *placement.Unsatisfiable
		if errors.As(err, &unsat) {
			status := fwk.NewStatus(fwk.UnschedulableAndUnresolvable, unsat.Message)
			wholeCluster := placement.SpansCluster(tree, req.Soft, req.MaxTier)
			// The fewest members the job can run with (an elastic gang's, or a job's without
			// the sub-groups it can do without): room that holds them may help it.
			need := min(len(names), max(gang.Info.MinMember()-len(placedNodes), 1))
			var possible sets.Set[string]
			fitsNowhere, blocked := "", false
			if len(shapes) > 1 {
				for i, shape := range req.Shapes {
					if noShapeCapacity(shape.Capacity) && !blocked {
						// Perhaps not room: the members of this shape may fit no node at all.
						if msg, b := p.blockIfFitsNowhere(ctx, shapes[i].Rep, key, info); msg != "" && (fitsNowhere == "" || b) {
							fitsNowhere, blocked = msg, b
						}
					}
				}
				possible = p.possibleShapeDomains(tree, shapes, nodes, need, req.MaxTier, wholeCluster)
			} else {
				if noCapacity(req.Nodes) {
					// Perhaps not room: this member may fit no node at all.
					fitsNowhere, blocked = p.blockIfFitsNowhere(ctx, pod, key, info)
				}
				possible = p.possibleDomains(tree, pod, nodes, need, req.MaxTier, wholeCluster)
			}
			switch {
			case blocked:
				// No domain can help while a member the job needs fits no node: say that,
				// not the sums.
				status = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fitsNowhere)
			case fitsNowhere != "":
				// The job could do without that member, but the plan failed for the others
				// too: both are the answer.
				status = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, unsat.Message+"; "+fitsNowhere)
			}
			outcome = metrics.ResultNoDomain
			p.recordFailure(key, pod, status, tree, info, possible)
			p.events.Record(info.PodGroup, v1.EventTypeWarning, EventTopologyUnsatisfiable, unsat.Message)
			logger.V(2).Info("Gang cannot be planned", "podGroup", key, "pending", len(names), "simulatedNodes", simulated, "duration", time.Since(start), "reason", unsat.Message)
			return nil, status
		}
		return nil, fwk.AsStatus(err)
	}
	outcome = metrics.ResultPlaced
	if len(result.PodLeaf) > 0 {
		// A plan that places nobody (every pending member left out) is not a placement.
		metrics.ObservePlacement(result.Tier, req.Soft)
	}
	plan := &gangstate.Plan{
		LastUsed:     time.Now(),
		Domain:       result.Domain,
		Tier:         result.Tier,
		PodLeaf:      result.PodLeaf,
		PodNode:      placement.AssignNodes(req, result),
		Deferred:     sets.New(deferred...),
		LeafInfos:    map[string]*hypernode.HyperNodeInfo{},
		LeafNodes:    map[string]sets.Set[string]{},
		Promised:     map[string]int{},
		Reserved:     sets.New[string](),
		PlacedByLeaf: map[string]int{},
		Relocated:    map[string]string{},
		WaitsForRoom: len(result.PodLeaf) == 0 && len(deferred) > 0,
		RoomEpoch:    epoch,
		Made:         time.Now(),
		Generation:   tree.Generation(),
		Revision:     info.Revision,
	}
	if plan.WaitsForRoom {
		plan.RoomArea = roomArea(tree, placedNodes, req.MaxTier, req.Soft)
	}
	for leaf, pods := range result.LeafPods {
		plan.Promised[leaf] = len(pods)
		leafInfo, _ := tree.HyperNode(leaf)
		plan.LeafInfos[leaf] = leafInfo
		if leaf == placement.LooseLeaf {
			plan.LeafNodes[leaf] = sets.New(placement.LooseNodes(tree, req.Nodes)...)
			continue
		}
		plan.LeafNodes[leaf] = sets.New(leafInfo.Nodes...)
	}
	for _, n := range placedNodes {
		leaf, ok := tree.LeafOf(n)
		if !ok {
			leaf = placement.LooseLeaf
		}
		plan.PlacedByLeaf[leaf]++
	}
	pendingPods := make(map[string]*v1.Pod, len(gang.Pending))
	for _, m := range gang.Pending {
		pendingPods[m.Pod.Name] = m.Pod
	}
	p.nominate(logger, plan, plan.PodNode, pendingPods)
	p.gangs.Lock()
	// With deferred members, the gang is retried when another gang releases promised slots.
	releasedOld := p.gangs.SetPlanLocked(key, plan).PromisedLeaves()
	p.gangs.Unlock()
	if plan.WaitsForRoom && p.cache.Snapshot().Generation() != plan.Generation {
		// The tree changed while the plan was made, and its listener (treeChanged) ran
		// before this plan existed: the plan no longer answers, and nothing else would
		// retry the members it leaves out.
		gangstate.Activate(logger, p.handle, pod)
	}
	if !p.releaseHeld(logger, key) && len(result.PodLeaf) > 1 {
		// Members refused before this plan (its constraint could not be served, or a plan
		// that placed nobody) wait in the queue for an event; Gang's Permit activates them
		// only when a round starts to wait, and a member allowed at once (the job runs
		// already) starts none.
		others := make([]*v1.Pod, 0, len(result.PodLeaf)-1)
		for name := range result.PodLeaf {
			if other := pendingPods[name]; other != nil && name != pod.Name {
				others = append(others, other)
			}
		}
		gangstate.Activate(logger, p.handle, others...)
	}
	if len(releasedOld) > 0 {
		// Its old promises may have kept another gang out.
		p.promisesReleased(logger, releasedOld)
	}
	leaves := make([]string, 0, len(result.LeafPods))
	for leaf := range result.LeafPods {
		leaves = append(leaves, leaf)
	}
	sort.Strings(leaves)
	if len(result.PodLeaf) > 0 {
		msg := fmt.Sprintf("gang %s planned in %s (tier %d): %d pending members over leaves %v", key, result.Domain, result.Tier, len(result.PodLeaf), leaves)
		p.events.Record(info.PodGroup, v1.EventTypeNormal, EventPlanned, msg)
	}
	// V(2): once per gang (not per member), and the benchmark harness reads the duration.
	logger.V(2).Info("Gang planned", "podGroup", key, "domain", result.Domain, "tier", result.Tier, "pending", len(result.PodLeaf), "deferred", len(deferred), "leaves", leaves, "simulatedNodes", simulated, "duration", time.Since(start), "yielded", yielded)
	if len(yielded) > 0 {
		// The yielding gangs' reservations are released asynchronously; the members retry on
		// their deletion, and reuse this plan. Unresolvable: per-pod preemption must not
		// evict anybody for a gang member, and the mark keeps GangPreemption (whose
		// simulation still sees the yielding reservations) and Gang's PostFilter out.
		gangstate.MarkYielded(state)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
			"gang %s: waiting members of lower-precedence gang(s) %s were rejected to make room in %s; retrying", key, strings.Join(yielded, ", "), result.Domain))
	}
	return plan, nil
}

// forget drops what the plugin keeps for a gang whose PodGroup was deleted; promises its plan
// still held are released.
func (p *NetworkTopologyAware) forget(key podgroup.Key) {
	p.gangs.Lock()
	old := p.gangs.ForgetPlanningLocked(key)
	released := old.PromisedLeaves()
	withdrawn := p.withdrawLocked(old)
	p.gangs.Unlock()
	p.releaseHeld(klog.Background(), key)
	p.withdraw(withdrawn)
	p.events.Forget(key)
	if len(released) > 0 {
		p.promisesReleased(klog.Background(), released)
	}
}

// noShapeCapacity reports whether no node could take a single member of a shape.
func noShapeCapacity(capacity map[string]int) bool {
	for _, c := range capacity {
		if c > 0 {
			return false
		}
	}
	return true
}

// noCapacity reports whether no node could take a single member.
func noCapacity(nodes map[string]placement.Node) bool {
	for _, n := range nodes {
		if n.Capacity > 0 {
			return false
		}
	}
	return true
}
