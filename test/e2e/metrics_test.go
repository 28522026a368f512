package e2e

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/wait"
)

// scrape parses the running scheduler's /metrics.
func scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	text, err := cluster.SchedulerMetrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// sample returns the value of the family's sample with exactly these labels: a counter's or
// gauge's value, a histogram's count. A sample that does not exist is 0.
func sample(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f := families[name]
	if f == nil {
		return 0
	}
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		if len(got) != len(labels) {
			continue
		}
		match := true
		for k, v := range labels {
			match = match && got[k] == v
		}
		if !match {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return 0
}

// sum adds the values of every sample of a counter family (0 when it has none).
func sum(families map[string]*dto.MetricFamily, name string) float64 {
	total := 0.0
	if f := families[name]; f != nil {
		for _, m := range f.Metric {
			total += m.GetCounter().GetValue()
		}
	}
	return total
}

// TestSchedulerMetrics scrapes the running binary's /metrics around the scheduling of one
// hard tier-1 gang of 4, with an invalid HyperNode in the tree: every hypernode_ metric has
// its exact name, type and label names, and the values moved as they must (one plan, one
// placement at tier 1, three members reusing the plan, one gang bound, nothing left waiting,
// one HyperNode excluded for InvalidMember, the gang Running, no change of a gang's state
// outside its table).
func TestSchedulerMetrics(t *testing.T) {
	restartScene(t, "metrics")
	createBadLeaf(t)
	before := scrape(t)
	applyYAML(t, "metrics", gangJobYAML("gang", 4, 4, 1))
	_, nodes := waitGangBound(t, "metrics", "gang", 4, time.Minute)
	assertOneDomain(t, nodes, 8)
	// The gang's scheduling duration is observed in PostBind, after its last bind is visible.
	var after map[string]*dto.MetricFamily
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		after = scrape(t)
		name := "hypernode_gang_scheduling_duration_seconds"
		return sample(after, name, nil)-sample(before, name, nil) >= 1, nil
	}); err != nil {
		t.Logf("the gang's scheduling duration was not observed within 10 s: %v", err)
	}

	type family struct {
		Type   dto.MetricType
		Labels string
	}
	want := map[string]family{
		"hypernode_plan_duration_seconds":            {dto.MetricType_HISTOGRAM, "result"},
		"hypernode_plans_total":                      {dto.MetricType_COUNTER, "result"},
		"hypernode_plan_reuses_total":                {dto.MetricType_COUNTER, "result"},
		"hypernode_plan_simulated_nodes":             {dto.MetricType_HISTOGRAM, ""},
		"hypernode_placements_total":                 {dto.MetricType_COUNTER, "mode,tier"},
		"hypernode_gangs_waiting_in_permit":          {dto.MetricType_GAUGE, ""},
		"hypernode_gangs_gated":                      {dto.MetricType_GAUGE, "reason"},
		"hypernode_gangs":                            {dto.MetricType_GAUGE, "phase"},
		"hypernode_gang_scheduling_duration_seconds": {dto.MetricType_HISTOGRAM, ""},
		"hypernode_excluded_hypernodes":              {dto.MetricType_GAUGE, "reason"},
		// Holds: the counters by reason appear once a hold ends.
		"hypernode_held_nodes":          {dto.MetricType_GAUGE, ""},
		"hypernode_holds_started_total": {dto.MetricType_COUNTER, ""},
	}
	got := map[string]family{}
	for name, f := range after {
		if !strings.HasPrefix(name, "hypernode_") {
			continue
		}
		labelSets := map[string]bool{}
		for _, m := range f.Metric {
			var names []string
			for _, l := range m.Label {
				names = append(names, l.GetName())
			}
			sort.Strings(names)
			labelSets[strings.Join(names, ",")] = true
		}
		if len(labelSets) != 1 {
			t.Errorf("%s: samples with different label names: %v", name, labelSets)
		}
		for labels := range labelSets {
			got[name] = family{f.GetType(), labels}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hypernode_ metric families (-want +got):\n%s", diff)
	}

	delta := func(name string, labels map[string]string) float64 {
		return sample(after, name, labels) - sample(before, name, labels)
	}
	placed := map[string]string{"result": "placed"}
	moved := map[string]float64{
		"plans_total{placed}":                 delta("hypernode_plans_total", placed),
		"plans_total{no_domain}":              delta("hypernode_plans_total", map[string]string{"result": "no_domain"}),
		"plan_duration_seconds_count{placed}": delta("hypernode_plan_duration_seconds", placed),
		"plan_reuses_total{placed}":           delta("hypernode_plan_reuses_total", placed),
		"plan_simulated_nodes_count":          delta("hypernode_plan_simulated_nodes", nil),
		"placements_total{tier=1,mode=hard}":  delta("hypernode_placements_total", map[string]string{"tier": "1", "mode": "hard"}),
		"gang_scheduling_duration_seconds":    delta("hypernode_gang_scheduling_duration_seconds", nil),
		"gangs_waiting_in_permit (value)":     sample(after, "hypernode_gangs_waiting_in_permit", nil),
		"excluded{InvalidMember} (value)":     sample(after, "hypernode_excluded_hypernodes", map[string]string{"reason": "InvalidMember"}),
		"excluded{AncestorExcluded} (value)":  sample(after, "hypernode_excluded_hypernodes", map[string]string{"reason": "AncestorExcluded"}),
		"gated{WaitingForMembers} (value)":    sample(after, "hypernode_gangs_gated", map[string]string{"reason": "WaitingForMembers"}),
		"gated{PodGroupMissing} (value)":      sample(after, "hypernode_gangs_gated", map[string]string{"reason": "PodGroupMissing"}),
		"gangs{Running} (value)":              sample(after, "hypernode_gangs", map[string]string{"phase": "Running"}),
		"gangs{Reserving} (value)":            sample(after, "hypernode_gangs", map[string]string{"phase": "Reserving"}),
		"gangs{Planned} (value)":              sample(after, "hypernode_gangs", map[string]string{"phase": "Planned"}),
		"gang_state_violations_total (sum)":   sum(after, "hypernode_gang_state_violations_total"),
	}
	wantMoved := map[string]float64{
		"plans_total{placed}":                 1,
		"plans_total{no_domain}":              0,
		"plan_duration_seconds_count{placed}": 1,
		"plan_reuses_total{placed}":           3,
		"plan_simulated_nodes_count":          1,
		"placements_total{tier=1,mode=hard}":  1,
		"gang_scheduling_duration_seconds":    1,
		"gangs_waiting_in_permit (value)":     0,
		"excluded{InvalidMember} (value)":     1,
		"excluded{AncestorExcluded} (value)":  0,
		"gated{WaitingForMembers} (value)":    0,
		"gated{PodGroupMissing} (value)":      0,
		"gangs{Running} (value)":              1,
		"gangs{Reserving} (value)":            0,
		"gangs{Planned} (value)":              0,
		"gang_state_violations_total (sum)":   0,
	}
	if diff := cmp.Diff(wantMoved, moved); diff != "" {
		t.Errorf("metric values (-want +got):\n%s", diff)
	}
}
