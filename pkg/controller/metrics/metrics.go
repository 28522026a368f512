// Package metrics defines hypernode-controller's Prometheus metrics, served on its /metrics
// next to /healthz (--healthz-bind-address). Every name starts with hypernode_; the labels
// are discovery source names (from the configuration) and fixed values, never object names.
package metrics

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const namespace = "hypernode"

// Results (label "result").
const (
	ResultSuccess = "success"
	ResultError   = "error"
)

// Operations on HyperNodes (label "operation").
const (
	OperationCreate = "create"
	OperationUpdate = "update"
	OperationDelete = "delete"
)

var (
	// DiscoveryRuns counts the runs of each discovery source, by result; a run is one
	// answer of the source and the reconcile of its HyperNodes.
	DiscoveryRuns = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Name:           "discovery_runs_total",
		Help:           "Discovery runs (the source asked, its HyperNodes reconciled), by source and result: success, or error (the source failed or writing HyperNodes failed).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"source", "result"})

	// DiscoveryDuration is how long one discovery run took.
	DiscoveryDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      namespace,
		Name:           "discovery_duration_seconds",
		Help:           "Duration of one discovery run (asking the source and reconciling its HyperNodes), by source.",
		Buckets:        metrics.ExponentialBuckets(0.001, 4, 10),
		StabilityLevel: metrics.ALPHA,
	}, []string{"source"})

	// HyperNodeWrites counts the HyperNodes discovery created, updated and deleted.
	HyperNodeWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Name:           "discovery_hypernode_writes_total",
		Help:           "HyperNodes written by discovery, by source and operation: create, update or delete (successful writes only).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"source", "operation"})

	// StatusWrites counts the HyperNode status writes, by result.
	StatusWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Name:           "status_writes_total",
		Help:           "HyperNode status writes (status.nodeCount and the Valid condition), by result: success or error.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	// NodeLabelWrites counts the node patches of the tier label publisher, by result.
	NodeLabelWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Name:           "node_label_writes_total",
		Help:           "Node writes of the tier label publisher (one JSON merge patch of a node's hypernode.dev/tier-N labels and its ownership record), by result: success or error (a conflict included; it is retried).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	// NodeLabelsNotOwned is the number of hypernode.dev/tier-N labels, over all nodes, that
	// the publisher did not write and so leaves alone.
	NodeLabelsNotOwned = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      namespace,
		Name:           "node_labels_not_owned",
		Help:           "hypernode.dev/tier-N node labels that hypernode-controller did not write (not in the node's hypernode.dev/tier-labels annotation) while it publishes the tree as node labels: it neither overwrites nor removes them.",
		StabilityLevel: metrics.ALPHA,
	})

	registerOnce sync.Once
)

// Register registers the metrics in the legacy registry; later calls do nothing.
func Register() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(DiscoveryRuns, DiscoveryDuration, HyperNodeWrites, StatusWrites, NodeLabelWrites, NodeLabelsNotOwned)
	})
}

// ObserveDiscovery records one discovery run of source.
func ObserveDiscovery(source string, d time.Duration, err error) {
	result := ResultSuccess
	if err != nil {
		result = ResultError
	}
	DiscoveryRuns.WithLabelValues(source, result).Inc()
	DiscoveryDuration.WithLabelValues(source).Observe(d.Seconds())
}
