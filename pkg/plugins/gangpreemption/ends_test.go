package gangpreemption

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// endLog records the preemption ends the plugin announces (Registry.PreemptionEnded).
type endLog struct {
	mu   sync.Mutex
	keys []string
}

func (l *endLog) add(key podgroup.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, key.String())
}

func (l *endLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.keys...)
}

// TestPreemptionEndIsAnnounced: Gang keeps the gang's waiting members past its timeout while
// Registry.Preempting says a preemption runs (victims terminating, or still in the
// scheduler's cache), and sets their deadline again when the plugin announces the end: each
// way an attempt ends announces it exactly once, and Preempting is false by then.
func TestPreemptionEndIsAnnounced(t *testing.T) {
	tests := []struct {
		name string
		// drainSlack shortens the drain's time limit (0: unchanged).
		drainSlack time.Duration
		end        func(t *testing.T, e *drainEnv)
	}{
		{name: "victims gone and out of the cache", end: func(t *testing.T, e *drainEnv) {
			e.pl.victimGone(e.logger, e.low1)
			e.pl.victimGone(e.logger, e.low2)
			e.cache()
			e.passes(t, e.train0)
		}},
		{name: "the drain's time limit", drainSlack: time.Nanosecond, end: func(t *testing.T, e *drainEnv) {
			e.pl.victimGone(e.logger, e.low1)
			e.pl.victimGone(e.logger, e.low2)
		}},
		{name: "PodGroup deleted while victims terminate", end: func(t *testing.T, e *drainEnv) { e.pl.forget(e.key) }},
		{name: "PodGroup deleted while draining", end: func(t *testing.T, e *drainEnv) {
			e.pl.victimGone(e.logger, e.low1)
			e.pl.victimGone(e.logger, e.low2)
			e.pl.forget(e.key)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.drainSlack > 0 {
				old := drainSlack
				drainSlack = tc.drainSlack
				t.Cleanup(func() { drainSlack = old })
			}
			e := newDrainEnv(t)
			ends := &endLog{}
			e.gangs.OnPreemptionEnd(ends.add)
			if !e.gangs.Preempting(e.key) {
				t.Fatal("Preempting = false while the victims terminate")
			}
			tc.end(t, e)
			if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				return len(ends.get()) > 0, nil
			}); err != nil {
				t.Fatal("no end announced")
			}
			if e.gangs.Preempting(e.key) {
				t.Error("Preempting = true after the end")
			}
			e.nothingLeft(t)
			if diff := cmp.Diff([]string{"ns/train"}, ends.get()); diff != "" {
				t.Errorf("ends announced (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestPreemptionRunsUntilTheCacheDropsTheVictims: the victims' deletion does not end the
// preemption for Gang, nor does a new attempt that replaces it; the end of the victims' grace
// period does (the attempt's own time limit).
func TestPreemptionRunsUntilTheCacheDropsTheVictims(t *testing.T) {
	e := newDrainEnv(t)
	ends := &endLog{}
	e.gangs.OnPreemptionEnd(ends.add)
	e.pl.victimGone(e.logger, e.low1)
	e.pl.victimGone(e.logger, e.low2)
	e.cache(e.low2)
	e.refused(t, e.train0, 1, "node-1")
	if !e.gangs.Preempting(e.key) || len(ends.get()) > 0 {
		t.Fatalf("while the cache holds a victim: Preempting %v, ends %v; want true, none", e.gangs.Preempting(e.key), ends.get())
	}

	e.pl.gangs.Lock()
	e.pl.startLocked(e.logger, e.key, &gangstate.Preemption{Domain: wholeCluster, Victims: []*v1.Pod{e.other}})
	e.pl.gangs.Unlock()
	if !e.gangs.Preempting(e.key) || len(ends.get()) > 0 {
		t.Fatalf("after a new attempt began: Preempting %v, ends %v; want true, none", e.gangs.Preempting(e.key), ends.get())
	}

	old := victimSlack
	victimSlack = time.Nanosecond
	t.Cleanup(func() { victimSlack = old })
	e.pl.gangs.Lock()
	// A victim that may take no time to terminate: the attempt's time limit is victimSlack.
	quick := st.MakePod().Namespace("ns").Name("quick").UID("quick").Node("node-3").Obj()
	quick.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	e.pl.startLocked(e.logger, e.key, &gangstate.Preemption{Domain: wholeCluster, Victims: []*v1.Pod{quick}})
	e.pl.gangs.Unlock()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(ends.get()) > 0, nil
	}); err != nil {
		t.Fatal("no end announced at the victims' time limit")
	}
	e.nothingLeft(t)
	if diff := cmp.Diff([]string{"ns/train"}, ends.get()); diff != "" || e.gangs.Preempting(e.key) {
		t.Errorf("ends announced (-want,+got):\n%s; Preempting %v", diff, e.gangs.Preempting(e.key))
	}
}

// nothingLeft checks that no attempt runs or drains: no timer is left to announce another end.
func (e *drainEnv) nothingLeft(t *testing.T) {
	t.Helper()
	if waiting, draining, _ := e.gangs.PreemptionsLeft(); len(waiting) != 0 || len(draining) != 0 {
		t.Errorf("left behind: running %v, draining %v", waiting, draining)
	}
}
