package gangstate

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// TestRetryUnplaced: only the scout of a gang waiting for room may retry, when the nodes of
// its cycle's snapshot offer more than at the failure (more free of one of the failure's
// resources, counted only for those, or the nodes changed) or after UnplacedMaxAge; not for
// the same room or less, whatever the registry's own node events said (its informer may be
// ahead of the snapshot). A node event wakes the scout, at most once per ScoutWakeInterval;
// one during the failed attempt wakes it at once. A retry ends the hold, once.
func TestRetryUnplaced(t *testing.T) {
	key := Key{Namespace: "ns", Name: "g"}
	at := time.Now()
	free := func(cpu, gpus int64) map[v1.ResourceName]int64 {
		return map[v1.ResourceName]int64{v1.ResourceCPU: cpu, "nvidia.com/gpu": gpus}
	}
	failedWith := Room{Free: free(8000, 4), Nodes: 7}
	for _, tc := range []struct {
		name string
		// asker is the member asking at now, room what the nodes offer then; nodeAdded adds
		// nodes after the failure, nodeDuringAttempt while the failing attempt ran.
		asker             string
		now               time.Time
		room              Room
		nodeAdded         bool
		nodeDuringAttempt bool
		wake              bool
		woken             []string
		retry             bool
	}{
		{name: "the same room", asker: "b", now: at, room: failedWith},
		{name: "less room (another gang reserved since)", asker: "b", now: at, room: Room{Free: free(0, 0), Nodes: 7}},
		{name: "more CPU", asker: "b", now: at, room: Room{Free: free(8001, 4), Nodes: 7}, retry: true},
		{name: "more GPUs, less CPU", asker: "b", now: at, room: Room{Free: free(0, 8), Nodes: 7}, retry: true},
		{name: "the nodes changed, no more free", asker: "b", now: at, room: Room{Free: free(8000, 4), Nodes: 8}, retry: true},
		{name: "more room, asked by a member that is not the scout", asker: "a", now: at, room: Room{Free: free(9000, 8), Nodes: 9}},
		{name: "a node event the snapshot does not show yet", asker: "b", now: at, room: failedWith, nodeAdded: true, woken: []string{"ns/g b"}},
		{name: "a node event and the snapshot shows it", asker: "b", now: at, room: Room{Free: free(8000, 4), Nodes: 8}, nodeAdded: true, woken: []string{"ns/g b"}, retry: true},
		{name: "a node event during the failed attempt", asker: "b", now: at, room: failedWith, nodeDuringAttempt: true, wake: true},
		{name: "old enough", asker: "b", now: at.Add(UnplacedMaxAge), room: failedWith, retry: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New()
			r := tr.Registry()
			clock := at
			tr.now = func() time.Time { return clock }
			var woken []string
			tr.OnScoutWake(func(k Key, scout *v1.Pod) { woken = append(woken, k.String()+" "+scout.Name) })
			r.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}})
			r.SetPod(nil, member("a", "g"))
			r.SetPod(nil, member("b", "g"))
			start := tr.NodeChanges()
			if tc.nodeDuringAttempt {
				r.SetNode(nil, st.MakeNode().Name("node-0").Obj())
			}
			if wake := tr.MarkUnplaced(key, "b", "member b cannot be placed", at, failedWith, start); wake != tc.wake {
				t.Errorf("MarkUnplaced: wake %v, want %v", wake, tc.wake)
			}
			if tc.nodeAdded {
				r.SetNode(nil, st.MakeNode().Name("node-1").Obj())
				r.SetNode(nil, st.MakeNode().Name("node-2").Obj()) // woken already
			}
			if diff := cmp.Diff(tc.woken, woken); diff != "" {
				t.Errorf("woken (-want,+got):\n%s", diff)
			}
			var counted []v1.ResourceName
			u, retry, forgot := tr.RetryUnplaced(key, types.UID(tc.asker), tc.now, func(names []v1.ResourceName) Room {
				counted = names
				return tc.room
			})
			if retry != tc.retry || forgot != tc.retry {
				t.Errorf("retry %v, forgot %v (failure %+v), want %v", retry, forgot, u, tc.retry)
			}
			if want := []v1.ResourceName{v1.ResourceCPU, "nvidia.com/gpu"}; counted != nil && !cmp.Equal(counted, want) {
				t.Errorf("counted %v, want the failure's resources %v", counted, want)
			}
			if _, again, forgotAgain := tr.RetryUnplaced(key, "b", tc.now, func([]v1.ResourceName) Room { return failedWith }); again != tc.retry || forgotAgain {
				t.Errorf("asked again: retry %v, forgot %v; want %v, false (a retry forgets the failure and ends the hold)", again, forgotAgain, tc.retry)
			}
			if tc.retry || tc.asker != "b" {
				return
			}
			// The scout tried and stays held: node events wake it again, once the interval
			// since the last wake-up has passed.
			woken = nil
			clock = clock.Add(ScoutWakeInterval - time.Second)
			r.SetNode(nil, st.MakeNode().Name("node-3").Obj())
			want := []string{"ns/g b"}
			if tc.nodeAdded {
				want = nil // woken a moment ago
				if diff := cmp.Diff(want, woken); diff != "" {
					t.Errorf("woken within the interval (-want,+got):\n%s", diff)
				}
				clock = clock.Add(time.Second)
				r.SetNode(nil, st.MakeNode().Name("node-4").Obj())
				want = []string{"ns/g b"}
			}
			if diff := cmp.Diff(want, woken); diff != "" {
				t.Errorf("woken after the scout tried (-want,+got):\n%s", diff)
			}
		})
	}
}
