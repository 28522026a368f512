package networktopology

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
)

// ScorePlacement ranks a feasible placement of a native pod group by where its proposed
// assignments land: lower tier of their lowest common HyperNode first, then fewer leaves, then
// the order GeneratePlacements gave (the planner's choice by BinPack or LeastWaste first; last
// for a placement it did not generate). NormalizePlacementScore maps the ranks to
// kube-scheduler's score range.
func (p *NetworkTopologyAware) ScorePlacement(_ context.Context, state fwk.PlacementCycleState, pgi fwk.PodGroupInfo, a *fwk.PodGroupAssignments) (int64, *fwk.Status) {
	// A placement of this group scored: one was feasible, so its next cycle starts afresh.
	p.attempts.forget(pgi.GetKey())
	tree := p.cache.Snapshot()
	rank := retryPlacements
	if g := generatedOf(state.GetPodGroupSchedulingCycle()); g != nil {
		tree = g.tree
		if r, ok := g.rank[a.Placement]; ok {
			rank = r
		}
	}
	nodes := make([]string, len(a.ProposedAssignments))
	leaves := sets.New[string]()
	for i, pa := range a.ProposedAssignments {
		nodes[i] = pa.GetNodeName()
		leaf, ok := tree.LeafOf(nodes[i])
		if !ok {
			leaf = placement.LooseLeaf
		}
		leaves.Insert(leaf)
	}
	tier := tree.RootTier()
	if lca := placement.LowestCommon(tree, nodes); lca != hypernode.VirtualRootName {
		if info, ok := tree.HyperNode(lca); ok {
			tier = info.Tier
		}
	}
	// Lexicographic (tier, leaves, rank), negated: higher is better. Tiers and ranks are
	// small; a group uses at most as many leaves as it has members.
	return -(int64(tier)<<40 + int64(leaves.Len())<<20 + int64(rank)), nil
}

// PlacementScoreExtensions returns the normalization of the scores.
func (p *NetworkTopologyAware) PlacementScoreExtensions() fwk.PlacementScoreExtensions { return p }

// NormalizePlacementScore maps the raw scores to [MinScore, MaxScore] by rank, the best to
// MaxScore and the worst to MinScore, equal scores equal: scaling the raw values would merge
// the ranks of the leaves and of the order below a difference in tier.
func (p *NetworkTopologyAware) NormalizePlacementScore(_ context.Context, _ fwk.PodGroupCycleState, _ fwk.PodGroupInfo, scores []fwk.PlacementScore) *fwk.Status {
	distinct := make([]int64, 0, len(scores))
	for _, s := range scores {
		distinct = append(distinct, s.Score)
	}
	slices.Sort(distinct)
	distinct = slices.Compact(distinct)
	for i := range scores {
		if len(distinct) == 1 {
			scores[i].Score = fwk.MaxScore
			continue
		}
		r, _ := slices.BinarySearch(distinct, scores[i].Score)
		scores[i].Score = fwk.MinScore + int64(r)*(fwk.MaxScore-fwk.MinScore)/int64(len(distinct)-1)
	}
	return nil
}

// generatedOf returns what GeneratePlacements recorded in the pod-group cycle, or nil.
func generatedOf(state fwk.PodGroupCycleState) *generated {
	if state == nil {
		return nil
	}
	data, err := state.Read(nativeStateKey)
	if err != nil {
		return nil
	}
	g, _ := data.(*generated)
	return g
}

// attemptTTL drops the record of a group that has not been generated for since.
const attemptTTL = 10 * time.Minute

// nativeAttempts remembers, per native pod group (its entity key: a PodGroup and a
// CompositePodGroup may share a name), the pending members of its last generation. The same
// members pending again mean that cycle did not place them (none of its placements was
// feasible, or the group failed later): their next cycle gets the wider placements. After a
// success the pending members differ (members added later, a Job's replacement pods), and the
// group gets the planner's placement alone again. ScorePlacement forgets the record: a
// feasible placement was found.
type nativeAttempts struct {
	mu    sync.Mutex
	last  map[string]attempt
	swept time.Time
}

type attempt struct {
	at      time.Time
	pending string
}

// begin records a generation for the group and reports whether its previous one had the
// same pending members.
func (a *nativeAttempts) begin(key string, pending []*v1.Pod) bool {
	uids := make([]string, len(pending))
	for i, p := range pending {
		uids[i] = string(p.UID)
	}
	slices.Sort(uids)
	signature := strings.Join(uids, ",")
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	if a.last == nil {
		a.last = map[string]attempt{}
	}
	if now.Sub(a.swept) > time.Minute {
		for k, at := range a.last {
			if now.Sub(at.at) > attemptTTL {
				delete(a.last, k)
			}
		}
		a.swept = now
	}
	prev, seen := a.last[key]
	a.last[key] = attempt{at: now, pending: signature}
	return seen && prev.pending == signature
}

// forget drops the group's record: a placement was feasible, or none was generated.
func (a *nativeAttempts) forget(key string) {
	a.mu.Lock()
	delete(a.last, key)
	a.mu.Unlock()
}
