package gang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/metrics"
)

// gangMetrics reads the waiting gangs' gauge and the number of gang durations observed (the
// registry is global: tests compare values before and after).
func gangMetrics(t *testing.T) (waiting float64, observed uint64) {
	t.Helper()
	waiting, err := testutil.GetGaugeMetricValue(metrics.GangsWaitingInPermit)
	if err != nil {
		t.Fatal(err)
	}
	durations, err := testutil.GetHistogramVecFromGatherer(legacyregistry.DefaultGatherer, "hypernode_gang_scheduling_duration_seconds", nil)
	if err == nil {
		observed = durations.GetAggregatedSampleCount()
	}
	return waiting, observed
}

// TestGangMetrics: a gang counts as waiting from its first waiting member until its round is
// allowed or rejected; its scheduling duration is observed once, when the last member of the
// batch allowed at its quorum has bound, and not again for later members.
func TestGangMetrics(t *testing.T) {
	metrics.Register()
	e := newEnv(t, 60)
	e.podGroup("train", 3, nil)
	e.podGroup("other", 2, nil)
	pods := []*v1.Pod{member("p0", "train"), member("p1", "train"), member("p2", "train"), member("o0", "other")}
	for _, p := range pods {
		e.registry.SetPod(nil, p)
	}
	waiting0, observed0 := gangMetrics(t)
	type point struct {
		Waiting  float64
		Observed uint64
	}
	var got []point
	record := func() {
		w, o := gangMetrics(t)
		got = append(got, point{w - waiting0, o - observed0})
	}
	e.reserveAndPermit(t, pods[0]) // train waits
	record()
	e.reserveAndPermit(t, pods[1])
	state := framework.NewCycleState()
	if s := e.reserveAndPermit(t, pods[3]); s.Code() != fwk.Wait { // other waits too
		t.Fatalf("Permit(o0) = %v, want Wait", s)
	}
	record()
	e.fw.RunReservePluginsUnreserve(e.ctx, state, pods[3], "node-1") // other's round rejected
	record()
	if s := e.reserveAndPermit(t, pods[2]); !s.IsSuccess() { // train allowed
		t.Fatalf("Permit(p2) = %v, want Success", s)
	}
	record()
	for _, p := range pods[:3] {
		e.plugin.PostBind(e.ctx, state, p, "node-1")
		record()
	}
	e.plugin.PostBind(e.ctx, state, pods[0], "node-1") // a repeated call changes nothing
	record()
	want := []point{{1, 0}, {2, 0}, {1, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 1}, {0, 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waiting gangs and durations observed, step by step (-want +got):\n%s", diff)
	}
}
