package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// The watcher's hold check after a failover, driven by hand: what it calls a hold lost, and
// what it leaves to the scheduler's decisions.
func TestFaultWatcherHoldsAcrossAFailover(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC)
	record := func(domain string, since time.Time) *podgroup.HoldRecord {
		return &podgroup.HoldRecord{Domain: domain, Tier: 2, Nodes: []string{domain + "-n0"}, Since: since}
	}
	cases := []struct {
		name string
		// after: the records after the kill, in order (nil: removed); released: a
		// HoldReleased Event came with the removal; ran: the gang bound.
		after          []*podgroup.HoldRecord
		released, ran  bool
		wantViolations []string
		wantMoved      int
	}{
		{name: "kept: no change"},
		{name: "kept: rewritten the same", after: []*podgroup.HoldRecord{record("spine-0", t0)}},
		{name: "started again in the same domain", after: []*podgroup.HoldRecord{record("spine-0", t0.Add(time.Minute))},
			wantViolations: []string{"gang g's hold of spine-0 started again after the failover"}},
		{name: "moved, then back: the first change counts", after: []*podgroup.HoldRecord{record("spine-1", t0.Add(time.Minute)), record("spine-0", t0.Add(2*time.Minute))},
			wantMoved: 1},
		{name: "removed without a reason", after: []*podgroup.HoldRecord{nil},
			wantViolations: []string{"gang g's hold of spine-0 gone after the failover"}},
		{name: "released with a reason", after: []*podgroup.HoldRecord{nil}, released: true},
		{name: "removed as the gang bound", after: []*podgroup.HoldRecord{nil}, ran: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := unitWatcher(t0, time.Now)
			w.expectGang(Job{Name: "g", Pods: 2, Mode: "hard", Tier: 2})
			pg := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "g", UID: types.UID("g")}}
			set := func(r *podgroup.HoldRecord) {
				pg = pg.DeepCopy()
				pg.Annotations = nil
				if r != nil {
					pg.Annotations = map[string]string{podgroup.HoldAnnotation: r.Encode()}
				}
				w.podGroup(pg, false)
			}
			set(record("spine-0", t0))
			before := w.holdsNow()
			// The leader died between the first record and the changes that follow.
			killed := time.Now().Add(-time.Millisecond)
			w.holdChanges["g"][0].at = killed.Add(-time.Second)
			for _, r := range tc.after {
				set(r)
			}
			if tc.released {
				w.holdReleased(&v1.Event{InvolvedObject: v1.ObjectReference{Name: "g"}})
			}
			w.gangs["g"].ran = tc.ran
			w.checkHoldsKept(before, killed)
			var got []string
			for _, v := range w.report.Violations {
				got = append(got, v[strings.Index(v, "gang"):strings.Index(v, " at ")])
			}
			if diff := cmp.Diff(tc.wantViolations, got); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
			if w.report.HoldsMovedAfterFailover != tc.wantMoved {
				t.Errorf("moved = %d, want %d", w.report.HoldsMovedAfterFailover, tc.wantMoved)
			}
		})
	}
}

// unitWatcher is a fault watcher without informers, on the given clock, for tests that call
// its handlers by hand; its nodes are labelled "leaf" and "spine".
func unitWatcher(start time.Time, now func() time.Time) *faultWatcher {
	return &faultWatcher{start: start, now: now, leafLabel: "leaf", spineLabel: "spine",
		gangs: map[string]*watchedGang{}, pods: map[types.UID]*watchedPod{}, nodes: map[string]*watchedNode{},
		evicted: map[types.UID][]metav1.Time{}, holds: map[string]*podgroup.HoldRecord{}, overlaps: map[[2]string]*holdOverlap{},
		holdChanges: map[string][]holdChange{}, released: map[string][]time.Time{}, deleting: map[string]time.Time{}}
}

// watchStep is one thing the watcher is told, at seconds after the start.
type watchStep struct {
	at float64
	// do: "bind" (pod on node, cpu millis, priority), "gone" (pod deleted), "evict" (pod's
	// DisruptionTarget condition set at), "fault" (a window until), "nodes" (checkNodes).
	do        string
	pod, node string
	cpu       int64
	priority  int32
	until     float64
}

// The watcher's checks of pods, gangs and nodes, driven by hand on a fake clock: gang g has
// two pods and is hard at tier 1; nodes n-a0 and n-a1 are in leaf-a, n-b0 in leaf-b (both in
// spine-0), n-c0 in leaf-c (spine-1); each has 8 CPUs.
func TestFaultWatcherPodChecks(t *testing.T) {
	bind := func(at float64, pod, node string, cpu int64, priority int32) watchStep {
		return watchStep{at: at, do: "bind", pod: pod, node: node, cpu: cpu, priority: priority}
	}
	cases := []struct {
		name           string
		steps          []watchStep
		end            float64 // finish
		wantViolations []string
		wantExplained  int
		wantLongest    float64
		wantTwice      int
		wantWasted     int
		wantWastedOK   int // explained by a fault
	}{
		{name: "partial for 16 s", steps: []watchStep{bind(0, "g-0", "n-a0", 1000, 0), bind(16, "g-1", "n-a1", 1000, 0)}, end: 200,
			wantViolations: []string{"16.0s: gang g bound below minMember (2) for 16.0s"}, wantLongest: 16},
		{name: "partial for 16 s in a fault's window", end: 200,
			steps:         []watchStep{{at: 5, do: "fault", until: 6}, bind(0, "g-0", "n-a0", 1000, 0), bind(16, "g-1", "n-a1", 1000, 0)},
			wantExplained: 1, wantLongest: 16},
		{name: "partial for 3 s", steps: []watchStep{bind(0, "g-0", "n-a0", 1000, 0), bind(3, "g-1", "n-a1", 1000, 0)}, end: 200, wantLongest: 3},
		{name: "partial at the end", steps: []watchStep{bind(0, "g-0", "n-a0", 1000, 0)}, end: 20,
			wantViolations: []string{"20.0s: gang g bound below minMember (2) for 20.0s"}, wantLongest: 20},
		{name: "a pod of the gang lost: partial again", end: 200,
			steps:          []watchStep{bind(0, "g-0", "n-a0", 1000, 0), bind(1, "g-1", "n-a1", 1000, 0), {at: 10, do: "gone", pod: "g-1"}},
			wantViolations: []string{"200.0s: gang g bound below minMember (2) for 190.0s"}, wantLongest: 190},
		{name: "hard at tier 1 across two leaves", steps: []watchStep{bind(0, "g-0", "n-a0", 1000, 0), bind(1, "g-1", "n-b0", 1000, 0)}, end: 200,
			wantViolations: []string{"1.0s: hard gang g (tier 1 allowed) spans tier 2: 2 leaves, 1 spines"}, wantLongest: 1},
		{name: "a node over its allocatable for 6 s", end: 200,
			steps:          []watchStep{bind(0, "p1", "n-c0", 6000, 0), bind(1, "p2", "n-c0", 6000, 0), {at: 7, do: "nodes"}, {at: 8, do: "nodes"}},
			wantViolations: []string{"1.0s: node n-c0 over its allocatable since p2 bound: [0 12000 0] of [0 8000 0] (GPUs, CPU millis, bytes)"}},
		{name: "over for 3 s", end: 200,
			steps: []watchStep{bind(0, "p1", "n-c0", 6000, 0), bind(1, "p2", "n-c0", 6000, 0), {at: 4, do: "gone", pod: "p1"}, {at: 7, do: "nodes"}}},
		{name: "evicted twice", end: 60,
			steps:          []watchStep{bind(0, "v", "n-c0", 1000, 0), {at: 1, do: "evict", pod: "v", node: "n-c0"}, {at: 9, do: "evict", pod: "v", node: "n-c0"}},
			wantViolations: []string{"9.0s: pod v evicted again (DisruptionTarget set at 2026-12-07 02:00:09 +0000 UTC, before at [2026-12-07 02:00:01 +0000 UTC])"}, wantTwice: 1},
		{name: "an eviction used by a pod of higher priority", end: 200,
			steps: []watchStep{bind(0, "v", "n-c0", 8000, 0), {at: 1, do: "evict", pod: "v", node: "n-c0"}, {at: 2, do: "gone", pod: "v"},
				bind(30, "h", "n-c0", 8000, 10)}},
		{name: "an eviction wasted: nobody binds there", end: 200,
			steps:          []watchStep{bind(0, "v", "n-c0", 8000, 0), {at: 1, do: "evict", pod: "v", node: "n-c0"}, {at: 2, do: "gone", pod: "v"}},
			wantViolations: []string{"1.0s: v evicted from n-c0; no pod of higher priority bound there within 1m30s"}, wantWasted: 1},
		{name: "an eviction wasted: a pod of the same priority took the node", end: 200,
			steps: []watchStep{bind(0, "v", "n-c0", 8000, 0), {at: 1, do: "evict", pod: "v", node: "n-c0"}, {at: 2, do: "gone", pod: "v"},
				bind(30, "same", "n-c0", 8000, 0)},
			wantViolations: []string{"1.0s: v evicted from n-c0; no pod of higher priority bound there within 1m30s"}, wantWasted: 1},
		{name: "an eviction wasted in a fault's window", end: 200,
			steps: []watchStep{{at: 0, do: "fault", until: 5}, bind(0, "v", "n-c0", 8000, 0), {at: 1, do: "evict", pod: "v", node: "n-c0"},
				{at: 2, do: "gone", pod: "v"}},
			wantWastedOK: 1},
		{name: "an eviction too recent to judge", end: 60,
			steps: []watchStep{bind(0, "v", "n-c0", 8000, 0), {at: 1, do: "evict", pod: "v", node: "n-c0"}, {at: 2, do: "gone", pod: "v"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC)
			now := t0
			w := unitWatcher(t0, func() time.Time { return now })
			w.expectGang(Job{Name: "g", Pods: 2, Mode: "hard", Tier: 1})
			for _, n := range []struct{ name, leaf, spine string }{
				{"n-a0", "leaf-a", "spine-0"}, {"n-a1", "leaf-a", "spine-0"}, {"n-b0", "leaf-b", "spine-0"}, {"n-c0", "leaf-c", "spine-1"}} {
				w.node(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{"leaf": n.leaf, "spine": n.spine}},
					Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("8")}}})
			}
			pods := map[string]*v1.Pod{}
			at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
			for _, s := range tc.steps {
				now = at(s.at)
				switch s.do {
				case "bind":
					pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: s.pod, UID: types.UID(s.pod), Labels: map[string]string{}},
						Spec: v1.PodSpec{NodeName: s.node, Priority: ptr.To(s.priority), Containers: []v1.Container{{Resources: v1.ResourceRequirements{
							Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(s.cpu, resource.DecimalSI)}}}}}}
					if strings.HasPrefix(s.pod, "g-") {
						pod.Labels[util.PodGroupLabel] = "g"
					}
					pods[s.pod] = pod
					w.pod(pod)
				case "evict":
					pod := pods[s.pod].DeepCopy()
					pod.Status.Conditions = []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
						Reason: v1.PodReasonPreemptionByScheduler, LastTransitionTime: metav1.NewTime(now)}}
					pods[s.pod] = pod
					w.pod(pod)
				case "gone":
					w.podGone(pods[s.pod])
				case "fault":
					w.fault(faultNodeFailure, now, at(s.until))
				case "nodes":
					w.checkNodes(now)
				}
			}
			now = at(tc.end)
			report := w.finish()
			if diff := cmp.Diff(tc.wantViolations, report.Violations); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
			if len(report.Explained) != tc.wantExplained {
				t.Errorf("explained %q, want %d", report.Explained, tc.wantExplained)
			}
			if report.LongestPartialSecs != tc.wantLongest {
				t.Errorf("longest partial %.1f s, want %.1f", report.LongestPartialSecs, tc.wantLongest)
			}
			if report.EvictedTwice != tc.wantTwice || report.WastedEvictions != tc.wantWasted || report.WastedExplained != tc.wantWastedOK {
				t.Errorf("evicted twice %d, wasted %d, wasted explained %d; want %d, %d, %d",
					report.EvictedTwice, report.WastedEvictions, report.WastedExplained, tc.wantTwice, tc.wantWasted, tc.wantWastedOK)
			}
		})
	}
}
