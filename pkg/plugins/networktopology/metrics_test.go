package networktopology

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	hnmetrics "github.com/hypernode-dev/hypernode-scheduler/pkg/metrics"
)

// planMetrics reads the plan metrics that PreFilter moves; the registry is global, so tests
// compare the values before and after.
func planMetrics(t *testing.T) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	counter := func(name string, v float64, err error) {
		if err != nil {
			t.Fatal(err)
		}
		out[name] = v
	}
	count := func(name string, v uint64, err error) {
		if err != nil {
			t.Fatal(err)
		}
		out[name] = float64(v)
	}
	for _, r := range []string{hnmetrics.ResultPlaced, hnmetrics.ResultNoDomain, hnmetrics.ResultError} {
		v, err := testutil.GetCounterMetricValue(hnmetrics.PlansTotal.WithLabelValues(r))
		counter("plans_total/"+r, v, err)
		n, err := testutil.GetHistogramMetricCount(hnmetrics.PlanDuration.WithLabelValues(r))
		count("plan_duration_seconds_count/"+r, n, err)
	}
	for _, r := range []string{hnmetrics.ResultPlaced, hnmetrics.ResultNoRoom, hnmetrics.ResultNoDomain} {
		v, err := testutil.GetCounterMetricValue(hnmetrics.PlanReusesTotal.WithLabelValues(r))
		counter("plan_reuses_total/"+r, v, err)
	}
	for _, mode := range []string{hnmetrics.ModeHard, hnmetrics.ModeSoft} {
		v, err := testutil.GetCounterMetricValue(hnmetrics.PlacementsTotal.WithLabelValues("1", mode))
		counter("placements_total/1/"+mode, v, err)
	}
	simulated, err := testutil.GetHistogramVecFromGatherer(legacyregistry.DefaultGatherer, "hypernode_plan_simulated_nodes", nil)
	count("plan_simulated_nodes_count", simulated.GetAggregatedSampleCount(), err)
	counter("plan_simulated_nodes_sum", simulated.GetAggregatedSampleSum(), err)
	return out
}

// TestPlanMetrics: a gang planned once and reused by its other member, an elastic gang whose
// plan leaves its third member out, and a gang that cannot fit planned once and its failure
// reused, move exactly the counters that say so.
func TestPlanMetrics(t *testing.T) {
	hnmetrics.Register()
	e := newPlanEnv(t, map[string]int{"fits": 2, "big": 3})
	e.elasticGang("elastic", 2, 3)
	before := planMetrics(t)
	for _, member := range []struct {
		group string
		i     int
	}{{"fits", 0}, {"fits", 1}, {"elastic", 0}, {"elastic", 1}, {"elastic", 2}, {"big", 0}, {"big", 1}} {
		_, _, _ = e.fw.RunPreFilterPlugins(e.ctx, framework.NewCycleState(), e.pod(member.group, member.i))
	}
	after := planMetrics(t)
	got := map[string]float64{}
	for name, v := range after {
		if d := v - before[name]; d != 0 {
			got[name] = d
		}
	}
	// fits: the lazy bin-pack planning simulates the two nodes of s0 and stops; elastic and
	// big: it simulates every node before it can say that no leaf holds three (elastic's
	// plan then places minMember 2 and leaves the third member out).
	want := map[string]float64{
		"plans_total/placed":                    2,
		"plan_duration_seconds_count/placed":    2,
		"plan_reuses_total/placed":              2,
		"plan_reuses_total/no_room":             1,
		"placements_total/1/hard":               2,
		"plans_total/no_domain":                 1,
		"plan_duration_seconds_count/no_domain": 1,
		"plan_reuses_total/no_domain":           1,
		"plan_simulated_nodes_count":            3,
		"plan_simulated_nodes_sum":              2 + 8 + 8,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metric changes (-want +got):\n%s", diff)
	}
}
