package networktopology

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// podShape is one shape of a gang's pending members (podgroup.Shape) with its simulation
// state, filled by simulateShapes.
type podShape struct {
	podgroup.Shape
	state fwk.CycleState
}

// shapesOf groups the pending members by shape (podgroup.ShapesOf).
func shapesOf(members []podgroup.Member) []*podShape {
	var out []*podShape
	for _, s := range podgroup.ShapesOf(members) {
		out = append(out, &podShape{Shape: s})
	}
	return out
}

// simulateShapes prepares the simulation state of every shape.
func (p *NetworkTopologyAware) simulateShapes(ctx context.Context, shapes []*podShape) *fwk.Status {
	for _, s := range shapes {
		state, status := p.simulationState(ctx, s.Rep)
		if !status.IsSuccess() {
			return status
		}
		s.state = state
	}
	return nil
}

// shapeCapacities is nodeCapacities for a gang whose members differ in shape: each shape is
// simulated on every node; the Fitter answers for a node that holds planned members by adding
// them to a copy of it before counting. A node's Capacity is its largest shape capacity.
func (p *NetworkTopologyAware) shapeCapacities(ctx context.Context, shapes []*podShape, nodes []fwk.NodeInfo) (map[string]placement.Node, []placement.Shape, placement.Fitter) {
	out, planShapes := p.shapeNodes(shapes, func(s *podShape) map[string]placement.Node {
		return p.nodeCapacities(ctx, s.state, s.Rep, nodes, nil, len(s.Members))
	})
	return out, planShapes, p.shapeFitter(ctx, shapes, nodes)
}

// shapeBounds is shapeCapacities with capacityBounds: no plugin runs until planLazily
// simulates the nodes it needs (simulateShapeNodes).
func (p *NetworkTopologyAware) shapeBounds(ctx context.Context, shapes []*podShape, nodes []fwk.NodeInfo) (map[string]placement.Node, []placement.Shape, placement.Fitter) {
	out, planShapes := p.shapeNodes(shapes, func(s *podShape) map[string]placement.Node {
		return p.capacityBounds(s.Rep, nodes, len(s.Members))
	})
	return out, planShapes, p.shapeFitter(ctx, shapes, nodes)
}

// simulateShapeNodes replaces the bounds of the nodes in only with every shape's simulated
// capacity.
func (p *NetworkTopologyAware) simulateShapeNodes(ctx context.Context, shapes []*podShape, nodes []fwk.NodeInfo, only sets.Set[string], req *placement.Request) {
	for i, s := range shapes {
		for name, node := range p.nodeCapacities(ctx, s.state, s.Rep, nodes, only, len(s.Members)) {
			req.Shapes[i].Capacity[name] = node.Capacity
		}
	}
	for name := range only {
		node := req.Nodes[name]
		node.Capacity = 0
		for _, shape := range req.Shapes {
			node.Capacity = max(node.Capacity, shape.Capacity[name])
		}
		req.Nodes[name] = node
	}
}

// shapeNodes computes each shape's capacities with capacities: the planner's view of the
// shapes, and the nodes with their largest shape capacity.
func (p *NetworkTopologyAware) shapeNodes(shapes []*podShape, capacities func(*podShape) map[string]placement.Node) (map[string]placement.Node, []placement.Shape) {
	out := map[string]placement.Node{}
	planShapes := make([]placement.Shape, len(shapes))
	for i, s := range shapes {
		caps := capacities(s)
		planShapes[i] = placement.Shape{Name: s.Name, Members: s.Members, Capacity: make(map[string]int, len(caps)), Request: p.podRequest(s.Rep)}
		for name, node := range caps {
			planShapes[i].Capacity[name] = node.Capacity
			if old, ok := out[name]; ok {
				node.Capacity = max(node.Capacity, old.Capacity)
			}
			out[name] = node
		}
	}
	return out, planShapes
}

// shapeFitter answers how many members of a shape fit on a node next to planned members
// (FitNextTo).
func (p *NetworkTopologyAware) shapeFitter(ctx context.Context, shapes []*podShape, nodes []fwk.NodeInfo) placement.Fitter {
	byName := make(map[string]fwk.NodeInfo, len(nodes))
	for _, ni := range nodes {
		if ni.Node() != nil {
			byName[ni.Node().Name] = ni
		}
	}
	reps := make([]*v1.Pod, len(shapes))
	for i, s := range shapes {
		reps[i] = s.Rep
	}
	return func(node string, planned []int, shape, limit int) int {
		ni, ok := byName[node]
		if !ok {
			return 0
		}
		return FitNextTo(ctx, p.handle, p.filterWithOthersNominated, reps, shapes[shape].state, ni, planned, shape, limit)
	}
}

// FitNextTo counts the members of shape reps[shape] (state: its simulation state) that fit on
// ni next to planned[i] members of each shape reps[i] planned there before, at most limit: it
// adds those to copies of ni and state, then counts (CountFits). GangPreemption's planner
// answers with it too.
func FitNextTo(ctx context.Context, handle fwk.Handle, filter Filter, reps []*v1.Pod, state fwk.CycleState, ni fwk.NodeInfo, planned []int, shape, limit int) int {
	node := ni.Node().Name
	trial, state := ni.Snapshot(), state.Clone()
	for i, count := range planned {
		for k := range count {
			pi, err := SimulatedPod(reps[i], node, fmt.Sprintf("planned-%d", k))
			if err != nil {
				klog.FromContext(ctx).V(5).Info("Could not simulate a planned gang member", "node", node, "err", err)
				return 0
			}
			trial.AddPodInfo(pi)
			if st := handle.RunPreFilterExtensionAddPod(ctx, state, reps[shape], pi, trial); !st.IsSuccess() {
				return 0
			}
		}
	}
	return CountFits(ctx, handle, filter, state, reps[shape], trial, limit, true)
}

// SimulatedPod is a copy of pod on node, named apart, for capacity simulations (GangPreemption
// simulates with it too).
func SimulatedPod(pod *v1.Pod, node, suffix string) (fwk.PodInfo, error) {
	c := pod.DeepCopy()
	c.Name = pod.Name + "-" + suffix
	c.UID = k8stypes.UID(string(pod.UID) + "-" + suffix)
	c.Spec.NodeName = node
	devices.MarkCopy(c)
	return framework.NewPodInfo(c)
}

// possibleShapeDomains is possibleDomains for a gang of several shapes: the HyperNodes that
// could hold, if they were empty, need of the pending members whatever their shapes.
func (p *NetworkTopologyAware) possibleShapeDomains(tree *hypernode.Snapshot, shapes []*podShape, nodes []fwk.NodeInfo, need, maxTier int, wholeCluster bool) sets.Set[string] {
	pending := 0
	for _, s := range shapes {
		pending += len(s.Members)
	}
	var out sets.Set[string]
	for _, s := range shapes {
		// Of the need members, at least this many are of this shape.
		demand := max(need-(pending-len(s.Members)), 0)
		d := p.possibleDomains(tree, s.Rep, nodes, demand, maxTier, wholeCluster)
		if out == nil {
			out = d
		} else {
			out = out.Intersection(d)
		}
	}
	return out
}
