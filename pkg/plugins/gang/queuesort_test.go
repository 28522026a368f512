package gang

import (
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// TestQueueOrder: priority first; then arrival, a gang member's being its PodGroup's
// creation; then gang by gang, so that two gangs whose members entered the queue interleaved
// come out one after the other.
func TestQueueOrder(t *testing.T) {
	registry := podgroup.New()
	q := NewQueueSort(registry)
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	for _, pg := range []struct {
		name    string
		created time.Time
	}{{"a", t0}, {"b", t0}, {"old", t0.Add(-time.Hour)}} {
		registry.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: pg.name, CreationTimestamp: metav1.NewTime(pg.created)}})
	}
	queued := func(pod *v1.Pod, priority int32, at time.Duration) *framework.QueuedPodInfo {
		pod.Spec.Priority = &priority
		info, err := framework.NewPodInfo(pod)
		if err != nil {
			t.Fatal(err)
		}
		return &framework.QueuedPodInfo{PodInfo: info, QueueingParams: framework.QueueingParams{Timestamp: t0.Add(at)}}
	}
	plain := func(name string) *v1.Pod { return st.MakePod().Namespace(ns).Name(name).UID(name).Obj() }
	pods := []*framework.QueuedPodInfo{
		queued(member("b-0", "b"), 0, 1*time.Second),
		queued(member("a-0", "a"), 0, 2*time.Second),
		queued(member("b-1", "b"), 0, 3*time.Second),
		queued(member("a-1", "a"), 0, 4*time.Second),
		queued(plain("early"), 0, -time.Minute),
		queued(plain("late"), 0, time.Minute),
		queued(member("old-0", "old"), 0, 2*time.Minute),
		queued(member("unknown-0", "unknown"), 0, 30*time.Second), // no PodGroup yet: its own time
		queued(plain("urgent"), 100, 10*time.Minute),
	}
	sort.SliceStable(pods, func(i, j int) bool { return q.Less(pods[i], pods[j]) })
	var got []string
	for _, p := range pods {
		got = append(got, p.Pod.Name)
	}
	want := []string{"urgent", "old-0", "early", "a-0", "a-1", "b-0", "b-1", "unknown-0", "late"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("queue order (-want,+got):\n%s", diff)
	}
}

// BenchmarkQueueSortLess is one comparison of two plain pods (no PodGroup), what the queue of
// a cluster of plain pods does O(log n) times per add and pop, next to kube-scheduler's
// PrioritySort on the same pods.
func BenchmarkQueueSortLess(b *testing.B) {
	queued := func(name string, at time.Duration) *framework.QueuedPodInfo {
		info, err := framework.NewPodInfo(st.MakePod().Namespace("ns").Name(name).UID(name).Priority(0).Obj())
		if err != nil {
			b.Fatal(err)
		}
		return &framework.QueuedPodInfo{PodInfo: info, QueueingParams: framework.QueueingParams{Timestamp: time.Unix(0, 0).Add(at)}}
	}
	first, second := queued("first", time.Second), queued("second", 2*time.Second)
	for _, tc := range []struct {
		name string
		less func(a, b fwk.QueuedEntityInfo) bool
	}{{"GangQueueSort", NewQueueSort(podgroup.New()).Less}, {"PrioritySort", (&queuesort.PrioritySort{}).Less}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if !tc.less(first, second) || tc.less(second, first) {
					b.Fatal("wrong order")
				}
			}
		})
	}
}

// otherEntity is a queued entity of another type than kube-scheduler's QueuedPodInfo that
// still carries a pod: Less reads its pod through GetPodInfo.
type otherEntity struct{ *framework.QueuedPodInfo }

// TestQueueOrderOtherEntities: the same order for entities that are not QueuedPodInfos.
func TestQueueOrderOtherEntities(t *testing.T) {
	registry := podgroup.New()
	q := NewQueueSort(registry)
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	registry.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "old", CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))}})
	queued := func(pod *v1.Pod, at time.Duration) *framework.QueuedPodInfo {
		info, err := framework.NewPodInfo(pod)
		if err != nil {
			t.Fatal(err)
		}
		return &framework.QueuedPodInfo{PodInfo: info, QueueingParams: framework.QueueingParams{Timestamp: t0.Add(at)}}
	}
	member := st.MakePod().Namespace("ns").Name("old-0").UID("old-0").Label(schedulingv1alpha1.PodGroupLabel, "old").Obj()
	plain := st.MakePod().Namespace("ns").Name("plain").UID("plain").Obj()
	// The member entered the queue after the plain pod, but its PodGroup is older.
	m, p := otherEntity{queued(member, time.Minute)}, otherEntity{queued(plain, 0)}
	if !q.Less(m, p) || q.Less(p, m) {
		t.Errorf("Less(member, plain) = %v, Less(plain, member) = %v; want true, false", q.Less(m, p), q.Less(p, m))
	}
}
