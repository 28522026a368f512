package discovery

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/metrics"
)

// Timing of the runners.
type Timing struct {
	// Debounce is how long a runner collects node and HyperNode changes before it rebuilds
	// (10,000 nodes joining at once are one rebuild per Debounce, not 10,000).
	Debounce time.Duration
	// RetryBase and RetryMax bound the back-off after a failure: RetryBase, doubling, at most
	// RetryMax (and never more than the source's interval).
	RetryBase, RetryMax time.Duration
}

func (t Timing) withDefaults() Timing {
	if t.Debounce == 0 {
		t.Debounce = time.Second
	}
	if t.RetryBase == 0 {
		t.RetryBase = 5 * time.Second
	}
	if t.RetryMax == 0 {
		t.RetryMax = 5 * time.Minute
	}
	return t
}

// runner runs one source: it asks the external system at start and every interval (retrying
// failures with a back-off), rebuilds from the last answer when nodes or owned HyperNodes
// change, and reconciles every answer.
type runner struct {
	m        *Manager
	src      source.Source
	print    string
	interval time.Duration

	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	// warnings are the warnings of the last answer, reported only when they change.
	warnings string
}

func newRunner(m *Manager, src source.Source, print string, interval time.Duration) *runner {
	return &runner{m: m, src: src, print: print, interval: interval, kick: make(chan struct{}, 1)}
}

func (r *runner) start(ctx context.Context) {
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("source", r.src.Name()))
	go r.run(ctx)
}

// stop ends the runner and waits for it; its HyperNodes stay as they are.
func (r *runner) stop() {
	r.cancel()
	<-r.done
}

// wake asks for a rebuild from the last answer.
func (r *runner) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *runner) backoff(failures int) time.Duration {
	t := r.m.opts.Timing
	d := t.RetryBase
	for i := 1; i < failures && d < t.RetryMax; i++ {
		d *= 2
	}
	return min(d, t.RetryMax, r.interval)
}

func (r *runner) run(ctx context.Context) {
	defer close(r.done)
	logger := klog.FromContext(ctx)
	logger.Info("Discovery source started", "interval", r.interval)
	nextRefresh := time.Now()
	var rebuildAt time.Time // zero: no rebuild pending
	failures, reconcileFailures := 0, 0
	for {
		due := nextRefresh
		if !rebuildAt.IsZero() && rebuildAt.Before(due) {
			due = rebuildAt
		}
		if wait := time.Until(due); wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				logger.Info("Discovery source stopped")
				return
			case <-r.kick:
				timer.Stop()
				if rebuildAt.IsZero() {
					rebuildAt = time.Now().Add(r.m.opts.Timing.Debounce)
				}
				continue
			case <-timer.C:
			}
		}
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		refresh := !now.Before(nextRefresh)
		rebuildAt = time.Time{}
		res, err := r.src.Discover(ctx, refresh)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, source.ErrNoAnswerYet) {
				continue
			}
			metrics.ObserveDiscovery(r.src.Name(), time.Since(now), err)
			// The note has no countdown: identical failures are one Event (eventlog).
			next := "it is tried again when nodes change"
			if refresh {
				failures++
				retry := r.backoff(failures)
				nextRefresh = now.Add(retry)
				next = fmt.Sprintf("next attempt in %s", retry)
			}
			r.m.report(ctx, v1.EventTypeWarning, source.ReasonOf(err),
				"discovery source %s failed: %v; its %d HyperNodes are kept as they are (%s)",
				r.src.Name(), err, r.owned(), next)
			continue
		}
		recovered := refresh && failures > 0
		if refresh {
			failures = 0
			nextRefresh = now.Add(r.interval)
		}
		sum, err := r.m.reconciler.Reconcile(ctx, r.src.Name(), res.HyperNodes)
		if ctx.Err() != nil {
			return
		}
		metrics.ObserveDiscovery(r.src.Name(), time.Since(now), err)
		if print := fmt.Sprint(res.Warnings); print != r.warnings {
			r.warnings = print
			for _, w := range res.Warnings {
				r.m.report(ctx, v1.EventTypeWarning, w.Reason, "%s", w.Message)
			}
		}
		if len(sum.Conflicts) > 0 {
			r.m.report(ctx, v1.EventTypeWarning, ReasonConflict,
				"discovery source %s: %d wanted HyperNode name(s) are taken by HyperNodes it does not own and were left alone: %s (see the Events of those HyperNodes)",
				r.src.Name(), len(sum.Conflicts), examples(sum.Conflicts))
		}
		if err != nil {
			reconcileFailures++
			rebuildAt = time.Now().Add(r.backoff(reconcileFailures))
			r.m.report(ctx, v1.EventTypeWarning, "ReconcileFailed", "discovery source %s: writing HyperNodes failed (%s so far): %v; retrying", r.src.Name(), sum, err)
			continue
		}
		reconcileFailures = 0
		switch {
		case sum.Changed():
			r.m.report(ctx, v1.EventTypeNormal, ReasonDiscovered, "discovery source %s: %d HyperNodes (%s)", r.src.Name(), len(res.HyperNodes), sum)
		case recovered:
			r.m.report(ctx, v1.EventTypeNormal, ReasonRecovered, "discovery source %s answers again: %d HyperNodes, unchanged", r.src.Name(), len(res.HyperNodes))
		default:
			logger.V(2).Info("Discovery unchanged", "hyperNodes", len(res.HyperNodes), "refresh", refresh)
		}
	}
}

// owned counts the HyperNodes the source owns now.
func (r *runner) owned() int {
	owned, _ := r.m.reconciler.lister.List(labels.SelectorFromSet(labels.Set{source.Label: r.src.Name()}))
	return len(owned)
}

func examples(names []string) string {
	if len(names) <= 5 {
		return joinNames(names)
	}
	return joinNames(names[:5]) + " and more"
}

func joinNames(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}
