package networktopology

import (
	"math"
	"slices"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
)

// The normal-pod score of a node is sum_t w_t * binpack(HyperNode of tier t holding the node,
// with the pod added) / sum_t w_t, 1 for a tier where no HyperNode holds the node
// (docs/design.md, "Topology placement").
//
// PreScore (prepare) recomputes the bin-pack value of the HyperNodes whose sums changed since
// the previous pod, or of every HyperNode when the request differs from the previous pod's,
// then adds up the values along the leaf path of each node kube-scheduler is about to score,
// in one pass; Score reads the node's result. Consecutive pods of one shape so cost O(depth)
// per placed pod and O(depth) per scored node: nothing per pod that grows with the cluster.
// One pass in PreScore rather than a lookup per Score call: the node-to-leaf lookup of a node
// found in kube-scheduler's list right after one found before reads memory already in the CPU
// cache (nodeList), which Score calls, spread over workers, would not (docs/benchmarks.md).
//
// Score reads the table of results without the lock. That is safe because only prepare
// writes it, and kube-scheduler runs one pod's PreScore and Score in order, in its single
// scheduling goroutine, before the next pod's PreScore.

// normalScores scores one pod's nodes.
type normalScores struct {
	byNode *nodeTable[int32]
}

// prepare makes the bin-pack values current for a pod requesting req and scores nodes (the
// nodes kube-scheduler scores for it); list is the scheduler's node list, whose leaves it
// keeps.
func (u *usageCache) prepare(tree *hypernode.Snapshot, list, nodes []fwk.NodeInfo, req []int64, resourceWeights []float64) *normalScores {
	u.mu.Lock()
	treeChanged := u.syncTreeLocked(tree)
	if treeChanged || !u.leafOf.holds(list) {
		// Nodes were added or removed (kube-scheduler then builds a new list) or the tree
		// changed: O(nodes), rarely.
		u.leafOf.reset(list, func(ni *framework.NodeInfo) int32 {
			if leaf := u.leafOfLocked(ni.Node().Name); leaf != nil {
				return leaf.index
			}
			return -1
		})
		clear(u.scores.slots) // nor the previous list's NodeInfos here
	}
	if !slices.Equal(req, u.lastReq) {
		u.lastReq = append(u.lastReq[:0], req...)
		for _, s := range u.sums {
			u.markDirtyLocked(s)
		}
	}
	reqF := toFloats(req, nil)
	var used, alloc []float64
	for _, s := range u.dirty {
		used, alloc = toFloats(s.used, used), toFloats(s.alloc, alloc)
		s.binPack = placement.BinPackScore(used, alloc, reqF, 1, resourceWeights)
		if s.leaf != nil {
			s.leaf.ownBinPack = s.binPack
		}
		s.dirty = false
	}
	u.dirty = u.dirty[:0]
	// Events may add leaves (appending to leafList) once the lock is released; the leaves
	// up to here keep their paths and weights (only prepare writes their memos).
	totalWeight, leaves := u.totalWeight, u.leafList
	u.mu.Unlock()

	// The bin-pack values, the memos and the tables are written only by prepare, in the
	// scheduling goroutine: no lock is needed to read them here.
	if u.epoch++; u.epoch == 0 {
		for _, l := range leaves {
			l.memoEpoch = 0
			if l.upper != nil {
				l.upper.memoEpoch = 0
			}
		}
		u.epoch = 1
	}
	u.scores.reset(len(nodes))
	for _, n := range nodes {
		ni, _ := n.(*framework.NodeInfo)
		index, ok := u.leafOf.get(ni)
		if !ok {
			continue // not in the scheduler's list: Score reports it
		}
		var score int32
		switch {
		case totalWeight == 0:
		case index < 0:
			score = int32(fwk.MaxScore) // no leaf: every tier scores 1
		default:
			score = leaves[index].score(u.epoch, totalWeight)
		}
		u.scores.set(ni, score)
	}
	return &normalScores{byNode: &u.scores}
}

// score is the score of the leaf's nodes, computed once per pod (epoch) from the leaf's own
// fields and its upper path's sum, which its siblings share.
func (l *leafUsage) score(epoch uint32, totalWeight float64) int32 {
	if l.memoEpoch != epoch {
		total := l.base + l.ownWeight*l.ownBinPack
		if l.upper != nil {
			total += l.upper.sum(epoch)
		}
		l.memo, l.memoEpoch = int32(math.Round(float64(fwk.MaxScore)*total/totalWeight)), epoch
	}
	return l.memo
}

// sum is the weighted sum of the bin-pack values along the upper path, once per pod.
func (up *upperUsage) sum(epoch uint32) float64 {
	if up.memoEpoch != epoch {
		total := 0.0
		for i, s := range up.path {
			total += up.weights[i] * s.binPack
		}
		up.memo, up.memoEpoch = total, epoch
	}
	return up.memo
}

// score is the node's score; ok is false for a node that prepare did not score.
func (n *normalScores) score(ni fwk.NodeInfo) (int64, bool) {
	score, ok := n.byNode.get(ni)
	return int64(score), ok
}

// tierWeights are the weights of the tiers present, lowest first: fading^rank, rank 0 for the
// lowest tier. By rank rather than by tier number, so that tier 0 and gaps between tier numbers
// need no special case; a fading above 1 is scaled down from the top so no weight overflows.
func tierWeights(n int, fading float64) []float64 {
	w := make([]float64, n)
	for rank := range w {
		if fading <= 1 {
			w[rank] = math.Pow(fading, float64(rank)) // 0^0 = 1: fading 0 keeps the lowest tier
		} else {
			w[rank] = math.Pow(1/fading, float64(n-1-rank))
		}
	}
	return w
}

func toFloats(in []int64, buf []float64) []float64 {
	buf = buf[:0]
	for _, v := range in {
		buf = append(buf, float64(v))
	}
	return buf
}
