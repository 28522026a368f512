package networktopology

import (
	"fmt"
	"math"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/informerutil"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
)

// usageCache keeps, for every HyperNode, the sums of the weighted resources requested by the
// pods on its nodes and allocatable on its nodes (seed 000's resource cache). Pod and node
// events and the plugin's own Reserve/Unreserve update it in O(depth), so the normal-pod
// score costs O(depth) per scored node instead of a walk over the cluster per pod.
//
// It follows what kube-scheduler's cache counts: assigned pods that are not terminal (the
// scheduler's pod informer drops terminal pods), plus pods assumed by Reserve until they are
// bound or unreserved. Sums are integers (milli-CPU, bytes): float sums of 10,000 nodes'
// memory would lose precision as pods come and go.
type usageCache struct {
	resources []v1.ResourceName

	mu    sync.Mutex
	pods  map[types.UID]podUsage
	nodes map[string]*nodeUsage
	// tree is the snapshot the sums and leaves are built on; a newer tree rebuilds them.
	tree   *hypernode.Snapshot
	sums   map[string]*hyperNodeUsage
	leaves map[string]*leafUsage
	// leafOfNodeInfo remembers the leaf (nil: none) of the scheduler's NodeInfo objects, which
	// keep their identity for the life of a node: a pointer key costs far less than hashing
	// and comparing node names, one cache miss per scored node instead of three.
	leafOfNodeInfo map[fwk.NodeInfo]*leafUsage
	// epoch numbers the leafScores calls, so each leaf is scored once per call.
	epoch uint64
}

type podUsage struct {
	node string
	req  []int64
}

type nodeUsage struct {
	// exists: the Node object is known. Pods can arrive before their node and stay after it;
	// they count only while it exists, as in kube-scheduler's snapshot.
	exists bool
	pods   int
	used   []int64
	alloc  []int64
	// leaf is the node's leaf in the cache's tree, nil when no leaf holds it.
	leaf *leafUsage
}

// hyperNodeUsage is the sum over a HyperNode's nodes.
type hyperNodeUsage struct {
	used, alloc []int64
}

// leafUsage is a leaf's path to the root, resolved once per tree so that events and scores
// walk pointers rather than look up names.
type leafUsage struct {
	// path: the sums of the leaf and its ancestors (the virtual root excluded); ranks: the
	// rank of each one's tier among the tree's tiers.
	path  []*hyperNodeUsage
	ranks []int
	// score of the leaf in leafScores call number stamp.
	stamp uint64
	score int64
}

func newUsageCache(resources []v1.ResourceName) *usageCache {
	return &usageCache{
		resources: resources,
		pods:      map[types.UID]podUsage{},
		nodes:     map[string]*nodeUsage{},
		sums:      map[string]*hyperNodeUsage{},
		leaves:    map[string]*leafUsage{},

		leafOfNodeInfo: map[fwk.NodeInfo]*leafUsage{},
	}
}

// watch registers the cache on the scheduler's pod and node informers.
func (u *usageCache) watch(factory informers.SharedInformerFactory) error {
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(informerutil.Handlers(
		func(_, pod *v1.Pod) {
			if pod.Spec.NodeName == "" || terminal(pod) {
				// Unassigned pods count only once assumed; a terminal pod frees its node.
				if terminal(pod) {
					u.removePod(pod.UID)
				}
				return
			}
			u.setPod(pod.UID, pod.Spec.NodeName, u.podRequest(pod))
		},
		func(pod *v1.Pod) { u.removePod(pod.UID) })); err != nil {
		return fmt.Errorf("watching pods for HyperNode usage: %w", err)
	}
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(informerutil.Handlers(
		func(_, node *v1.Node) { u.setNode(node.Name, u.allocatable(node)) },
		func(node *v1.Node) { u.removeNode(node.Name) })); err != nil {
		return fmt.Errorf("watching nodes for HyperNode usage: %w", err)
	}
	return nil
}

// podRequest returns a pod's requests of the weighted resources, the way kube-scheduler's
// NodeInfo counts them (overhead included, the larger of spec and status during a resize).
func (u *usageCache) podRequest(pod *v1.Pod) []int64 {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{UseStatusResources: true})
	return u.quantities(reqs)
}

func (u *usageCache) allocatable(node *v1.Node) []int64 {
	return u.quantities(node.Status.Allocatable)
}

func (u *usageCache) quantities(list v1.ResourceList) []int64 {
	out := make([]int64, len(u.resources))
	for i, r := range u.resources {
		q := list[r]
		if r == v1.ResourceCPU {
			out[i] = q.MilliValue()
		} else {
			out[i] = q.Value()
		}
	}
	return out
}

// setPod records that pod uid uses req on node (assumed or bound); a repeat is a no-op.
func (u *usageCache) setPod(uid types.UID, node string, req []int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if old, ok := u.pods[uid]; ok {
		if old.node == node && slices.Equal(old.req, req) {
			return
		}
		u.addUsedLocked(old.node, old.req, -1)
	}
	u.pods[uid] = podUsage{node: node, req: req}
	u.addUsedLocked(node, req, 1)
}

func (u *usageCache) removePod(uid types.UID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if old, ok := u.pods[uid]; ok {
		delete(u.pods, uid)
		u.addUsedLocked(old.node, old.req, -1)
	}
}

func (u *usageCache) addUsedLocked(name string, req []int64, sign int64) {
	n := u.nodeLocked(name)
	n.pods += int(sign)
	for i := range req {
		n.used[i] += sign * req[i]
	}
	if n.exists {
		addToPath(n.leaf, req, nil, sign)
	}
	u.dropIfEmptyLocked(name, n)
}

func (u *usageCache) setNode(name string, alloc []int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := u.nodeLocked(name)
	if n.exists {
		if slices.Equal(n.alloc, alloc) {
			return
		}
		addToPath(n.leaf, n.used, n.alloc, -1)
	}
	n.exists, n.alloc = true, alloc
	addToPath(n.leaf, n.used, n.alloc, 1)
}

func (u *usageCache) removeNode(name string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	n, ok := u.nodes[name]
	if !ok || !n.exists {
		return
	}
	addToPath(n.leaf, n.used, n.alloc, -1)
	n.exists, n.alloc = false, make([]int64, len(u.resources))
	u.dropIfEmptyLocked(name, n)
}

func (u *usageCache) nodeLocked(name string) *nodeUsage {
	n, ok := u.nodes[name]
	if !ok {
		n = &nodeUsage{used: make([]int64, len(u.resources)), alloc: make([]int64, len(u.resources))}
		n.leaf = u.leafOfLocked(name)
		u.nodes[name] = n
	}
	return n
}

func (u *usageCache) dropIfEmptyLocked(name string, n *nodeUsage) {
	if !n.exists && n.pods == 0 {
		delete(u.nodes, name)
	}
}

// addToPath adds used and alloc (either may be nil), times sign, to every HyperNode holding a
// node of leaf: O(depth).
func addToPath(leaf *leafUsage, used, alloc []int64, sign int64) {
	if leaf == nil {
		return
	}
	for _, s := range leaf.path {
		for i := range used {
			s.used[i] += sign * used[i]
		}
		for i := range alloc {
			s.alloc[i] += sign * alloc[i]
		}
	}
}

// leafOfLocked returns the leaf holding node in the cache's tree, nil if none.
func (u *usageCache) leafOfLocked(node string) *leafUsage {
	if u.tree == nil {
		return nil
	}
	name, ok := u.tree.LeafOf(node)
	if !ok {
		return nil
	}
	if l, ok := u.leaves[name]; ok {
		return l
	}
	l := &leafUsage{}
	tiers := u.tree.Tiers()
	for h := name; h != "" && h != hypernode.VirtualRootName; {
		info, ok := u.tree.HyperNode(h)
		if !ok {
			break
		}
		s := u.sums[h]
		if s == nil {
			s = &hyperNodeUsage{used: make([]int64, len(u.resources)), alloc: make([]int64, len(u.resources))}
			u.sums[h] = s
		}
		l.path = append(l.path, s)
		l.ranks = append(l.ranks, slices.Index(tiers, info.Tier))
		h = info.Parent
	}
	u.leaves[name] = l
	return l
}

// syncTreeLocked rebuilds the sums when the tree changed: O(nodes x depth), once per tree
// generation, not per pod.
func (u *usageCache) syncTreeLocked(tree *hypernode.Snapshot) {
	if u.tree != nil && u.tree.Generation() == tree.Generation() {
		return
	}
	u.tree = tree
	u.sums = make(map[string]*hyperNodeUsage, len(u.sums))
	u.leaves = make(map[string]*leafUsage, len(u.leaves))
	u.leafOfNodeInfo = make(map[fwk.NodeInfo]*leafUsage, len(u.leafOfNodeInfo))
	for name, n := range u.nodes {
		n.leaf = u.leafOfLocked(name)
		if n.exists {
			addToPath(n.leaf, n.used, n.alloc, 1)
		}
	}
}

// nodeScores scores a pod requesting req on each of nodes: sum_t w_t * binpack(HyperNode of
// tier t holding the node) / sum_t w_t, 1 for a tier where no HyperNode holds the node
// (docs/design.md, "Topology placement"). O(depth) per distinct leaf, O(1) per node; it also
// returns the score of a node in no leaf.
func (u *usageCache) nodeScores(tree *hypernode.Snapshot, nodes []fwk.NodeInfo, req []int64, resourceWeights []float64, fading float64) (map[fwk.NodeInfo]int64, int64) {
	weights := tierWeights(len(tree.Tiers()), fading)
	perTier := make([]float64, len(weights))
	for i := range perTier {
		perTier[i] = 1
	}
	loose := weightedScore(perTier, weights)
	reqF := toFloats(req, nil)
	var used, alloc []float64

	u.mu.Lock()
	defer u.mu.Unlock()
	u.syncTreeLocked(tree)
	if len(u.leafOfNodeInfo) > 2*len(u.nodes)+1024 {
		// NodeInfos of deleted nodes outside every leaf: no tree change clears them.
		clear(u.leafOfNodeInfo)
	}
	u.epoch++
	out := make(map[fwk.NodeInfo]int64, len(nodes))
	for _, ni := range nodes {
		leaf, ok := u.leafOfNodeInfo[ni]
		if !ok {
			leaf = u.leafOfLocked(ni.Node().Name)
			u.leafOfNodeInfo[ni] = leaf
		}
		if leaf == nil {
			out[ni] = loose
			continue
		}
		if leaf.stamp != u.epoch {
			for i := range perTier {
				perTier[i] = 1
			}
			for i, sum := range leaf.path {
				if rank := leaf.ranks[i]; rank >= 0 {
					used, alloc = toFloats(sum.used, used), toFloats(sum.alloc, alloc)
					perTier[rank] = placement.BinPackScore(used, alloc, reqF, 1, resourceWeights)
				}
			}
			leaf.stamp, leaf.score = u.epoch, weightedScore(perTier, weights)
		}
		out[ni] = leaf.score
	}
	return out, loose
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

func weightedScore(scores, weights []float64) int64 {
	total, weightSum := 0.0, 0.0
	for i, w := range weights {
		total += w * scores[i]
		weightSum += w
	}
	if weightSum == 0 {
		return 0
	}
	return int64(math.Round(float64(fwk.MaxScore) * total / weightSum))
}

func toFloats(in []int64, buf []float64) []float64 {
	buf = buf[:0]
	for _, v := range in {
		buf = append(buf, float64(v))
	}
	return buf
}
