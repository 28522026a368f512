package metrics

import (
	"context"
	"sort"
	"sync"

	"k8s.io/component-base/metrics"
)

// Source reports the state that the gauges hypernode_gangs, hypernode_gangs_gated and
// hypernode_excluded_hypernodes show. They are read when /metrics is scraped, not kept up to
// date on the scheduling path: both are derived from state the process keeps anyway.
type Source struct {
	// Gangs counts the gangs by phase (gangstate.Phase).
	Gangs func() map[string]int
	// GatedGangs counts the gangs held back in PreEnqueue, by reason.
	GatedGangs func() map[string]int
	// ExcludedHyperNodes counts the HyperNodes placement does not use, by reason.
	ExcludedHyperNodes func() map[string]int
	// HeldNodes counts the nodes held for waiting gangs.
	HeldNodes func() int
	// Devices counts the DRA devices of the nodes' own ResourceSlices by DeviceClass:
	// [total, allocated].
	Devices func() map[string][2]int64
}

// AddSource adds a scheduler's state to the gauges until ctx ends. A process normally runs
// one scheduler; tests run several, one after another or at once, and the gauges sum them.
func AddSource(ctx context.Context, s *Source) { gauges.add(ctx, s) }

func (c *stateCollector) add(ctx context.Context, s *Source) {
	c.mu.Lock()
	c.sources[s] = struct{}{}
	c.mu.Unlock()
	context.AfterFunc(ctx, func() {
		c.mu.Lock()
		delete(c.sources, s)
		c.mu.Unlock()
	})
}

// len returns the number of sources.
func (c *stateCollector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sources)
}

// stateCollector computes the gauges from the sources at each scrape.
type stateCollector struct {
	metrics.BaseStableCollector

	mu      sync.Mutex
	sources map[*Source]struct{}
}

var _ metrics.StableCollector = &stateCollector{}

func (c *stateCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- gangsDesc
	ch <- gangsGatedDesc
	ch <- excludedDesc
	ch <- heldNodesDesc
	ch <- devicesDesc
}

func (c *stateCollector) CollectWithStability(ch chan<- metrics.Metric) {
	c.mu.Lock()
	sources := make([]*Source, 0, len(c.sources))
	for s := range c.sources {
		sources = append(sources, s)
	}
	c.mu.Unlock()
	gangs, gated, excluded := map[string]int{}, map[string]int{}, map[string]int{}
	held := 0
	devices := map[string][2]int64{}
	for _, s := range sources {
		if s.Devices != nil {
			for class, n := range s.Devices() {
				d := devices[class]
				devices[class] = [2]int64{d[0] + n[0], d[1] + n[1]}
			}
		}
		if s.HeldNodes != nil {
			held += s.HeldNodes()
		}
		if s.Gangs != nil {
			for phase, n := range s.Gangs() {
				gangs[phase] += n
			}
		}
		if s.GatedGangs != nil {
			for reason, n := range s.GatedGangs() {
				gated[reason] += n
			}
		}
		if s.ExcludedHyperNodes != nil {
			for reason, n := range s.ExcludedHyperNodes() {
				excluded[reason] += n
			}
		}
	}
	emit(ch, gangsDesc, gangs)
	emit(ch, gangsGatedDesc, gated)
	emit(ch, excludedDesc, excluded)
	ch <- metrics.NewLazyConstMetric(heldNodesDesc, metrics.GaugeValue, float64(held))
	classes := make([]string, 0, len(devices))
	for class := range devices {
		classes = append(classes, class)
	}
	sort.Strings(classes)
	for _, class := range classes {
		d := devices[class]
		ch <- metrics.NewLazyConstMetric(devicesDesc, metrics.GaugeValue, float64(d[1]), class, "allocated")
		ch <- metrics.NewLazyConstMetric(devicesDesc, metrics.GaugeValue, float64(d[0]-d[1]), class, "free")
	}
}

// emit sends one gauge sample per reason, in a stable order.
func emit(ch chan<- metrics.Metric, desc *metrics.Desc, byReason map[string]int) {
	reasons := make([]string, 0, len(byReason))
	for r := range byReason {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		ch <- metrics.NewLazyConstMetric(desc, metrics.GaugeValue, float64(byReason[r]), r)
	}
}
