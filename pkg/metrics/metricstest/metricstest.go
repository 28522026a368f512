// Package metricstest reads the plugins' metrics for the tests that run a scheduler, or a
// plugin, in their own process.
package metricstest

import (
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/metrics"
)

// GangPreemptionEvictions reads how many gang preemptions' evictions ended with each result
// since an earlier reading (nil: ever).
func GangPreemptionEvictions(since map[string]uint64) (map[string]uint64, error) {
	metrics.Register() // an unregistered metric counts nothing and cannot be read
	counts := map[string]uint64{}
	for _, result := range []string{metrics.ResultEvicted, metrics.ResultFailed, metrics.ResultStopped} {
		n, err := testutil.GetHistogramMetricCount(metrics.GangPreemptionEvictionDuration.WithLabelValues(result))
		if err != nil {
			return nil, err
		}
		counts[result] = n - since[result]
	}
	return counts, nil
}

// GangStateViolations reads how many changes of a gang's state the gang state's table did not
// allow, in this process (all events together): a test run with a scheduler in process fails
// on any.
func GangStateViolations() (float64, error) {
	metrics.Register()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return 0, err
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "hypernode_gang_state_violations_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			total += m.GetCounter().GetValue()
		}
	}
	return total, nil
}
