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
func (p *NetworkTopologyAware) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	key, info, ok := p.constraint(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if _, err := state.Read(simulationKey); err == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if err := p.cache.WaitForSync(ctx); err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("waiting for the HyperNode cache: %w", err))
	}
	if err := p.registry.WaitForSync(ctx); err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("waiting for the PodGroup registry: %w", err))
	}
	tree := p.cache.Snapshot()
	if msg := constraintProblem(tree, key, info); msg != "" {
		return nil, p.refuseConstraint(klog.FromContext(ctx), key, pod, info, tree, msg)
	}

	// This member's attempt is running: the next cluster event may requeue the gang again.
	p.gangs.RequeueDone(key)
	plan := p.currentPlan(key, tree, pod.Name, info.Revision)
	if plan != nil {
		result := metrics.ResultPlaced
		if plan.Deferred.Has(pod.Name) {
			result = metrics.ResultNoRoom
		}
		metrics.PlanReusesTotal.WithLabelValues(result).Inc()
	} else {
		if status := p.reuseFailure(klog.FromContext(ctx), key, info, tree); status != nil {
			// Another member retries for the gang: this one waits out of the queue.
			p.gangs.SendToRetryGate(klog.FromContext(ctx), p.handle, pod)
			return nil, status
		}
		var status *fwk.Status
		plan, status = p.makePlan(ctx, state, pod, key, info, tree, nodes)
		if !status.IsSuccess() {
			return nil, status
		}
	}
	if plan.Deferred.Has(pod.Name) {
		gangstate.MarkDeferred(state)
		if sub, ok := podgroup.SubGroupOf(info.SubGroupPolicies, pod); ok {
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
				"gang %s: sub-group %s does not fit next to the job's other sub-groups in %s now", key, sub.ID, plan.Domain))
		}
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
			"gang %s: a member beyond minMember %d; no room for it next to the others in %s now, it waits for room", key, info.MinMember(), plan.Domain))
	}
	if p.relocations.Load() > 0 {
		// A relocated member comes back: nominated on its new node until it reserves.
		p.renominate(klog.FromContext(ctx), pod, true)
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
	if !s.relocating && !s.nodes.Has(nodeInfo.Node().Name) {
		if s.node != "" {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("node is not %s, the node planned for this gang member in HyperNode %s", s.node, s.leaf))
		}
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("node is outside the HyperNode %s planned for this gang member", s.leaf))
	}
	return nil
}

// PostFilter moves a member that fits nowhere in its planned leaf (or node) to a node of its
// gang's domain that has room for it now (relocate.go): the gang keeps its plan and its
// waiting members. Without such a node, it drops the plan of the member's gang, so the
// next attempt plans again from the cluster as it is. When nothing in its planned leaf could
// ever take it (every node refused it for a reason no departure fixes), the member is tried
// on every node of the cluster: if it fits none, it blocks its gang (see gangstate.Blocker)
// instead of making its siblings reserve and be rejected again and again.
func (p *NetworkTopologyAware) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	key, info, ok := p.constraint(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
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
	p.invalidate(logger, key)
	if resolvable, err := statuses.NodesForStatusCode(p.handle.SnapshotSharedLister().NodeInfos(), fwk.Unschedulable); err != nil || len(resolvable) > 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	p.blockIfFitsNowhere(ctx, pod, key, info)
	return nil, fwk.NewStatus(fwk.Unschedulable)
}

// blockIfFitsNowhere makes the member its gang's blocker when no node of the cluster can ever
// take it and the job cannot do without it (see podgroup.Registry.SetBlocked), and returns
// what to tell the member ("" when it fits somewhere) and whether the gang is blocked.
func (p *NetworkTopologyAware) blockIfFitsNowhere(ctx context.Context, pod *v1.Pod, key podgroup.Key, info podgroup.Info) (msg string, gangBlocked bool) {
	reasons, fits := p.fitsSomewhere(ctx, pod)
	if fits {
		return "", false
	}
	b := gangstate.Blocker{UID: pod.UID, Name: pod.Name, Reason: reasons}
	blocked, reported := p.gangs.SetBlocked(key, b)
	if !blocked {
		// The job can do without it (and the others known to fit nowhere).
		return fmt.Sprintf("gang %s: member %s fits no node (%s); the gang can run without it", key, pod.Name, reasons), false
	}
	if reported && info.PodGroup != nil {
		p.events.Record(info.PodGroup, v1.EventTypeWarning, gangstate.EventGangBlocked, b.Message(key))
		klog.FromContext(ctx).V(2).Info("Gang blocked by a member that fits no node", "podGroup", key, "pod", klog.KObj(pod), "reason", reasons)
	}
	return b.Message(key), true
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
