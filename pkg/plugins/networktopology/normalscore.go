package networktopology

import (
	"math"
	"slices"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
)

// The normal-pod score of a node is sum_t w_t * binpack(HyperNode of tier t holding the node,
// with the pod added) / sum_t w_t, 1 for a tier where no HyperNode holds the node
// (docs/design.md, "Topology placement").
//
// PreScore (prepare) recomputes the bin-pack value of the HyperNodes whose sums changed since
// the previous pod, or of every HyperNode when the request differs from the previous pod's;
// Score adds up the values along the node's leaf path. Consecutive pods of one shape so cost
// O(depth) per placed pod in PreScore and O(depth) per scored node in Score: nothing per pod
// that grows with the cluster.
//
// Score reads binPack and the leaf map without the lock. That is safe because only prepare
// writes them, and kube-scheduler runs one pod's PreScore and Score in order, in its single
// scheduling goroutine, before the next pod's PreScore; events change only the sums, which
// Score never reads.

// normalScores scores one pod's nodes.
type normalScores struct {
	leafOf      map[fwk.NodeInfo]*leafUsage
	totalWeight float64
}

// prepare makes the bin-pack values current for a pod requesting req, and the leaf of every
// NodeInfo of list (the scheduler's node list) known.
func (u *usageCache) prepare(tree *hypernode.Snapshot, list []fwk.NodeInfo, req []int64, resourceWeights []float64) *normalScores {
	u.mu.Lock()
	defer u.mu.Unlock()
	treeChanged := u.syncTreeLocked(tree)
	if treeChanged || !sameList(list, u.leafOfList, u.leafOfLen) {
		// Nodes were added or removed (kube-scheduler then builds a new list) or the tree
		// changed: O(nodes), rarely. A new map, so that a Score still reading the old one is
		// safe.
		u.leafOf = make(map[fwk.NodeInfo]*leafUsage, len(list))
		for _, ni := range list {
			u.leafOf[ni] = u.leafOfLocked(ni.Node().Name)
		}
		u.leafOfList, u.leafOfLen = nil, len(list)
		if len(list) > 0 {
			u.leafOfList = &list[0]
		}
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
		s.dirty = false
	}
	u.dirty = u.dirty[:0]
	return &normalScores{leafOf: u.leafOf, totalWeight: u.totalWeight}
}

// score is the node's score; ok is false for a node that was not in the prepared list.
func (n *normalScores) score(ni fwk.NodeInfo) (int64, bool) {
	leaf, ok := n.leafOf[ni]
	if !ok || n.totalWeight == 0 {
		return 0, ok
	}
	if leaf == nil {
		return fwk.MaxScore, true // every tier scores 1
	}
	total := leaf.base
	for i, s := range leaf.path {
		total += leaf.weights[i] * s.binPack
	}
	return int64(math.Round(float64(fwk.MaxScore) * total / n.totalWeight)), true
}

// sameList reports whether list is the slice seen before: kube-scheduler allocates a new one
// whenever nodes are added or removed.
func sameList(list []fwk.NodeInfo, first *fwk.NodeInfo, n int) bool {
	if len(list) != n {
		return false
	}
	return n == 0 || &list[0] == first
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
