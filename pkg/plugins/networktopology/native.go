package networktopology

import (
	"context"
	"errors"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/helper"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// Native pod groups (scheduling.k8s.io, gates GenericWorkload and
// TopologyAwareWorkloadScheduling) are placed by kube-scheduler's pod-group cycle: it asks the
// profile's PlacementGenerate plugin for candidate node sets, simulates the whole group in
// every one (no early exit), and PlacementScore plugins pick among the feasible ones. This
// plugin generates the planner's choice, so that the framework simulates one placement, not
// one per HyperNode (docs/design.md, "Native pod groups").

// retryPlacements bounds the placements generated for a group whose last placements all
// failed in the framework's simulation (something the capacity count does not see, such as
// affinity between members): the planner's leaves, its whole domain, then the other allowed
// domains, lowest tier and tightest first.
const retryPlacements = 8

// labelPlacements is how many domains of a foreign topology key a first attempt generates:
// their capacities are bounds, not simulations.
const labelPlacements = 4

// nativeStateKey holds, in the pod-group cycle state, what GeneratePlacements knew of each
// placement it generated, for ScorePlacement.
const nativeStateKey fwk.StateKey = "PlacementGenerate" + Name

// generated is what GeneratePlacements knew of its placements: each one's position in
// generation order (the planner's choice first), the tree they were made on and, on a first
// attempt (one placement), each pending member's planned node, to which PreFilter narrows
// it: the framework then filters and scores one node per member, not every node of the
// placement for every member (1,000 members over 1,000 nodes: a million Filter calls).
type generated struct {
	rank    map[*fwk.Placement]int
	tree    *hypernode.Snapshot
	podNode map[string]string
}

func (g *generated) Clone() fwk.StateData { return g }

var (
	_ fwk.PlacementGeneratePlugin = &NetworkTopologyAware{}
	_ fwk.PlacementScorePlugin    = &NetworkTopologyAware{}
)

// GeneratePlacements returns the candidate node sets of a native pod group inside
// parentPlacement: the nodes of the leaves the planner chose, after a failed attempt also the
// wider candidates (retryPlacements). A group that no allowed domain can hold gets the
// planner's explanation and no placement.
func (p *NetworkTopologyAware) GeneratePlacements(ctx context.Context, state fwk.PodGroupCycleState, pgi fwk.PodGroupInfo, parent *fwk.Placement) (*fwk.GeneratePlacementsResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	pending := pgi.GetUnscheduledPods()
	if len(pending) == 0 {
		return &fwk.GeneratePlacementsResult{Placements: []*fwk.Placement{parent}}, nil
	}
	tree, err := p.ready(ctx)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	n := NativeOf(pgi)
	placed, err := ScheduledMembers(p.handle, pgi)
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("%s: %w", n, err))
	}
	retry := p.attempts.begin(pgi.GetKey(), pending)
	var out []*fwk.Placement
	var podNode map[string]string
	if key, ok := n.ForeignKey(); ok {
		out, err = p.labelPlacements(n, key, pending, placed, parent, retry)
	} else {
		out, podNode, err = p.treePlacements(ctx, tree, n, pending, placed, parent, retry)
	}
	if err != nil {
		p.attempts.forget(pgi.GetKey())
		gangstate.NoPlacementMark.Set(state)
		var unsat *placement.Unsatisfiable
		if errors.As(err, &unsat) {
			// Unschedulable, not unresolvable: PodGroupPostFilter (preemption) may make room.
			return nil, fwk.NewStatus(fwk.Unschedulable, unsat.Message)
		}
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	g := &generated{rank: map[*fwk.Placement]int{}, tree: tree}
	if !retry {
		g.podNode = podNode
	}
	names := make([]string, len(out))
	for i, pl := range out {
		g.rank[pl], names[i] = i, pl.Name
	}
	state.Write(nativeStateKey, g)
	logger.V(2).Info("Placements generated for native pod group", "podGroup", n.Key, "pending", len(pending), "placed", len(placed), "retry", retry, "placements", names)
	return &fwk.GeneratePlacementsResult{Placements: out}, nil
}

// NativeOf reads what a native pod group (or composite pod group) says about its placement.
func NativeOf(pgi fwk.PodGroupInfo) podgroup.Native {
	if pg := pgi.GetPodGroup(); pg != nil {
		return podgroup.NativeOf(pg)
	}
	n := podgroup.Native{Key: podgroup.Key{Namespace: pgi.GetNamespace(), Name: pgi.GetName()}}
	if cpg := pgi.GetCompositePodGroup(); cpg != nil {
		n.Annotations = cpg.Annotations
		if c := cpg.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
			n.TopologyKey = c.Topology[0].Key
		}
	}
	return n
}

// ScheduledMembers are a native group's members already bound or assumed, as the scheduler's
// snapshot has them.
func ScheduledMembers(handle fwk.Handle, pgi fwk.PodGroupInfo) ([]*v1.Pod, error) {
	key := fwk.PodGroupKey(pgi.GetNamespace(), pgi.GetName())
	if pgi.GetType() == fwk.CompositePodGroupKeyType {
		key = fwk.CompositePodGroupKey(pgi.GetNamespace(), pgi.GetName())
	}
	var out []*v1.Pod
	for s, err := range helper.GetPodGroupStates(handle.SnapshotSharedLister(), key) {
		if err != nil {
			return nil, err
		}
		out = append(out, s.ScheduledPods()...)
	}
	return out, nil
}

// treePlacements plans the group in the HyperNode tree, as a gang of the classic path is
// planned, and turns the plan into placements.
func (p *NetworkTopologyAware) treePlacements(ctx context.Context, tree *hypernode.Snapshot, n podgroup.Native, pending, placed []*v1.Pod, parent *fwk.Placement, retry bool) ([]*fwk.Placement, map[string]string, error) {
	gang := podgroup.NativeGang(n, append(append([]*v1.Pod(nil), placed...), pending...), p.registry.DefaultTopology())
	if err := errors.Join(gang.Info.TopologyErr, gang.Info.SubGroupErr); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", n, err)
	}
	req, err := placement.GangRequest(tree, gang)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", n, err)
	}
	pl := &planning{ctx: ctx, logger: klog.FromContext(ctx), nodes: parent.Nodes, shapes: shapesOf(gang.Pending),
		v: &gangstate.View{Key: n.Key, Pod: gang.Pending[0].Pod, Info: gang.Info, Tree: tree, Gang: gang}}
	simState, status := p.simulationState(ctx, pl.v.Pod)
	if !status.IsSuccess() {
		return nil, nil, status.AsError()
	}
	pl.simState = simState
	if len(pl.shapes) > 1 {
		if status := p.simulateShapes(ctx, pl.shapes); !status.IsSuccess() {
			return nil, nil, status.AsError()
		}
	}
	req.Strategy = placement.Strategy(p.args.CandidateScoringStrategy)
	req.PodRequest = p.podRequest(pl.v.Pod)
	req.Weights = p.weights
	pl.req = req
	err = p.search(pl)
	if err != nil {
		var plan *placement.Plan
		if plan, pl.req, _, err = placement.Fallback(pl.req, err, gang.Info, gang.SubGroups, len(placed)); err == nil {
			pl.result = plan
		}
	}
	if err != nil {
		var unsat *placement.Unsatisfiable
		if errors.As(err, &unsat) {
			return nil, nil, &placement.Unsatisfiable{Message: fmt.Sprintf("%s: %s", n, unsat.Message)}
		}
		return nil, nil, err
	}
	return p.placementsOf(pl.req, pl.result, parent, retry), placement.AssignNodes(pl.req, pl.result), nil
}

// placementsOf turns a plan into placements: the nodes of its leaves first; on a retry also
// its whole domain and the other allowed domains that could hold the group, lowest tier and
// smallest capacity first, the whole cluster last when the constraint allows it.
func (p *NetworkTopologyAware) placementsOf(req placement.Request, plan *placement.Plan, parent *fwk.Placement, retry bool) []*fwk.Placement {
	tree := req.Tree
	byName := make(map[string]fwk.NodeInfo, len(parent.Nodes))
	for _, ni := range parent.Nodes {
		if ni.Node() != nil {
			byName[ni.Node().Name] = ni
		}
	}
	var out []*fwk.Placement
	seen := sets.New[string]()
	add := func(name string, nodes []string) {
		if len(out) >= retryPlacements {
			return
		}
		infos := make([]fwk.NodeInfo, 0, len(nodes))
		for _, node := range nodes {
			if ni, ok := byName[node]; ok {
				infos = append(infos, ni)
			}
		}
		key := fmt.Sprint(len(infos), nodes)
		if len(infos) == 0 || seen.Has(key) {
			return
		}
		seen.Insert(key)
		out = append(out, &fwk.Placement{Name: name, Nodes: infos})
	}
	leaves := make([]string, 0, len(plan.LeafPods))
	for leaf := range plan.LeafPods {
		leaves = append(leaves, leaf)
	}
	sort.Strings(leaves)
	var leafNodes []string
	for _, leaf := range leaves {
		if leaf == placement.LooseLeaf {
			leafNodes = append(leafNodes, placement.LooseNodes(tree, req.Nodes)...)
			continue
		}
		leafNodes = append(leafNodes, tree.Nodes(leaf)...)
	}
	add(fmt.Sprintf("%s/leaves=%v", plan.Domain, leaves), leafNodes)
	if !retry {
		return out
	}
	add(plan.Domain, domainNodes(tree, plan.Domain, byName))
	capacities := placement.Capacities(req)
	common := placement.LowestCommon(tree, req.Placed)
	for _, tier := range tree.Tiers() {
		if tier > req.MaxTier {
			break
		}
		cands := append([]string(nil), tree.Candidates(tier)...)
		sort.SliceStable(cands, func(i, j int) bool { return capacities[cands[i]] < capacities[cands[j]] })
		for _, name := range cands {
			if capacities[name] >= len(req.Pending) && holdsDomain(tree, name, common) {
				add(name, tree.Nodes(name))
			}
		}
	}
	if placement.SpansCluster(tree, req.Soft, req.MaxTier) {
		add(hypernode.VirtualRootName, domainNodes(tree, hypernode.VirtualRootName, byName))
	}
	return out
}

// domainNodes are the nodes of a domain; the whole cluster's are every node of the parent.
func domainNodes(tree *hypernode.Snapshot, domain string, byName map[string]fwk.NodeInfo) []string {
	if domain != hypernode.VirtualRootName {
		return tree.Nodes(domain)
	}
	out := make([]string, 0, len(byName))
	for name := range byName {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// holdsDomain reports whether HyperNode name holds the domain common of the placed members
// ("" for none placed).
func holdsDomain(tree *hypernode.Snapshot, name, common string) bool {
	switch common {
	case "":
		return true
	case hypernode.VirtualRootName:
		return false
	}
	lca, ok := tree.LCA(name, common)
	return ok && lca == name
}

// nativeNode is the node GeneratePlacements planned a native group's member on, in the
// member's pod-group cycle, and its leaf ("" outside one, or without a planned node).
func nativeNode(state fwk.CycleState, pod *v1.Pod) (node, leaf string) {
	if pod.Spec.SchedulingGroup == nil {
		return "", ""
	}
	g := generatedOf(state.GetPodGroupSchedulingCycle())
	if g == nil {
		return "", ""
	}
	node = g.podNode[pod.Name]
	leaf, _ = g.tree.LeafOf(node)
	return node, leaf
}
