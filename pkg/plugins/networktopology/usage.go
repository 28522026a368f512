package networktopology

import (
	"fmt"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/informerutil"
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
	// uppers are the parts of leaf paths above the leaf, shared by the leaves of one parent
	// (and tier rank).
	uppers map[upperKey]*upperUsage
	// dirty are the HyperNodes whose sums changed since the last prepare.
	dirty []*hyperNodeUsage

	// What prepare keeps between pods (normalscore.go): the tier weights of the tree, the
	// request the bin-pack values are for, the leaf of every NodeInfo of the scheduler's
	// node list, and the table it scores a pod's nodes into.
	fading      float64
	totalWeight float64
	lastReq     []int64
	leafOf      nodeList[int32] // index in leafList, -1 for a node no leaf holds
	scores      nodeTable[int32]
	// leafList are the leaves of tree, by index.
	leafList []*leafUsage
	// epoch numbers the prepared pods: a leaf's memo of another epoch is stale.
	epoch uint32
}

type podUsage struct {
	node string
	req  []int64
	// generation is the pod's metadata.generation when req was read: a pod's requests change
	// only with its spec (a resize), so an update of the same generation on the same node
	// needs no recount.
	generation int64
}

type nodeUsage struct {
	// exists: the Node object is known. Pods can arrive before their node and stay after it;
	// they count only while it exists, as in kube-scheduler's snapshot.
	exists bool
	pods   int
	used   []int64
	alloc  []int64
	// devUsed and devTotal are the node's DRA devices counted as the weighted resources
	// (devices.Inventory.Amounts), nil when it has none: on a resource the node does not
	// list as allocatable they stand for its allocatable and its pods' requests.
	devUsed, devTotal []int64
	// leaf is the node's leaf in the cache's tree, nil when no leaf holds it.
	leaf *leafUsage
}

// effective is what a node adds to its HyperNodes' sums: its requests and allocatable, with
// its devices in place of both on a resource only DRA provides there.
func (n *nodeUsage) effective() (used, alloc []int64) {
	if n.devTotal == nil {
		return n.used, n.alloc
	}
	used, alloc = slices.Clone(n.used), slices.Clone(n.alloc)
	for i := range alloc {
		if alloc[i] == 0 && n.devTotal[i] > 0 {
			used[i], alloc[i] = n.devUsed[i], n.devTotal[i]
		}
	}
	return used, alloc
}

// hyperNodeUsage is the sum over a HyperNode's nodes.
type hyperNodeUsage struct {
	used, alloc []int64
	dirty       bool
	// binPack is the bin-pack score of the HyperNode with the last prepared request added.
	// Only prepare writes it, and reads it after releasing the lock (normalscore.go).
	binPack float64
	// leaf is the leaf whose own sums these are (nil for a HyperNode that holds no nodes):
	// prepare copies binPack into it.
	leaf *leafUsage
}

// leafUsage is a leaf's path to the root, resolved once per tree so that events and scores
// walk pointers rather than look up names.
type leafUsage struct {
	// path: the sums of the leaf and its ancestors (the virtual root excluded), which events
	// update; base: the weights of the tiers with no HyperNode on the path (they score 1).
	path  []*hyperNodeUsage
	base  float64
	index int32
	// What the score reads (normalscore.go): the weight and bin-pack value of the leaf's own
	// sums (path[0]), kept in the leaf so that its first score of a pod reads one cold cache
	// line; and the rest of the path, shared with the leaf's siblings and summed once per pod.
	ownWeight  float64
	ownBinPack float64
	upper      *upperUsage
	// memo is the score of the leaf's nodes for the pod of memoEpoch.
	memo      int32
	memoEpoch uint32
}

// upperUsage is path[1:] of the leaves under one parent whose own tier has the same rank:
// those leaves share its weights, so its weighted sum is computed once per pod.
type upperUsage struct {
	path      []*hyperNodeUsage
	weights   []float64
	memo      float64
	memoEpoch uint32
}

type upperKey struct {
	parent string
	rank   int
}

func newUsageCache(resources []v1.ResourceName, fading float64) *usageCache {
	return &usageCache{
		resources: resources,
		fading:    fading,
		pods:      map[types.UID]podUsage{},
		nodes:     map[string]*nodeUsage{},
		sums:      map[string]*hyperNodeUsage{},
		leaves:    map[string]*leafUsage{},
		uppers:    map[upperKey]*upperUsage{},
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
			if !u.counted(pod) {
				u.setPod(pod.UID, pod.Generation, pod.Spec.NodeName, u.podRequest(pod))
			}
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

// counted reports whether the pod is counted on its node as it is now (same generation).
func (u *usageCache) counted(pod *v1.Pod) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	old, ok := u.pods[pod.UID]
	return ok && old.node == pod.Spec.NodeName && old.generation == pod.Generation
}

// setPod records that pod uid (of the given generation) uses req on node, assumed or bound;
// a repeat is a no-op.
func (u *usageCache) setPod(uid types.UID, generation int64, node string, req []int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if old, ok := u.pods[uid]; ok {
		if old.node == node && slices.Equal(old.req, req) {
			u.pods[uid] = podUsage{node: node, req: old.req, generation: generation}
			return
		}
		u.addUsedLocked(old.node, old.req, -1)
	}
	u.pods[uid] = podUsage{node: node, req: req, generation: generation}
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
	if n.exists && n.devTotal != nil {
		u.changeLocked(n, func() {
			for i := range req {
				n.used[i] += sign * req[i]
			}
		})
		return
	}
	for i := range req {
		n.used[i] += sign * req[i]
	}
	if n.exists {
		u.addToPathLocked(n.leaf, req, n.alloc, false, sign)
	}
	u.dropIfEmptyLocked(name, n)
}

// changeLocked applies change to a node, taking its whole contribution out of the sums
// before and putting it back after: a node with devices, whose requests count only on the
// resources its devices do not stand for.
func (u *usageCache) changeLocked(n *nodeUsage, change func()) {
	if n.exists {
		used, alloc := n.effective()
		u.addToPathLocked(n.leaf, used, alloc, true, -1)
	}
	change()
	if n.exists {
		used, alloc := n.effective()
		u.addToPathLocked(n.leaf, used, alloc, true, 1)
	}
}

// setDevices records a node's devices as the weighted resources, used and total.
func (u *usageCache) setDevices(name string, used, total []int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := u.nodeLocked(name)
	if !slices.ContainsFunc(total, func(v int64) bool { return v != 0 }) {
		used, total = nil, nil
	}
	if slices.Equal(n.devUsed, used) && slices.Equal(n.devTotal, total) {
		return
	}
	u.changeLocked(n, func() { n.devUsed, n.devTotal = used, total })
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
		used, old := n.effective()
		u.addToPathLocked(n.leaf, used, old, true, -1)
	}
	n.exists, n.alloc = true, alloc
	used, eff := n.effective()
	u.addToPathLocked(n.leaf, used, eff, true, 1)
}

func (u *usageCache) removeNode(name string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	n, ok := u.nodes[name]
	if !ok || !n.exists {
		return
	}
	used, alloc := n.effective()
	u.addToPathLocked(n.leaf, used, alloc, true, -1)
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
	if !n.exists && n.pods == 0 && n.devTotal == nil {
		delete(u.nodes, name)
	}
}

// addToPathLocked adds a node's used, on the resources its alloc lists (placement.
// BinPackScore: a GPU provided through DRA on some nodes and by a device plugin on others
// counts only where it is allocatable), and alloc too if withAlloc, times sign, to every
// HyperNode holding a node of leaf: O(depth).
func (u *usageCache) addToPathLocked(leaf *leafUsage, used, alloc []int64, withAlloc bool, sign int64) {
	if leaf == nil {
		return
	}
	for _, s := range leaf.path {
		u.markDirtyLocked(s)
		for i := range used {
			if alloc[i] != 0 {
				s.used[i] += sign * used[i]
			}
		}
		if withAlloc {
			for i := range alloc {
				s.alloc[i] += sign * alloc[i]
			}
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
	l := &leafUsage{index: int32(len(u.leafList))}
	u.leafList = append(u.leafList, l)
	tiers := u.tree.Tiers()
	weights := tierWeights(len(tiers), u.fading)
	covered := make([]bool, len(tiers))
	var pathWeights []float64 // the tier weight of each HyperNode on the path
	key := upperKey{rank: -1}
	for h := name; h != "" && h != hypernode.VirtualRootName; {
		info, ok := u.tree.HyperNode(h)
		if !ok {
			break
		}
		s := u.sums[h]
		if s == nil {
			s = &hyperNodeUsage{used: make([]int64, len(u.resources)), alloc: make([]int64, len(u.resources))}
			u.sums[h] = s
			u.markDirtyLocked(s)
		}
		w := 0.0
		rank := slices.Index(tiers, info.Tier)
		if rank >= 0 && !covered[rank] {
			w, covered[rank] = weights[rank], true
		}
		if len(l.path) == 0 {
			// The leaf's own sums: dirty, so that the next prepare copies their bin-pack
			// value into the leaf.
			s.leaf, l.ownWeight = l, w
			u.markDirtyLocked(s)
			key = upperKey{parent: info.Parent, rank: rank}
		}
		l.path = append(l.path, s)
		pathWeights = append(pathWeights, w)
		h = info.Parent
	}
	for rank, c := range covered {
		if !c {
			l.base += weights[rank]
		}
	}
	if len(l.path) > 1 {
		l.upper = u.uppers[key]
		if l.upper == nil {
			// The same parent and the same covered rank below it: the same weights above.
			l.upper = &upperUsage{path: l.path[1:], weights: pathWeights[1:]}
			u.uppers[key] = l.upper
		}
	}
	u.leaves[name] = l
	return l
}

func (u *usageCache) markDirtyLocked(s *hyperNodeUsage) {
	if !s.dirty {
		s.dirty = true
		u.dirty = append(u.dirty, s)
	}
}

// syncTreeLocked rebuilds the sums when the tree changed: O(nodes x depth), once per tree
// generation, not per pod. It reports whether it did.
func (u *usageCache) syncTreeLocked(tree *hypernode.Snapshot) bool {
	if u.tree != nil && u.tree.Generation() == tree.Generation() {
		return false
	}
	u.tree = tree
	u.sums = make(map[string]*hyperNodeUsage, len(u.sums))
	u.leaves = make(map[string]*leafUsage, len(u.leaves))
	u.uppers = make(map[upperKey]*upperUsage, len(u.uppers))
	u.leafList = nil
	u.dirty = u.dirty[:0]
	u.totalWeight = 0
	for _, w := range tierWeights(len(tree.Tiers()), u.fading) {
		u.totalWeight += w
	}
	for name, n := range u.nodes {
		n.leaf = u.leafOfLocked(name)
		if n.exists {
			used, alloc := n.effective()
			u.addToPathLocked(n.leaf, used, alloc, true, 1)
		}
	}
	return true
}
