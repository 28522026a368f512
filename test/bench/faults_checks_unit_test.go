package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
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
			w := &faultWatcher{start: t0, gangs: map[string]*watchedGang{}, holds: map[string]*podgroup.HoldRecord{},
				holdChanges: map[string][]holdChange{}, released: map[string][]time.Time{}}
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
