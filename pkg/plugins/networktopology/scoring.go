package networktopology

import (
	"context"
	"math"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
)

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

// scoreNormal: sum_t w_t * binpack(HyperNode of tier t holding the node) / sum_t w_t, with 1
// for a tier where no HyperNode holds the node (docs/design.md, "Topology placement").
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
	return int64(math.Round(float64(fwk.MaxScore) * total / weightSum))
}

// ScoreExtensions returns nil: scores are already in [0, MaxScore].
func (p *NetworkTopologyAware) ScoreExtensions() fwk.ScoreExtensions { return nil }
