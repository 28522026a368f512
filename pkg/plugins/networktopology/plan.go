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

// invalidate drops a gang's plan and its promises.
func (p *NetworkTopologyAware) invalidate(logger klog.Logger, key podgroup.Key) {
	p.gangs.Lock()
	old := p.gangs.DropPlanLocked(key)
	p.gangs.Unlock()
	p.dropped(logger, old)
}

// dropped withdraws the promises of a plan no longer the gang's, and wakes the gangs its
// released slots can help.
func (p *NetworkTopologyAware) dropped(logger klog.Logger, old *gangstate.Plan) {
	if old == nil {
		return
	}
	p.gangs.Lock()
	released := old.PromisedLeaves()
	withdrawn := p.withdrawLocked(old)
	p.gangs.Unlock()
	p.withdraw(withdrawn)
	if len(released) > 0 {
		p.promisesReleased(logger, released)
	}
}

// planning is one plan of a gang in progress: the view it is made from, what it simulates
// and what it finds.
type planning struct {
	ctx    context.Context
	logger klog.Logger
	state  fwk.CycleState
	v      *gangstate.View
	nodes  []fwk.NodeInfo
	start  time.Time
	// epoch is the count of room-making changes read before planning: a change while it plans
	// makes a plan that places nobody stale at once.
	epoch    uint64
	shapes   []*podShape
	simState fwk.CycleState
	// req is what the planner plans; original is it before a fallback narrows it. names and
	// placedNodes are the gang's pending members and placed members' nodes as planned first.
	req, original placement.Request
	names         []string
	placedNodes   []string
	result        *placement.Plan
	deferred      []string
	yielded       []string
	simulated     int
	// room says where the plan was found: "" (everywhere), or the room a preemption made
	// ("nominated nodes", "domain"; preempted.go).
	room string
}

// planGang plans the member's gang and records the plan or the failure. The member gets the
// plan (nil with a status when there is none for it now).
func (p *NetworkTopologyAware) planGang(ctx context.Context, state fwk.CycleState, v *gangstate.View, nodes []fwk.NodeInfo) (*gangstate.Plan, *fwk.Status) {
	pl := &planning{ctx: ctx, logger: klog.FromContext(ctx), state: state, v: v, nodes: nodes, start: time.Now()}
	outcome := metrics.ResultError
	defer func() { metrics.ObservePlan(outcome, time.Since(pl.start), pl.simulated) }()
	p.dropExpiredPlans(pl.logger)
	pl.epoch = p.roomEpoch.Load()
	if status := p.request(pl); !status.IsSuccess() {
		return nil, status
	}
	err := p.searchPreferringPreempted(pl)
	p.lastSimulated.Store(int64(pl.simulated))
	err = p.fallBack(pl, err)
	if err != nil {
		var unsat *placement.Unsatisfiable
		if !errors.As(err, &unsat) {
			return nil, fwk.AsStatus(err)
		}
		outcome = metrics.ResultNoDomain
		return nil, p.failed(pl, unsat)
	}
	outcome = metrics.ResultPlaced
	return p.planned(pl)
}

// request reads what the gang asks for and prepares its capacity simulation.
func (p *NetworkTopologyAware) request(pl *planning) *fwk.Status {
	v := pl.v
	req, err := placement.GangRequest(v.Tree, v.Gang)
	if err != nil {
		return p.refuseConstraint(pl.logger, v, fmt.Sprintf("PodGroup %s: %v", v.Key, err))
	}
	pl.shapes = shapesOf(v.Gang.Pending)
	simState, status := p.simulationState(pl.ctx, v.Pod)
	if !status.IsSuccess() {
		return status
	}
	pl.simState = simState
	if len(pl.shapes) > 1 {
		if status := p.simulateShapes(pl.ctx, pl.shapes); !status.IsSuccess() {
			return status
		}
	}
	// Other plans hold their slots through nominations (nominate.go), which the simulation
	// sees; expired plans were dropped.
	req.Strategy = placement.Strategy(p.args.CandidateScoringStrategy)
	req.PodRequest = p.podRequest(v.Pod)
	req.Weights = p.weights
	pl.req = req
	// The deferral narrows req; these are the gang's members as planned first.
	pl.names, pl.placedNodes = req.Pending, req.Placed
	return nil
}

// simulate fills the capacities of every node in nodes (the cluster, or the cluster without
// the waiting members of lower gangs): one count per node for a gang of one shape, one per
// shape and a Fitter otherwise.
func (p *NetworkTopologyAware) simulate(pl *planning, nodes []fwk.NodeInfo, req *placement.Request) {
	if len(pl.shapes) > 1 {
		req.Nodes, req.Shapes, req.Fit = p.shapeCapacities(pl.ctx, pl.shapes, nodes)
		return
	}
	req.Nodes = p.nodeCapacities(pl.ctx, pl.simState, pl.v.Pod, nodes, nil, len(req.Pending))
}

// search runs the planner: BinPack without sub-groups on bounds first, simulating the
// chosen domains (planLazily); otherwise on every node simulated.
func (p *NetworkTopologyAware) search(pl *planning) error {
	var err error
	pl.simulated = len(pl.nodes)
	if pl.req.Strategy != placement.BinPack || len(pl.req.SubGroups) > 0 {
		// LeastWaste ranks by capacity surplus and sub-groups compare every candidate of a
		// tier: bounds could change their choice, so they simulate every node.
		p.simulate(pl, pl.nodes, &pl.req)
		pl.result, err = placement.Make(pl.req)
		return err
	}
	var refine func(*placement.Request, sets.Set[string])
	if len(pl.shapes) > 1 {
		pl.req.Nodes, pl.req.Shapes, pl.req.Fit = p.shapeBounds(pl.ctx, pl.shapes, pl.nodes)
		refine = func(req *placement.Request, only sets.Set[string]) {
			p.simulateShapeNodes(pl.ctx, pl.shapes, pl.nodes, only, req)
		}
	} else {
		pl.req.Nodes = p.capacityBounds(pl.v.Pod, pl.nodes, len(pl.req.Pending))
		refine = func(req *placement.Request, only sets.Set[string]) {
			maps.Copy(req.Nodes, p.nodeCapacities(pl.ctx, pl.simState, pl.v.Pod, pl.nodes, only, len(req.Pending)))
		}
	}
	pl.result, pl.req, pl.simulated, err = p.planLazily(pl.req, refine)
	return err
}

// fallBack handles a gang the planner could not place whole: a job that can run with fewer
// members than it has (sub-groups it can do without, an elastic gang) is planned with as many
// as fit, the others wait for room (Gang keeps them all or nothing); lower-precedence gangs
// waiting in Permit may give their room back, and the gang is planned into it, so that its
// promises keep the room while they release it.
func (p *NetworkTopologyAware) fallBack(pl *planning, err error) error {
	pl.original = pl.req
	if err == nil {
		return nil
	}
	if fallback, req, deferred, ferr := placement.Fallback(pl.req, err, pl.v.Gang.Info, pl.v.Gang.SubGroups, len(pl.placedNodes)); ferr == nil {
		pl.result, pl.req, pl.deferred = fallback, req, deferred
		return nil
	} else {
		err = ferr
	}
	if unsat := (*placement.Unsatisfiable)(nil); errors.As(err, &unsat) {
		simulate := func(nodes []fwk.NodeInfo, req *placement.Request) { p.simulate(pl, nodes, req) }
		if plan, trial, names := p.yieldLowerGangs(pl.ctx, pl.v, pl.nodes, pl.original, simulate); plan != nil {
			pl.result, pl.req, pl.deferred, pl.yielded = plan, trial, nil, names
			return nil
		}
	}
	return err
}

// failed records the gang's failed plan (held behind this member from now on) and returns
// its answer: the planner's message, or that a member the job needs fits no node at all.
func (p *NetworkTopologyAware) failed(pl *planning, unsat *placement.Unsatisfiable) *fwk.Status {
	v, req := pl.v, pl.req
	wholeCluster := placement.SpansCluster(v.Tree, req.Soft, req.MaxTier)
	// The fewest members the job can run with (an elastic gang's, or a job's without the
	// sub-groups it can do without): room that holds them may help it.
	need := min(len(pl.names), max(v.Gang.Info.MinMember()-len(pl.placedNodes), 1))
	var possible sets.Set[string]
	var candidates []fitsNowhere
	if len(pl.shapes) > 1 {
		for i, shape := range req.Shapes {
			if noShapeCapacity(shape.Capacity) {
				// Perhaps not room: the members of this shape may fit no node at all.
				candidates = append(candidates, p.fitsNowhere(pl.ctx, pl.shapes[i].Rep)...)
			}
		}
		possible = p.possibleShapeDomains(v.Tree, pl.shapes, pl.nodes, need, req.MaxTier, wholeCluster)
	} else {
		if noCapacity(req.Nodes) {
			// Perhaps not room: this member may fit no node at all.
			candidates = p.fitsNowhere(pl.ctx, v.Pod)
		}
		possible = p.possibleDomains(v.Tree, v.Pod, pl.nodes, need, req.MaxTier, wholeCluster)
	}
	if figures := p.deviceFigures(v.Tree, v.Pod, len(pl.names), req.MaxTier); figures != "" {
		unsat = &placement.Unsatisfiable{Message: unsat.Message + "; " + figures}
	}
	failures := 1
	if old := v.Failure; old != nil {
		failures = old.Failures + 1
	}
	now := time.Now()
	failure := &gangstate.PlanFailure{Tree: v.Tree.Generation(), Revision: v.Info.Revision, Made: now,
		Failures: failures, RetryAt: now.Add(backoff(failures)), Possible: possible}
	settled := p.gangs.Settle(pl.logger, p.handle, v, gangstate.Settlement{Failure: failure,
		Blockers: blockers(candidates), Status: func(blocked int) *fwk.Status { return failureStatus(v.Key, unsat, candidates, blocked) },
		RetryNow: p.treeMovedFrom(v.Tree)})
	if settled.Reported {
		p.blockReported(pl.logger, v.Key, v.Info, candidates[settled.Blocked])
	}
	p.events.Record(v.Info.PodGroup, v1.EventTypeWarning, EventTopologyUnsatisfiable, unsat.Message)
	pl.logger.V(2).Info("Gang cannot be planned", "podGroup", v.Key, "pending", len(pl.names), "simulatedNodes", pl.simulated, "duration", time.Since(pl.start), "reason", unsat.Message)
	return settled.Status
}

// failureStatus is a failed plan's answer once the gang's blocker is known (blocked: the
// index of the candidate that blocks it, -1 for none): that member fits no node, when the job
// cannot do without it; the planner's message with the first member that fits nowhere, when
// it can; the planner's message alone otherwise.
func failureStatus(key podgroup.Key, unsat *placement.Unsatisfiable, candidates []fitsNowhere, blocked int) *fwk.Status {
	switch {
	case blocked >= 0:
		// No domain can help while a member the job needs fits no node: say that, not the sums.
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, candidates[blocked].blocker.Message(key))
	case len(candidates) > 0:
		// The job could do without that member, but the plan failed for the others too: both
		// are the answer.
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, unsat.Message+"; "+candidates[0].spared(key))
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, unsat.Message)
}

// treeMovedFrom reports, when asked, whether the tree changed since the one a decision was
// made on: its listener (treeChanged) ran before the decision existed, and nothing else
// would retry the gang on the new tree.
func (p *NetworkTopologyAware) treeMovedFrom(tree *hypernode.Snapshot) func() bool {
	return func() bool { return p.cache.Snapshot().Generation() != tree.Generation() }
}

// newPlan is the gang's plan from the planner's result.
func (p *NetworkTopologyAware) newPlan(pl *planning) *gangstate.Plan {
	v, req, result := pl.v, pl.req, pl.result
	plan := &gangstate.Plan{
		LastUsed:     time.Now(),
		Domain:       result.Domain,
		Tier:         result.Tier,
		PodLeaf:      result.PodLeaf,
		PodNode:      placement.AssignNodes(req, result),
		Deferred:     sets.New(pl.deferred...),
		LeafInfos:    map[string]*hypernode.HyperNodeInfo{},
		LeafNodes:    map[string]sets.Set[string]{},
		Promised:     map[string]int{},
		Reserved:     sets.New[string](),
		PlacedByLeaf: map[string]int{},
		Relocated:    map[string]string{},
		WaitsForRoom: len(result.PodLeaf) == 0 && len(pl.deferred) > 0,
		RoomEpoch:    pl.epoch,
		Made:         time.Now(),
		Generation:   v.Tree.Generation(),
		Revision:     v.Info.Revision,
	}
	if plan.WaitsForRoom {
		plan.RoomArea = roomArea(v.Tree, pl.placedNodes, req.MaxTier, req.Soft)
	}
	for leaf, pods := range result.LeafPods {
		plan.Promised[leaf] = len(pods)
		leafInfo, _ := v.Tree.HyperNode(leaf)
		plan.LeafInfos[leaf] = leafInfo
		if leaf == placement.LooseLeaf {
			plan.LeafNodes[leaf] = sets.New(placement.LooseNodes(v.Tree, req.Nodes)...)
			continue
		}
		plan.LeafNodes[leaf] = sets.New(leafInfo.Nodes...)
	}
	for _, n := range pl.placedNodes {
		leaf, ok := v.Tree.LeafOf(n)
		if !ok {
			leaf = placement.LooseLeaf
		}
		plan.PlacedByLeaf[leaf]++
	}
	return plan
}

// planned nominates the members of the gang's new plan on their nodes and records it; the
// gang's held members, or else the others it places, are activated.
func (p *NetworkTopologyAware) planned(pl *planning) (*gangstate.Plan, *fwk.Status) {
	v, result := pl.v, pl.result
	if len(result.PodLeaf) > 0 {
		// A plan that places nobody (every pending member left out) is not a placement.
		metrics.ObservePlacement(result.Tier, pl.req.Soft)
	}
	plan := p.newPlan(pl)
	pending := make(map[string]*v1.Pod, len(v.Gang.Pending))
	for _, m := range v.Gang.Pending {
		pending[m.Pod.Name] = m.Pod
	}
	// Nominated before it is recorded: nobody else sees the plan yet.
	p.nominate(pl.logger, plan, plan.PodNode, pending)
	// Members refused before this plan (its constraint could not be served, or a plan that
	// placed nobody) wait in the queue for an event; Gang's Permit activates them only when a
	// round starts to wait, and a member allowed at once (the job runs already) starts none.
	var others []*v1.Pod
	if len(result.PodLeaf) > 1 {
		for name := range result.PodLeaf {
			if other := pending[name]; other != nil && name != v.Pod.Name {
				others = append(others, other)
			}
		}
	}
	s := gangstate.Settlement{Plan: plan, Others: others}
	if plan.WaitsForRoom {
		s.RetryNow = p.treeMovedFrom(v.Tree)
	}
	// The plan it replaced (none unless one was made since Begin dropped the old) is
	// withdrawn; its promises may have kept another gang out.
	p.dropped(pl.logger, p.gangs.Settle(pl.logger, p.handle, v, s).Replaced)
	p.announce(pl, plan)
	if len(pl.yielded) > 0 {
		// The yielding gangs' reservations are released asynchronously; the members retry on
		// their deletion, and reuse this plan. Unresolvable: per-pod preemption must not
		// evict anybody for a gang member, and the mark keeps GangPreemption (whose
		// simulation still sees the yielding reservations) and Gang's PostFilter out.
		gangstate.MarkYielded(pl.state)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
			"gang %s: waiting members of lower-precedence gang(s) %s were rejected to make room in %s; retrying", v.Key, strings.Join(pl.yielded, ", "), result.Domain))
	}
	return plan, nil
}

// announce records the plan's Event and log line.
func (p *NetworkTopologyAware) announce(pl *planning, plan *gangstate.Plan) {
	v, result := pl.v, pl.result
	leaves := make([]string, 0, len(result.LeafPods))
	for leaf := range result.LeafPods {
		leaves = append(leaves, leaf)
	}
	sort.Strings(leaves)
	if len(result.PodLeaf) > 0 {
		msg := fmt.Sprintf("gang %s planned in %s (tier %d): %d pending members over leaves %v", v.Key, result.Domain, result.Tier, len(result.PodLeaf), leaves)
		p.events.Record(v.Info.PodGroup, v1.EventTypeNormal, EventPlanned, msg)
	}
	// V(2): once per gang (not per member), and the benchmark harness reads the duration.
	pl.logger.V(2).Info("Gang planned", "podGroup", v.Key, "domain", result.Domain, "tier", result.Tier, "pending", len(result.PodLeaf), "deferred", len(pl.deferred), "leaves", leaves, "simulatedNodes", pl.simulated, "duration", time.Since(pl.start), "yielded", pl.yielded, "preemptedRoom", pl.room)
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
