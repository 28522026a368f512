package bench

import (
	"context"
	"fmt"
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/localcluster"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// The fault watcher's checks that span objects or time: holds, HyperNode deletions, the
// Lease, and what is closed at the end of a run (faults_watch_test.go follows pods and gangs).

func (w *faultWatcher) podGroup(pg *schedulingv1alpha1.PodGroup, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	rec, err := podgroup.ParseHoldRecord(pg.Annotations)
	if deleted || err != nil {
		rec = nil
	}
	old := w.holds[pg.Name]
	switch {
	case rec == nil && old == nil:
		return
	case rec == nil:
		delete(w.holds, pg.Name)
	default:
		if old == nil {
			w.report.HoldsSeen++
		}
		if old != nil && old.Domain == rec.Domain && old.Since.Equal(rec.Since) {
			w.holds[pg.Name] = rec
			return // the same hold
		}
		w.holds[pg.Name] = rec
	}
	w.holdChanges[pg.Name] = append(w.holdChanges[pg.Name], holdChange{at: w.now(), rec: rec})
}

func (w *faultWatcher) hyperNodeGone(name string) {
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if at, ok := w.deleting[name]; ok && now.Sub(at) < time.Minute {
		delete(w.deleting, name)
		return
	}
	w.report.HyperNodeDeletes++
	w.report.Violations = append(w.report.Violations, fmt.Sprintf("%.1fs: HyperNode %s deleted, not by the harness", now.Sub(w.start).Seconds(), name))
}

func (w *faultWatcher) lease(l *coordinationv1.Lease) {
	if l.Name != localcluster.SchedulerLease {
		return
	}
	holder := ptr.Deref(l.Spec.HolderIdentity, "")
	w.mu.Lock()
	defer w.mu.Unlock()
	if holder != "" && holder != w.holder {
		w.leaders = append(w.leaders, leaderChange{at: w.now(), holder: holder})
	}
	w.holder = holder
}

// tick checks what needs time to pass: holds sharing a node.
func (w *faultWatcher) tick(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			w.checkHolds(now)
			w.checkNodes(now)
		}
	}
}

func (w *faultWatcher) checkHolds(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	owner := map[string]string{}
	seen := map[[2]string]bool{}
	names := make([]string, 0, len(w.holds))
	for name := range w.holds {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, node := range w.holds[name].Nodes {
			if other, ok := owner[node]; ok {
				pair := [2]string{other, name}
				seen[pair] = true
				if _, ok := w.overlaps[pair]; !ok {
					w.overlaps[pair] = &holdOverlap{since: now}
				}
				continue
			}
			owner[node] = name
		}
	}
	for pair, o := range w.overlaps {
		switch {
		case !seen[pair]:
			delete(w.overlaps, pair)
		case !o.reported && now.Sub(o.since) > overlapLimit:
			w.violation(o.since, now, "holds of %s and %s share nodes for more than %v", pair[0], pair[1], overlapLimit)
			o.reported = true
		}
	}
}

// holdOverlap is two holds sharing a node since a time; reported once per stretch.
type holdOverlap struct {
	since    time.Time
	reported bool
}

// checkNodes reports nodes over their allocatable for longer than overLimit; no fault
// explains one: a node's room is the scheduler's to keep.
func (w *faultWatcher) checkNodes(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, n := range w.nodes {
		if !n.overSince.IsZero() && !n.overReported && now.Sub(n.overSince) > overLimit {
			w.report.Violations = append(w.report.Violations, fmt.Sprintf("%.1fs: node %s over its allocatable since %s bound: %v of %v (GPUs, CPU millis, bytes)",
				n.overSince.Sub(w.start).Seconds(), name, n.overBy, n.used, n.alloc))
			n.overReported = true
		}
	}
}

// busyNodes are the nodes with pods bound, by name.
func (w *faultWatcher) busyNodes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for name, n := range w.nodes {
		if n.used[0] > 0 {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// holdsNow returns the holds of the gangs still waiting, for a failover's check.
func (w *faultWatcher) holdsNow() map[string]podgroup.HoldRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]podgroup.HoldRecord{}
	for name, rec := range w.holds {
		if g := w.gangs[name]; g == nil || !g.ran {
			out[name] = *rec
		}
	}
	return out
}

// checkHoldsKept checks what became of the holds a failover found: the first change of each
// record after the leader's death. The same domain with another start is a hold lost (its
// drain starts again); a record removed is lost unless the scheduler released it with a
// reason (its HoldReleased Event); another domain is the new leader's decision (the old one
// no longer fits), counted, not a violation: the same happens without failovers.
func (w *faultWatcher) checkHoldsKept(before map[string]podgroup.HoldRecord, killed time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, was := range before {
		var first *holdChange
		for i, ch := range w.holdChanges[name] {
			if ch.at.After(killed) {
				first = &w.holdChanges[name][i]
				break
			}
		}
		g := w.gangs[name]
		switch {
		case first == nil, g == nil:
		case first.rec != nil && first.rec.Domain != was.Domain:
			w.report.HoldsMovedAfterFailover++
		case first.rec != nil:
			w.report.HoldsLostAtFailover++
			w.report.Violations = append(w.report.Violations, fmt.Sprintf("%.1fs: gang %s's hold of %s started again after the failover at %.1fs (since %v, was %v)",
				first.at.Sub(w.start).Seconds(), name, was.Domain, killed.Sub(w.start).Seconds(), first.rec.Since, was.Since))
		case g.ran, w.releasedAround(name, first.at):
			// Bound, or released with a reason.
		default:
			w.report.HoldsLostAtFailover++
			w.report.Violations = append(w.report.Violations, fmt.Sprintf("%.1fs: gang %s's hold of %s gone after the failover at %.1fs, without a HoldReleased Event",
				first.at.Sub(w.start).Seconds(), name, was.Domain, killed.Sub(w.start).Seconds()))
		}
	}
}

// releasedAround reports a HoldReleased Event for the PodGroup within 10 s of at.
func (w *faultWatcher) releasedAround(name string, at time.Time) bool {
	for _, t := range w.released[name] {
		if d := t.Sub(at); d > -10*time.Second && d < 10*time.Second {
			return true
		}
	}
	return false
}

func (w *faultWatcher) holdReleased(e *v1.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.released[e.InvolvedObject.Name] = append(w.released[e.InvolvedObject.Name], w.now())
}

// failover measures a leader's death: to the next Lease holder, and to the next bind after it.
func (w *faultWatcher) failover(killed time.Time) (acquired, bound time.Duration, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var at time.Time
	for _, l := range w.leaders {
		if l.at.After(killed) {
			at = l.at
			break
		}
	}
	if at.IsZero() {
		return 0, 0, false
	}
	i := sort.Search(len(w.binds), func(i int) bool { return w.binds[i].After(at) })
	if i == len(w.binds) {
		return at.Sub(killed), 0, false
	}
	return at.Sub(killed), w.binds[i].Sub(killed), true
}

// finish closes the checks at the end of a run: gangs still partial, and evictions that no
// pod of higher priority used.
func (w *faultWatcher) finish() FaultChecks {
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	names := make([]string, 0, len(w.gangs))
	for name := range w.gangs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if g := w.gangs[name]; !g.partialSince.IsZero() && !g.ignored {
			w.partialEndedLocked(name, g, now)
		}
	}
	for _, e := range w.evicts {
		used := false
		if n := w.nodes[e.node]; n != nil {
			for _, b := range n.binds {
				if b.at.After(e.at) && b.at.Sub(e.at) <= evictionDeadline && b.priority > e.priority {
					used = true
					break
				}
			}
		}
		if used || now.Sub(e.at) < evictionDeadline {
			continue
		}
		if f := w.explainedLocked(e.at, e.at.Add(evictionDeadline)); f != "" {
			w.report.WastedExplained++
			continue
		}
		w.report.WastedEvictions++
		w.report.Violations = append(w.report.Violations, fmt.Sprintf("%.1fs: %s evicted from %s; no pod of higher priority bound there within %v",
			e.at.Sub(w.start).Seconds(), e.pod, e.node, evictionDeadline))
	}
	if w.cancel != nil {
		w.cancel()
	}
	return w.report
}
