package networktopology

import (
	"math/bits"
	"unsafe"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// nodeTable maps kube-scheduler's NodeInfos to values: an open-addressing table keyed by the
// NodeInfo pointer, so that a lookup mostly reads one cache line (a Go map of the same
// entries reads two or three). Hashing the address is sound
// because Go's collector does not move heap objects, and the keys keep the NodeInfos alive.
//
// Emptying it for the next pod (reset) bumps an epoch instead of clearing the slots: a slot
// of another epoch is empty.
type nodeTable[V any] struct {
	slots []nodeSlot[V]
	shift uint
	epoch uint32
}

type nodeSlot[V any] struct {
	ni    *framework.NodeInfo
	epoch uint32
	value V
}

// reset empties the table and makes room for n entries. Until the next reset, at most n
// distinct NodeInfos may be set: the probes end because a slot is always free.
func (t *nodeTable[V]) reset(n int) {
	// At most two thirds full: linear probing then reads about two slots per lookup.
	size := 1 << max(bits.Len(uint(n+n/2)), 4)
	if size > len(t.slots) {
		t.slots, t.shift, t.epoch = make([]nodeSlot[V], size), uint(64-bits.Len(uint(size-1))), 1
		return
	}
	t.epoch++
	if t.epoch == 0 {
		clear(t.slots)
		t.epoch = 1
	}
}

func (t *nodeTable[V]) start(ni *framework.NodeInfo) int {
	// Fibonacci hashing of the address.
	return int((uint64(uintptr(unsafe.Pointer(ni))) * 0x9E3779B97F4A7C15) >> t.shift)
}

// set stores v for ni; ni must not be nil, and the table must have been reset.
func (t *nodeTable[V]) set(ni *framework.NodeInfo, v V) {
	mask := len(t.slots) - 1
	for i := t.start(ni); ; i = (i + 1) & mask {
		if s := &t.slots[i]; s.epoch != t.epoch || s.ni == ni {
			*s = nodeSlot[V]{ni: ni, epoch: t.epoch, value: v}
			return
		}
	}
}

// get returns the value stored for ni; ok is false when there is none (also for a NodeInfo
// that is not kube-scheduler's).
func (t *nodeTable[V]) get(ni fwk.NodeInfo) (v V, ok bool) {
	p, _ := ni.(*framework.NodeInfo)
	if p == nil || len(t.slots) == 0 {
		return v, false
	}
	mask := len(t.slots) - 1
	for i := t.start(p); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.epoch != t.epoch {
			return v, false
		}
		if s.ni == p {
			return s.value, true
		}
	}
}

// listStreams is how many runs of consecutive nodes nodeList.get follows at once: as many as
// kube-scheduler's Filter workers (its default parallelism, 16) on a machine of that many cores.
const listStreams = 16

// nodeList holds a value for each node of kube-scheduler's node list, by position, and finds
// the position of a NodeInfo. kube-scheduler's Filter goes through the list in chunks of
// consecutive nodes, a few workers at a time, and lists the feasible nodes as they pass: most
// of a pod's scored nodes come right after a node scored shortly before. get therefore tries
// the slot after each of the last few positions it found, memory the previous finds brought
// into the CPU cache, before the table, whose lookup misses the cache for almost every node
// once a cycle's Filter has gone over hundreds of NodeInfos.
type nodeList[V any] struct {
	// first and length identify the list reset was given (holds).
	first    *fwk.NodeInfo
	length   int
	nodes    []*framework.NodeInfo
	values   []V
	position nodeTable[int32]
	// recent are the last positions found, most recent first.
	recent [listStreams]int32
}

// reset makes the list hold list's nodes, value(NodeInfo) each; NodeInfos that are not
// kube-scheduler's are left out.
func (l *nodeList[V]) reset(list []fwk.NodeInfo, value func(*framework.NodeInfo) V) {
	// Cleared, not only emptied: NodeInfos of the previous list are not kept alive.
	clear(l.nodes[:cap(l.nodes)])
	l.nodes, l.values = l.nodes[:0], l.values[:0]
	l.position.reset(len(list))
	clear(l.position.slots)
	for _, ni := range list {
		if p, ok := ni.(*framework.NodeInfo); ok {
			l.position.set(p, int32(len(l.nodes)))
			l.nodes = append(l.nodes, p)
			l.values = append(l.values, value(p))
		}
	}
	clear(l.recent[:])
	l.first, l.length = nil, len(list)
	if len(list) > 0 {
		l.first = &list[0]
	}
}

// holds reports whether list is the slice reset was given: kube-scheduler allocates a new one
// whenever nodes are added or removed.
func (l *nodeList[V]) holds(list []fwk.NodeInfo) bool {
	if len(list) != l.length {
		return false
	}
	return len(list) == 0 || &list[0] == l.first
}

// get returns the value held for p; ok is false for a node not in the list (and for nil, what
// a NodeInfo that is not kube-scheduler's asserts to).
func (l *nodeList[V]) get(p *framework.NodeInfo) (v V, ok bool) {
	if p == nil || len(l.nodes) == 0 {
		return v, false
	}
	for k, last := range l.recent {
		next := last + 1
		if int(next) == len(l.nodes) {
			next = 0
		}
		if l.nodes[next] == p {
			copy(l.recent[1:k+1], l.recent[:k])
			l.recent[0] = next
			return l.values[next], true
		}
	}
	pos, ok := l.position.get(p)
	if !ok {
		return v, false
	}
	copy(l.recent[1:], l.recent[:listStreams-1])
	l.recent[0] = pos
	return l.values[pos], true
}
