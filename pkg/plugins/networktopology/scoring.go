package networktopology

import (
	"context"
	"fmt"
	"math"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
)

// preScoreState holds what Score needs for one pod.
type preScoreState struct {
	// cycle is the cycle state this was written to (see NetworkTopologyAware.lastPreScore),
	// by pointer: comparing the interfaces costs a runtime call per scored node.
	cycle *framework.CycleState
	tree  *hypernode.Snapshot
	// Constrained members: the HyperNode their gang occupies (placed members and plan), and
	// the number of placed members per leaf.
	reference    string
	placedByLeaf map[string]int
	members      int
	// Unconstrained pods: their scores, and the request they were computed for (Reserve
	// counts it).
	normal *normalScores
	req    []int64
}

func (s *preScoreState) Clone() fwk.StateData { return s }

// normalRequest is the request PreScore read for an unconstrained pod, nil otherwise.
func (s *preScoreState) normalRequest() []int64 {
	if s == nil {
		return nil
	}
	return s.req
}

// PreScore prepares the scores of one pod: O(leaves of its plan) for a gang member; for a pod
// without a constraint, O(depth) per HyperNode changed since the previous pod (normalscore.go),
// from the usage sums that events keep (usage.go): nothing that grows with the cluster.
func (p *NetworkTopologyAware) PreScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	tree := p.cache.Snapshot()
	s := &preScoreState{tree: tree}
	if v := gangstate.ViewOf(state); v != nil {
		key, info := v.Key, v.Info
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
		p.gangs.Lock()
		if plan := p.gangs.PlanLocked(key); plan != nil {
			for leaf, n := range plan.PlacedByLeaf {
				s.placedByLeaf[leaf] = n
			}
		}
		p.gangs.Unlock()
		p.writePreScore(state, s)
		return nil
	}
	if p.usageSums == nil || tree.Len() == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	list, err := p.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return fwk.AsStatus(err)
	}
	s.req = p.usageSums.podRequest(pod)
	s.normal = p.usageSums.prepare(tree, list, nodes, p.withDevices(pod, s.req), p.weights)
	p.writePreScore(state, s)
	return nil
}

func (p *NetworkTopologyAware) writePreScore(state fwk.CycleState, s *preScoreState) {
	s.cycle, _ = state.(*framework.CycleState)
	state.Write(preScoreStateKey, s)
	p.lastPreScore.Store(s)
}

// forgetPreScore lets go of state's PreScore state once the pod's scoring is over, so that
// the plugin does not keep the cycle (every plugin's state of it) alive until the next pod.
func (p *NetworkTopologyAware) forgetPreScore(state fwk.CycleState) {
	if s := p.lastPreScore.Load(); s != nil && sameCycle(s, state) {
		p.lastPreScore.CompareAndSwap(s, nil)
	}
}

// preScoreOf is what PreScore wrote to state: the latest one without CycleState's map lookup
// (Score asks once per scored node), else read from state.
func (p *NetworkTopologyAware) preScoreOf(state fwk.CycleState) *preScoreState {
	if s := p.lastPreScore.Load(); s != nil && sameCycle(s, state) {
		return s
	}
	return readState[*preScoreState](state, preScoreStateKey)
}

// sameCycle reports whether s was written to state (never for a CycleState that is not
// kube-scheduler's: the map lookup answers then).
func sameCycle(s *preScoreState, state fwk.CycleState) bool {
	cs, _ := state.(*framework.CycleState)
	return cs != nil && s.cycle == cs
}

// Score ranks a node for the pod.
func (p *NetworkTopologyAware) Score(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s := p.preScoreOf(state)
	if s == nil {
		return 0, nil
	}
	if s.normal == nil {
		return p.scoreMember(s, nodeInfo.Node().Name), nil
	}
	score, ok := s.normal.score(nodeInfo)
	if !ok {
		// PreScore saw the scheduler's node list of this cycle, which holds every node scored.
		return 0, fwk.AsStatus(fmt.Errorf("node %s is not in the scheduler's node list", nodeInfo.Node().Name))
	}
	return score, nil
}

// scoreMember: (maxTier - tier(LCA(leaf(node), reference))) / (maxTier - minTier), full in the
// reference leaf itself; 90% of the score, the other 10% the share of the gang already in the
// node's leaf (docs/design.md, "Topology placement").
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
	return int64(math.Round(float64(fwk.MaxScore) * (0.9*tierScore + 0.1*share)))
}

// ScoreExtensions returns nil: scores are already in [0, MaxScore].
func (p *NetworkTopologyAware) ScoreExtensions() fwk.ScoreExtensions { return nil }
