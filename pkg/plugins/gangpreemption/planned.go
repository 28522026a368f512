package gangpreemption

import (
	"context"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/networktopology"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// A gang whose members differ in shape, or that has sub-groups, fits a domain when the
// placement planner (the one NetworkTopologyAware plans with) finds a plan on the domain's
// node copies: counting members is not enough when shapes share nodes or a sub-group needs a
// domain of its own. A gang of one shape without sub-groups fits when the members that fit,
// node by node, add up to the members it needs (the planner's own answer for it).

// shapeSim is one pod shape of the members to place, with its simulation state.
type shapeSim struct {
	podgroup.Shape
	state fwk.CycleState
}

// planTest is the fit test of a gang of several shapes or with sub-groups.
type planTest struct {
	// req is the planning problem without node capacities: the members to place, the
	// sub-groups, the constraint.
	req    placement.Request
	shapes []shapeSim
	// info and states decide which sub-groups may be left out (RetryWithoutSubGroups).
	info   podgroup.Info
	states []podgroup.SubGroupState
}

// newPlanTest prepares the fit test of the gang's pending members: the first need of them in
// rank order (an elastic gang preempts for minMember, not for every member), or all of them
// when the gang has sub-groups.
func (pl *GangPreemption) newPlanTest(ctx context.Context, gang podgroup.Gang, tree *hypernode.Snapshot, need int) (*planTest, error) {
	req, err := placement.GangRequest(tree, gang)
	if err != nil {
		return nil, err
	}
	pending := gang.Pending
	if len(req.SubGroups) == 0 && need < len(pending) {
		pending = pending[:need]
		req.Pending = req.Pending[:need]
	}
	req.Strategy = placement.LeastWaste
	t := &planTest{req: req, info: gang.Info}
	for _, s := range podgroup.ShapesOf(pending) {
		state, status := networktopology.SimulationState(ctx, pl.handle, pl.devices, s.Rep)
		if !status.IsSuccess() {
			return nil, fmt.Errorf("simulating members of shape %s: %w", s.Name, status.AsError())
		}
		t.shapes = append(t.shapes, shapeSim{Shape: s, state: state})
	}
	if len(req.SubGroups) > 0 {
		t.states = gang.SubGroups
	}
	return t, nil
}

// count returns how many members of each shape fit on a node's copy, each shape alone.
func (t *planTest) count(ctx context.Context, s *simulation, views []view, ni fwk.NodeInfo) []int {
	out := make([]int, len(t.shapes))
	for i, sh := range t.shapes {
		out[i] = s.fitsOn(ctx, views[i].state, sh.Rep, ni, len(sh.Members))
	}
	return out
}

// plan plans the members on the node copies with the given counts, or says why not.
func (t *planTest) plan(ctx context.Context, s *simulation, views []view, counts map[string][]int, clones map[string]fwk.NodeInfo) (map[string]string, error) {
	req := t.req
	req.Nodes = make(map[string]placement.Node, len(counts))
	if len(t.shapes) > 1 {
		req.Shapes = make([]placement.Shape, len(t.shapes))
		for i, sh := range t.shapes {
			req.Shapes[i] = placement.Shape{Name: sh.Name, Members: sh.Members, Capacity: make(map[string]int, len(counts))}
		}
		req.Fit = t.fitter(ctx, s, views, clones)
	}
	for name, c := range counts {
		node := placement.Node{}
		for i, n := range c {
			node.Capacity = max(node.Capacity, n)
			if req.Shapes != nil {
				req.Shapes[i].Capacity[name] = n
			}
		}
		req.Nodes[name] = node
	}
	result, err := placement.Make(req)
	if err != nil && len(req.SubGroups) > 0 {
		result, req, _, err = placement.RetryWithoutSubGroups(req, err, t.info, t.states)
	}
	if err != nil {
		return nil, err
	}
	return placement.AssignNodes(req, result), nil
}

// fitter answers the planner for a node that members of several shapes share: it adds the
// ones planned there before to a copy of the node's copy, then counts.
func (t *planTest) fitter(ctx context.Context, s *simulation, views []view, clones map[string]fwk.NodeInfo) placement.Fitter {
	reps := make([]*v1.Pod, len(t.shapes))
	for i, sh := range t.shapes {
		reps[i] = sh.Rep
	}
	return func(node string, planned []int, shape, limit int) int {
		ni, ok := clones[node]
		if !ok {
			return 0
		}
		return networktopology.FitNextTo(ctx, s.pl.handle, s.pl.filter, reps, views[shape].state, ni, planned, shape, limit)
	}
}

// sortedNodes returns the names of the counted nodes, sorted.
func sortedNodes(counts map[string][]int) []string {
	names := make([]string, 0, len(counts))
	for name := range counts {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
