package networktopology

import (
	"context"
	"fmt"

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

// preFilterState is the planned node set of a constrained member: its leaf's nodes, or the
// one node a plan of members of several shapes chose. While PostFilter looks for another
// node of the gang's domain (relocate.go), relocating lets every node through.
type preFilterState struct {
	leaf       string
	node       string
	nodes      sets.Set[string]
	relocating bool
}

func (s *preFilterState) Clone() fwk.StateData { return s }

// PreFilter plans the member's gang (once per gang) and narrows the pod to its planned node.
// It takes the gang's view once (gangstate.Tracker.Begin: the gang's data and state, judged
// on this cycle's tree), decides from it, and tells the gang state what it decided in one
// step (Settle).
func (p *NetworkTopologyAware) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	// Every pod after a waiting gang in queue order keeps off the room held for it, in its
	// cycle and in every simulation of it (holds.go).
	held := p.readHolds(state, pod)
	if gangstate.SimulationMark.In(state) {
		return nil, skipUnless(held)
	}
	if node, leaf := nativeNode(state, pod); node != "" {
		// A native group's member in its pod-group cycle goes where GeneratePlacements
		// planned it, as a PodGroup's member does (native.go); Filter enforces it too, since
		// kube-scheduler tries a pod's nominated node before the PreFilter result.
		nodes := sets.New(node)
		state.Write(preFilterStateKey, &preFilterState{leaf: leaf, node: node, nodes: nodes})
		return &fwk.PreFilterResult{NodeNames: nodes}, nil
	}
	v, err := p.gangs.Begin(ctx, state, pod, p.cycle)
	switch {
	case err != nil:
		return nil, fwk.AsStatus(err)
	case v == nil:
		return nil, skipUnless(held)
	}
	p.dropped(klog.FromContext(ctx), v.Dropped)
	var plan *gangstate.Plan
	switch v.Answer {
	case gangstate.ConstraintRefusedAnswer:
		return nil, p.refuseConstraint(klog.FromContext(ctx), v, constraintProblem(v.Tree, v.Key, v.Info))
	case gangstate.FailureAnswers:
		// Another member retries for the gang: this one waits out of the queue.
		metrics.PlanReusesTotal.WithLabelValues(metrics.ResultNoDomain).Inc()
		p.gangs.Settle(klog.FromContext(ctx), p.handle, v, gangstate.Settlement{Held: true})
		return nil, v.Failure.Status
	case gangstate.PlanAnswers:
		plan = v.Plan
		metrics.PlanReusesTotal.WithLabelValues(reuseResult(plan, pod)).Inc()
	default:
		var status *fwk.Status
		if plan, status = p.planGang(ctx, state, v, nodes); !status.IsSuccess() {
			return nil, status
		}
	}
	return p.narrow(ctx, state, v, plan)
}

// reuseResult is the metrics result of a member answered from its gang's plan.
func reuseResult(plan *gangstate.Plan, pod *v1.Pod) string {
	if plan.Deferred.Has(pod.Name) {
		return metrics.ResultNoRoom
	}
	return metrics.ResultPlaced
}

// narrow narrows the member to its planned node, or refuses it when the plan leaves it out
// for lack of room.
func (p *NetworkTopologyAware) narrow(ctx context.Context, state fwk.CycleState, v *gangstate.View, plan *gangstate.Plan) (*fwk.PreFilterResult, *fwk.Status) {
	pod, key := v.Pod, v.Key
	if plan.Deferred.Has(pod.Name) {
		gangstate.MarkDeferred(state)
		if sub, ok := podgroup.SubGroupOf(v.Info.SubGroupPolicies, pod); ok {
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
				"gang %s: sub-group %s does not fit next to the job's other sub-groups in %s now", key, sub.ID, plan.Domain))
		}
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
			"gang %s: a member beyond minMember %d; no room for it next to the others in %s now, it waits for room", key, v.Info.MinMember(), plan.Domain))
	}
	if p.relocations.Load() > 0 {
		// A relocated member comes back: nominated on its new node until it reserves.
		p.renominate(klog.FromContext(ctx), key, pod, true)
	}
	leaf := plan.PodLeaf[pod.Name]
	nodeSet := plan.LeafNodes[leaf]
	node := plan.PodNode[pod.Name]
	if node != "" {
		nodeSet = sets.New(node)
	}
	klog.FromContext(ctx).V(4).Info("Gang member narrowed to its planned node", "pod", klog.KObj(pod), "podGroup", key, "domain", plan.Domain, "tier", plan.Tier, "leaf", leaf, "node", node)
	state.Write(preFilterStateKey, &preFilterState{leaf: leaf, node: node, nodes: nodeSet})
	return &fwk.PreFilterResult{NodeNames: nodeSet}, nil
}

// skipUnless skips this plugin's Filter for the pod unless holds apply to it.
func skipUnless(held bool) *fwk.Status {
	if held {
		return nil
	}
	return fwk.NewStatus(fwk.Skip)
}

// PreFilterExtensions returns nil: the planned set does not depend on other pods.
func (p *NetworkTopologyAware) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter keeps a constrained member inside its planned leaf, and every pod off the room held
// for the waiting gangs that come before it in queue order.
func (p *NetworkTopologyAware) Filter(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s := readState[*preFilterState](state, preFilterStateKey)
	if s == nil || ignoringPlan(state) {
		// Not planned (no constraint), a capacity simulation (ours: the plan must not veto
		// it), or GangPreemption's, which chooses the domain itself.
		return heldBy(state, nodeInfo)
	}
	if !s.relocating && !s.nodes.Has(nodeInfo.Node().Name) {
		if s.node != "" {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("node is not %s, the node planned for this gang member in HyperNode %s", s.node, s.leaf))
		}
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("node is outside the HyperNode %s planned for this gang member", s.leaf))
	}
	return heldBy(state, nodeInfo)
}

// PostFilter moves a member that fits nowhere in its planned leaf (or node) to a node of its
// gang's domain that has room for it now (relocate.go): the gang keeps its plan and its
// waiting members. Without such a node, it drops the plan of the member's gang, so the
// next attempt plans again from the cluster as it is. When nothing in its planned leaf could
// ever take it (every node refused it for a reason no departure fixes), the member is tried
// on every node of the cluster: if it fits none, it blocks its gang (see gangstate.Blocker)
// instead of making its siblings reserve and be rejected again and again.
func (p *NetworkTopologyAware) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	v := gangstate.ViewOf(state)
	if v == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	key, info := v.Key, v.Info
	logger := klog.FromContext(ctx)
	planned := readState[*preFilterState](state, preFilterStateKey)
	if planned == nil {
		// Refused at PreFilter: no plan (it failed), or a plan this member waits for (its
		// sub-group is deferred, the room is being released): nothing to drop.
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	switch r, outcome := p.relocate(ctx, state, pod, key, info, planned); outcome {
	case moved:
		return p.relocated(ctx, pod, key, info, planned, r)
	case noRoom:
		metrics.MemberRelocationsTotal.WithLabelValues(metrics.ResultNoRoom).Inc()
	}
	again := p.dropRefusedPlan(logger, key)
	if resolvable, err := statuses.NodesForStatusCode(p.handle.SnapshotSharedLister().NodeInfos(), fwk.Unschedulable); err == nil && len(resolvable) == 0 && p.blockIfFitsNowhere(ctx, pod, key, info) {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if again {
		// What refused the member (devices allocated, pods bound since the plan) is in the
		// state the next plan reads, and nothing else may change to wake the gang: it comes
		// back at once (in flight: kube-scheduler requeues it on return).
		logger.V(2).Info("Gang member found no room at its planned place; the gang plans again at once", "pod", klog.KObj(pod), "podGroup", key, "leaf", planned.leaf, "node", planned.node)
		gangstate.Activate(logger, p.handle, pod)
	}
	return nil, fwk.NewStatus(fwk.Unschedulable)
}

// dropRefusedPlan drops the plan of a member's gang that has no room for the member at its
// planned place nor anywhere else in its domain, and reports whether the gang plans again at
// once (gangstate.Tracker.DropRefusedPlanLocked).
func (p *NetworkTopologyAware) dropRefusedPlan(logger klog.Logger, key podgroup.Key) bool {
	p.gangs.Lock()
	old, again := p.gangs.DropRefusedPlanLocked(key)
	p.gangs.Unlock()
	p.dropped(logger, old)
	return again
}

// blockIfFitsNowhere makes the member its gang's blocker when no node of the cluster can ever
// take it and the job cannot do without it (see gangstate.Tracker.SetBlocked). It reports
// whether the member fits no node.
func (p *NetworkTopologyAware) blockIfFitsNowhere(ctx context.Context, pod *v1.Pod, key podgroup.Key, info podgroup.Info) bool {
	candidates := p.fitsNowhere(ctx, pod)
	for _, c := range candidates {
		if blocked, reported := p.gangs.SetBlocked(key, c.blocker); blocked && reported && info.PodGroup != nil {
			p.blockReported(klog.FromContext(ctx), key, info, c)
		}
	}
	return len(candidates) > 0
}

// fitsNowhere is a member that no node of the cluster can ever take, and why.
type fitsNowhere struct {
	blocker gangstate.Blocker
}

// fitsNowhere returns the member as a candidate blocker when no node of the cluster can ever
// take it (none otherwise).
func (p *NetworkTopologyAware) fitsNowhere(ctx context.Context, pod *v1.Pod) []fitsNowhere {
	reasons, fits := p.fitsSomewhere(ctx, pod)
	if fits {
		return nil
	}
	return []fitsNowhere{{blocker: gangstate.Blocker{UID: pod.UID, Name: pod.Name, Reason: reasons}}}
}

// spared says that the member fits no node, but the job can run without it (and the others
// known to fit nowhere).
func (c fitsNowhere) spared(key podgroup.Key) string {
	return fmt.Sprintf("gang %s: member %s fits no node (%s); the gang can run without it", key, c.blocker.Name, c.blocker.Reason)
}

// blockers are the candidates' blockers, in order.
func blockers(candidates []fitsNowhere) []gangstate.Blocker {
	out := make([]gangstate.Blocker, len(candidates))
	for i, c := range candidates {
		out[i] = c.blocker
	}
	return out
}

// blockReported reports, once, that the member blocks its gang.
func (p *NetworkTopologyAware) blockReported(logger klog.Logger, key podgroup.Key, info podgroup.Info, c fitsNowhere) {
	p.events.Record(info.PodGroup, v1.EventTypeWarning, gangstate.EventGangBlocked, c.blocker.Message(key))
	logger.V(2).Info("Gang blocked by a member that fits no node", "podGroup", key, "pod", c.blocker.Name, "reason", c.blocker.Reason)
}

// constraintProblem is why the gang's constraint cannot be planned at all ("" when it can): an
// invalid annotation, or a tier the tree lacks. Only its PodGroup or the tree can fix that.
func constraintProblem(tree *hypernode.Snapshot, key podgroup.Key, info podgroup.Info) string {
	if info.TopologyErr != nil {
		return fmt.Sprintf("PodGroup %s: %v", key, info.TopologyErr)
	}
	if _, err := placement.MaxTier(tree, placement.JobTopology(info)); err != nil {
		return fmt.Sprintf("PodGroup %s: %v", key, placement.JobConstraintError(info, err))
	}
	return ""
}
