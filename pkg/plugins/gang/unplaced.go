package gang

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// freeRoom reads what the nodes of the cycle's snapshot offer a gang waiting for room
// (gangstate.Room): the free amount of each of the resources named, summed, with the requests
// of the gang's own reserved members added back (they are released with a failed round, so
// they are not room that others hold), and the nodes' fingerprint. O(nodes), when a gang
// without a topology constraint fails and in each cycle of its scout while it is held.
func (g *Gang) freeRoom(names []v1.ResourceName, ownReserved []*v1.Pod) gangstate.Room {
	room := gangstate.Room{Free: make(map[v1.ResourceName]int64, len(names))}
	for _, name := range names {
		room.Free[name] = 0
	}
	nodes, err := g.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return room
	}
	room.Nodes = g.fingerprints.sum(nodes)
	for _, ni := range nodes {
		alloc, used := ni.GetAllocatable(), ni.GetRequested()
		for name := range room.Free {
			room.Free[name] += podgroup.Amount(alloc, name) - podgroup.Amount(used, name)
		}
	}
	for _, p := range ownReserved {
		for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
			if _, ok := room.Free[name]; ok {
				room.Free[name] += podgroup.QuantityAmount(name, q)
			}
		}
	}
	return room
}

// requested names the resources the pod requests.
func requested(pod *v1.Pod) []v1.ResourceName {
	var names []v1.ResourceName
	for name, q := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
		if q.Sign() > 0 {
			names = append(names, name)
		}
	}
	return names
}

// nodeChangesKey carries the registry's node-change count at the start of a member's cycle
// (PreFilter) to its PostFilter, which records a failure (podgroup.MarkUnplaced).
const nodeChangesKey fwk.StateKey = "hypernode.dev/gang-node-changes"

type nodeChangesState uint64

func (n nodeChangesState) Clone() fwk.StateData { return n }

// nodeChangesAtStart reads the count PreFilter recorded, or the registry's count now when it
// recorded none.
func (g *Gang) nodeChangesAtStart(state fwk.CycleState) uint64 {
	v, err := state.Read(nodeChangesKey)
	if err != nil {
		return g.gangs.NodeChanges()
	}
	n, _ := v.(nodeChangesState)
	return uint64(n)
}

// nodeFingerprints keeps each node's podgroup.NodeFingerprint for the node object it was
// computed from: the scheduler's cache replaces the object only when the node changes, so a
// held scout's cycle hashes only the nodes that changed since the last one (hashing every
// label of 10,000 nodes costs tens of milliseconds).
type nodeFingerprints struct {
	mu     sync.Mutex
	byName map[string]nodeFingerprint
}

type nodeFingerprint struct {
	node  *v1.Node
	print uint64
}

// sum returns the sum of the nodes' fingerprints. Nodes gone since the last call are
// forgotten.
func (f *nodeFingerprints) sum(nodes []fwk.NodeInfo) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byName == nil {
		f.byName = make(map[string]nodeFingerprint, len(nodes))
	}
	var total uint64
	for _, ni := range nodes {
		node := ni.Node()
		if node == nil {
			continue
		}
		e, ok := f.byName[node.Name]
		if !ok || e.node != node {
			e = nodeFingerprint{node: node, print: podgroup.NodeFingerprint(node)}
			f.byName[node.Name] = e
		}
		total += e.print
	}
	if len(f.byName) > len(nodes) {
		// Nodes were deleted: keep only the current ones.
		current := make(map[string]nodeFingerprint, len(nodes))
		for _, ni := range nodes {
			if node := ni.Node(); node != nil {
				current[node.Name] = f.byName[node.Name]
			}
		}
		f.byName = current
	}
	return total
}
