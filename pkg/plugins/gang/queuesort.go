package gang

import (
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/names"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// QueueSortName is the name of the queue sort plugin.
const QueueSortName = names.GangQueueSort

// QueueSort is the queue sort plugin. It is a plugin of its own rather than an extension point
// of Gang because kube-scheduler allows one queue sort per profile and multiPoint enables
// every extension point a plugin has: enabling Gang must not collide with PrioritySort.
type QueueSort struct {
	registry *podgroup.Registry
}

var _ fwk.QueueSortPlugin = &QueueSort{}

// NewQueueSort builds the plugin around the scheduler's PodGroup registry.
func NewQueueSort(registry *podgroup.Registry) *QueueSort { return &QueueSort{registry: registry} }

// Name returns the name of the plugin.
func (q *QueueSort) Name() string { return QueueSortName }

// Less orders the scheduling queue: higher priority first, as kube-scheduler's PrioritySort;
// then by arrival, where a gang member arrives when its PodGroup was created and any other
// pod when it entered the queue; then gang by gang. The members of one gang are so popped
// one after another instead of interleaved with other gangs' members: with many gangs
// pending (a scheduler restarting on a backlog), the first gang completes after its own
// members' cycles, not after nearly everyone's (docs/design.md, "Queue order").
func (q *QueueSort) Less(a, b fwk.QueuedEntityInfo) bool {
	if pa, pb := a.GetPriority(), b.GetPriority(); pa != pb {
		return pa > pb
	}
	ta, ka := q.arrival(a)
	tb, kb := q.arrival(b)
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	if ka != kb {
		return ka < kb
	}
	return a.GetTimestamp().Before(b.GetTimestamp())
}

// arrival is when an entity counts as arrived, and its gang ("" for a pod without one).
func (q *QueueSort) arrival(e fwk.QueuedEntityInfo) (time.Time, string) {
	var pod *v1.Pod
	// The concrete type first: Less runs O(log n) times per queue operation, and the
	// interface assertion (a cache probe) and the two interface calls after it cost more.
	switch e := e.(type) {
	case *framework.QueuedPodInfo:
		pod = e.Pod
	case interface{ GetPodInfo() fwk.PodInfo }:
		pod = e.GetPodInfo().GetPod()
	}
	if pod == nil {
		return e.GetTimestamp(), ""
	}
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return e.GetTimestamp(), ""
	}
	created, ok := q.registry.Created(key)
	if !ok {
		return e.GetTimestamp(), ""
	}
	return created, key.String()
}
