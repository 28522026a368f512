package gangpreemption

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// Parallelizer runs the evictions one after another, in the victims' order: which victim's
// failure stops which eviction is then fixed.
func (h *cacheView) Parallelizer() fwk.Parallelizer {
	schedmetrics.Register() // the parallelizer counts its goroutines
	return parallelize.NewParallelizer(1)
}

// evictions records the victims the plugin evicted, answering each through answer.
type evictions struct {
	mu     sync.Mutex
	called []string
	answer func(ctx context.Context, victim *v1.Pod) (inMemory bool, err error)
}

func (ev *evictions) evict(ctx context.Context, _ *gangPreemptor, victim *v1.Pod) (bool, error) {
	ev.mu.Lock()
	ev.called = append(ev.called, victim.Name)
	ev.mu.Unlock()
	return ev.answer(ctx, victim)
}

func (ev *evictions) get() []string {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return slices.Clone(ev.called)
}

// TestEvictionsAfterTheCycle: train's attempt (victims low-node-1, low-node-2; train-0 on
// node-1, train-1 on node-2) evicts after its cycle. Evicted victims are waited for; one
// rejected in memory (it waited in Permit) is not; the first failure stops the rest, ends the
// attempt, withdraws both nominations, activates the members and says so in an Event;
// evictions of an attempt abandoned meanwhile stop, and nothing more is announced.
func TestEvictionsAfterTheCycle(t *testing.T) {
	refused := errors.New("admission webhook denied the request")
	tests := []struct {
		name   string
		answer func(ctx context.Context, victim *v1.Pod) (bool, error)
		// during runs while the first eviction is under way (nil: nothing).
		during      func(e *drainEnv)
		wantEvicted []string
		// wantWaiting are the victims the attempt still waits for; nil: it ended.
		wantWaiting    []string
		wantActivated  []string
		wantEnds       []string
		wantEvent      string
		wantNominating map[string]string
	}{{
		name:        "every victim evicted",
		answer:      func(context.Context, *v1.Pod) (bool, error) { return false, nil },
		wantEvicted: []string{"low-node-1", "low-node-2"},
		wantWaiting: []string{"low-node-1", "low-node-2"},
	}, {
		name: "a victim waiting in Permit rejected in memory",
		answer: func(_ context.Context, v *v1.Pod) (bool, error) {
			return v.Name == "low-node-2", nil
		},
		wantEvicted: []string{"low-node-1", "low-node-2"},
		wantWaiting: []string{"low-node-1"},
	}, {
		name: "an eviction fails",
		answer: func(_ context.Context, v *v1.Pod) (bool, error) {
			return false, refused
		},
		wantEvicted:   []string{"low-node-1"},
		wantActivated: []string{"train-0", "train-1"},
		wantEnds:      []string{"ns/train"},
		wantEvent: "Warning GangPreemptionFailed gang ns/train: evicting ns/low-node-1 in the cluster failed: admission webhook denied the request; " +
			"0 of the 2 pods chosen were evicted; the members' nominations are withdrawn and the gang is retried",
		wantNominating: map[string]string{"train-0": "", "train-1": ""},
	}, {
		name: "the second eviction fails",
		answer: func(_ context.Context, v *v1.Pod) (bool, error) {
			if v.Name == "low-node-2" {
				return false, refused
			}
			return false, nil
		},
		wantEvicted:   []string{"low-node-1", "low-node-2"},
		wantActivated: []string{"train-0", "train-1"},
		wantEnds:      []string{"ns/train"},
		wantEvent: "Warning GangPreemptionFailed gang ns/train: evicting ns/low-node-2 in the cluster failed: admission webhook denied the request; " +
			"1 of the 2 pods chosen were evicted; the members' nominations are withdrawn and the gang is retried",
		wantNominating: map[string]string{"train-0": "", "train-1": ""},
	}, {
		name: "the PodGroup deleted while evicting",
		answer: func(ctx context.Context, _ *v1.Pod) (bool, error) {
			<-ctx.Done() // the call returns when the attempt is abandoned
			return false, ctx.Err()
		},
		during:      func(e *drainEnv) { e.pl.forget(e.key) },
		wantEvicted: []string{"low-node-1"},
		// forget announces the end and withdraws the nominations; the evictions add nothing.
		wantEnds:       []string{"ns/train"},
		wantNominating: map[string]string{"train-0": "", "train-1": ""},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newDrainEnv(t)
			recorder := events.NewFakeRecorder(10)
			e.pl.events = podgroup.NewEventLog(recorder, eventAction)
			// The victims still exist: the fake evictions delete nothing.
			pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			for _, p := range []*v1.Pod{e.low1, e.low2, e.other} {
				if err := pods.Add(p); err != nil {
					t.Fatal(err)
				}
			}
			e.pl.pods = corelisters.NewPodLister(pods)
			ends := &endLog{}
			e.registry.OnPreemptionEnd(ends.add)
			started := make(chan struct{})
			var once sync.Once
			ev := &evictions{answer: func(ctx context.Context, v *v1.Pod) (bool, error) {
				once.Do(func() { close(started) })
				return tc.answer(ctx, v)
			}}
			e.pl.evictPod = ev.evict
			e.pl.mu.Lock()
			a := e.pl.running[e.key]
			e.pl.mu.Unlock()
			pg := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train"}}
			e.pl.startEvictions(e.logger, pg, e.key, a, &gangPreemptor{pod: e.train0})
			<-started
			if tc.during != nil {
				tc.during(e)
			}
			e.pl.evicting.Wait()

			if diff := cmp.Diff(tc.wantEvicted, ev.get()); diff != "" {
				t.Errorf("evicted (-want,+got):\n%s", diff)
			}
			e.pl.mu.Lock()
			var waiting []string
			if a := e.pl.running[e.key]; a != nil {
				waiting = sortedUIDs(a.waiting)
			}
			e.pl.mu.Unlock()
			if diff := cmp.Diff(tc.wantWaiting, waiting); diff != "" {
				t.Errorf("victims waited for (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantActivated, e.h.takeActivated()); diff != "" {
				t.Errorf("activated (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEnds, ends.get()); diff != "" {
				t.Errorf("ends announced (-want,+got):\n%s", diff)
			}
			var recorded []string
			for len(recorder.Events) > 0 {
				recorded = append(recorded, <-recorder.Events)
			}
			var wantEvents []string
			if tc.wantEvent != "" {
				wantEvents = []string{tc.wantEvent}
			}
			if diff := cmp.Diff(wantEvents, recorded); diff != "" {
				t.Errorf("Events (-want,+got):\n%s", diff)
			}
			nominating := map[string]string{}
			for _, m := range []*v1.Pod{e.train0, e.train1} {
				if wish, ok := e.pl.nominations.Pending(m.Namespace, m.Name); ok {
					nominating[m.Name] = wish
				}
			}
			if tc.wantNominating == nil {
				tc.wantNominating = map[string]string{}
			}
			if diff := cmp.Diff(tc.wantNominating, nominating); diff != "" {
				t.Errorf("nominations written (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestAbandonedAttemptEvictsNothing: an attempt abandoned before its evictions start (its
// PodGroup deleted right after the cycle's decision) sends none.
func TestAbandonedAttemptEvictsNothing(t *testing.T) {
	e := newDrainEnv(t)
	ev := &evictions{answer: func(context.Context, *v1.Pod) (bool, error) { return false, nil }}
	e.pl.evictPod = ev.evict
	e.pl.mu.Lock()
	a := e.pl.running[e.key]
	e.pl.mu.Unlock()
	e.pl.forget(e.key)
	e.pl.startEvictions(e.logger, nil, e.key, a, &gangPreemptor{pod: e.train0})
	e.pl.evicting.Wait()
	if got := ev.get(); len(got) != 0 {
		t.Errorf("evicted %v for an abandoned attempt, want nothing", got)
	}
}

// sortedUIDs returns the set's UIDs in order.
func sortedUIDs(s sets.Set[types.UID]) []string {
	var out []string
	for uid := range s {
		out = append(out, string(uid))
	}
	slices.Sort(out)
	return out
}
