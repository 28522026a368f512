package gangpreemption

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/metrics"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/metrics/metricstest"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/eventlog"
)

// Parallelizer runs the evictions one after another, in the victims' order, unless a test
// sets more: which victim's failure stops which eviction is then fixed.
func (h *cacheView) Parallelizer() fwk.Parallelizer {
	schedmetrics.Register() // the parallelizer counts its goroutines
	return parallelize.NewParallelizer(max(1, h.parallelism))
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
// node-1, train-1 on node-2) evicts after its cycle, one call at a time. Evicted victims are
// waited for, minus those seen deleted meanwhile, gone already, or rejected in memory (they
// waited in Permit). The first failure stops sending the rest, ends the attempt, withdraws
// both nominations, activates the members, keeps the refused pod from being chosen again and
// says so in an Event. An attempt abandoned meanwhile sends no more, and announces nothing
// more.
func TestEvictionsAfterTheCycle(t *testing.T) {
	refused := errors.New("admission webhook denied the request")
	evictedAll := func(context.Context, *v1.Pod) (bool, error) { return false, nil }
	tests := []struct {
		name   string
		answer func(ctx context.Context, victim *v1.Pod) (bool, error)
		// during runs inside the first eviction call (nil: nothing).
		during func(e *drainEnv)
		// gone are victims already deleted from the API when the evictions start.
		gone        []string
		wantEvicted []string
		// wantWaiting are the victims the attempt still waits for; nil: it ended.
		wantWaiting    []string
		wantActivated  []string
		wantEnds       []string
		wantEvent      string
		wantNominating map[string]string
		wantRefused    []string
		wantResult     string
	}{{
		name:        "every victim evicted",
		answer:      evictedAll,
		wantEvicted: []string{"low-node-1", "low-node-2"},
		wantWaiting: []string{"low-node-1", "low-node-2"},
		wantResult:  metrics.ResultEvicted,
	}, {
		name:        "a victim's deletion seen during its call",
		answer:      evictedAll,
		during:      func(e *drainEnv) { e.pl.victimGone(e.logger, e.low1) },
		wantEvicted: []string{"low-node-1", "low-node-2"},
		wantWaiting: []string{"low-node-2"},
		wantResult:  metrics.ResultEvicted,
	}, {
		name:        "a victim gone before the evictions",
		answer:      evictedAll,
		gone:        []string{"low-node-2"},
		wantEvicted: []string{"low-node-1", "low-node-2"},
		wantWaiting: []string{"low-node-1"},
		wantResult:  metrics.ResultEvicted,
	}, {
		name: "a victim waiting in Permit rejected in memory",
		answer: func(_ context.Context, v *v1.Pod) (bool, error) {
			return v.Name == "low-node-2", nil
		},
		wantEvicted: []string{"low-node-1", "low-node-2"},
		wantWaiting: []string{"low-node-1"},
		wantResult:  metrics.ResultEvicted,
	}, {
		name: "an eviction fails",
		answer: func(_ context.Context, v *v1.Pod) (bool, error) {
			return false, refused
		},
		wantEvicted:   []string{"low-node-1"},
		wantActivated: []string{"train-0", "train-1"},
		wantEnds:      []string{"ns/train"},
		wantEvent: "Warning GangPreemptionFailed gang ns/train: evicting ns/low-node-1 in the cluster failed: admission webhook denied the request; " +
			"0 of the 2 pods chosen were evicted; the members' nominations are withdrawn and the gang is retried; ns/low-node-1 is not chosen again for 5m0s",
		wantNominating: map[string]string{"train-0": "", "train-1": ""},
		wantRefused:    []string{"low-node-1"},
		wantResult:     metrics.ResultFailed,
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
			"1 of the 2 pods chosen were evicted; the members' nominations are withdrawn and the gang is retried; ns/low-node-2 is not chosen again for 5m0s",
		wantNominating: map[string]string{"train-0": "", "train-1": ""},
		wantRefused:    []string{"low-node-2"},
		wantResult:     metrics.ResultFailed,
	}, {
		name:        "the PodGroup deleted while evicting",
		answer:      evictedAll,
		during:      func(e *drainEnv) { e.pl.forget(e.key) },
		wantEvicted: []string{"low-node-1"},
		// forget announces the end, withdraws the nominations and activates the members
		// (refused in PreFilter meanwhile); the evictions add nothing.
		wantActivated:  []string{"train-0", "train-1"},
		wantEnds:       []string{"ns/train"},
		wantNominating: map[string]string{"train-0": "", "train-1": ""},
		wantResult:     metrics.ResultStopped,
	}, {
		name:          "the attempt's deadline passes while evicting",
		answer:        evictedAll,
		during:        expireRunning,
		wantEvicted:   []string{"low-node-1"},
		wantActivated: []string{"train-0", "train-1"},
		wantEnds:      []string{"ns/train"},
		wantResult:    metrics.ResultStopped,
	}, {
		name:          "an eviction fails after the attempt's deadline",
		answer:        func(context.Context, *v1.Pod) (bool, error) { return false, refused },
		during:        expireRunning,
		wantEvicted:   []string{"low-node-1"},
		wantActivated: []string{"train-0", "train-1"},
		wantEnds:      []string{"ns/train"},
		wantEvent: "Warning GangPreemptionFailed gang ns/train: evicting ns/low-node-1 in the cluster failed: admission webhook denied the request; " +
			"0 of the 2 pods chosen were evicted; the preemption had already ended; ns/low-node-1 is not chosen again for 5m0s",
		wantRefused: []string{"low-node-1"},
		wantResult:  metrics.ResultFailed,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newDrainEnv(t)
			e.inAPI(t, tc.gone...)
			var once sync.Once
			run := e.observeEvictions(t, func(ctx context.Context, v *v1.Pod) (bool, error) {
				if tc.during != nil {
					once.Do(func() { tc.during(e) })
				}
				return tc.answer(ctx, v)
			})
			e.pl.gangs.Lock()
			a := e.pl.gangs.WaitingPreemptionLocked(e.key)
			e.pl.gangs.Unlock()
			e.pl.startEvictions(e.logger, trainPodGroup, e.key, a, &gangPreemptor{pod: e.train0, priority: corev1helpers.PodPriority(e.train0)})
			e.pl.evicting.Wait()
			run.check(t, evictionOutcome{evicted: tc.wantEvicted, waiting: tc.wantWaiting, activated: tc.wantActivated,
				ends: tc.wantEnds, event: tc.wantEvent, nominating: tc.wantNominating, refused: tc.wantRefused, result: tc.wantResult})
		})
	}
}

// trainPodGroup is the PodGroup the env's attempt evicts for.
var trainPodGroup = &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train"}}

// evictionRun observes an env's evictions: the calls, Events, announced ends and metric.
type evictionRun struct {
	e        *drainEnv
	ev       *evictions
	recorder *events.FakeRecorder
	ends     *endLog
	before   map[string]uint64
}

// observeEvictions answers the env's eviction calls through answer and starts observing.
func (e *drainEnv) observeEvictions(t *testing.T, answer func(ctx context.Context, victim *v1.Pod) (bool, error)) *evictionRun {
	t.Helper()
	r := &evictionRun{e: e, ev: &evictions{answer: answer}, recorder: events.NewFakeRecorder(10), ends: &endLog{}}
	e.pl.events = eventlog.New(r.recorder, eventAction)
	e.gangs.OnPreemptionEnd(r.ends.add)
	e.pl.evictPod = r.ev.evict
	var err error
	if r.before, err = metricstest.GangPreemptionEvictions(nil); err != nil {
		t.Fatal(err)
	}
	return r
}

// evictionOutcome is what an attempt's evictions must leave behind.
type evictionOutcome struct {
	evicted []string // in any order
	// waiting are the victims the attempt still waits for; nil: it ended.
	waiting    []string
	activated  []string
	ends       []string
	event      string
	nominating map[string]string
	refused    []string
	result     string
}

func (r *evictionRun) check(t *testing.T, want evictionOutcome) {
	t.Helper()
	e := r.e
	evicted := r.ev.get()
	slices.Sort(evicted)
	if diff := cmp.Diff(want.evicted, evicted); diff != "" {
		t.Errorf("evicted (-want,+got):\n%s", diff)
	}
	e.pl.gangs.Lock()
	var waiting []string
	if a := e.pl.gangs.WaitingPreemptionLocked(e.key); a != nil {
		waiting = sortedUIDs(a.Waiting)
	}
	e.pl.gangs.Unlock()
	if diff := cmp.Diff(want.waiting, waiting); diff != "" {
		t.Errorf("victims waited for (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(want.activated, e.h.takeActivated()); diff != "" {
		t.Errorf("activated (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(want.ends, r.ends.get()); diff != "" {
		t.Errorf("ends announced (-want,+got):\n%s", diff)
	}
	var recorded, wantEvents []string
	for len(r.recorder.Events) > 0 {
		recorded = append(recorded, <-r.recorder.Events)
	}
	if want.event != "" {
		wantEvents = []string{want.event}
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
	if want.nominating == nil {
		want.nominating = map[string]string{}
	}
	if diff := cmp.Diff(want.nominating, nominating); diff != "" {
		t.Errorf("nominations written (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(want.refused, sortedUIDs(e.pl.refusedVictims())); diff != "" {
		t.Errorf("victims not chosen again (-want,+got):\n%s", diff)
	}
	counts := map[string]uint64{metrics.ResultEvicted: 0, metrics.ResultFailed: 0, metrics.ResultStopped: 0}
	counts[want.result] = 1
	got, err := metricstest.GangPreemptionEvictions(r.before)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(counts, got); diff != "" {
		t.Errorf("eviction metric counts by result (-want,+got):\n%s", diff)
	}
}

// expireRunning runs the deadline of train's running attempt, as its timer does.
func expireRunning(e *drainEnv) {
	e.pl.gangs.Lock()
	a := e.pl.gangs.WaitingPreemptionLocked(e.key)
	e.pl.gangs.Unlock()
	e.pl.expire(e.logger, e.key, a)
}

// inAPI gives the plugin a pod lister of the env's pods but gone: the fake evictions delete
// nothing.
func (e *drainEnv) inAPI(t *testing.T, gone ...string) {
	t.Helper()
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, p := range []*v1.Pod{e.low1, e.low2, e.other} {
		if !slices.Contains(gone, p.Name) {
			if err := pods.Add(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.pl.pods = corelisters.NewPodLister(pods)
}

// TestRefusedVictimIsSpared: a pod whose eviction failed is not a victim until refusalMemory
// has passed, nor is a gang with such a member; other pods of lower priority still are.
func TestRefusedVictimIsSpared(t *testing.T) {
	e := newDrainEnv(t)
	batch := st.MakePod().Namespace("ns").Name("batch-0").UID("batch-0").Label(schedulingv1alpha1.PodGroupLabel, "batch").Node("node-3").Obj()
	e.pl.refusedMu.Lock()
	e.pl.refused[e.low1.UID] = time.Now().Add(time.Minute)
	e.pl.refused[batch.UID] = time.Now().Add(time.Minute)
	e.pl.refused["expired"] = time.Now().Add(-time.Second)
	e.pl.refusedMu.Unlock()
	sim := &simulation{pl: e.pl, own: e.key, priority: 100, units: map[string]*unit{}, spared: sets.New[string](),
		refused: e.pl.refusedVictims(), sparedRefused: sets.New[string]()}
	got := map[string]bool{}
	for _, p := range []*v1.Pod{e.low1, e.low2, batch} {
		got[p.Name] = sim.unitOf(p) != nil
	}
	if diff := cmp.Diff(map[string]bool{"low-node-1": false, "low-node-2": true, "batch-0": false}, got); diff != "" {
		t.Errorf("victims (-want,+got):\n%s", diff)
	}
	if got, want := sim.refusalNote(), " (but 2 pod(s) or gang(s) whose eviction failed in the last 5m0s)"; got != want {
		t.Errorf("refusal note %q, want %q", got, want)
	}
	if _, ok := e.pl.refused["expired"]; ok {
		t.Error("an expired refusal is still remembered")
	}
}

// TestAbandonedAttemptEvictsNothing: an attempt abandoned before its evictions start (its
// PodGroup deleted right after the cycle's decision) sends none.
func TestAbandonedAttemptEvictsNothing(t *testing.T) {
	e := newDrainEnv(t)
	ev := &evictions{answer: func(context.Context, *v1.Pod) (bool, error) { return false, nil }}
	e.pl.evictPod = ev.evict
	e.pl.gangs.Lock()
	a := e.pl.gangs.WaitingPreemptionLocked(e.key)
	e.pl.gangs.Unlock()
	e.pl.forget(e.key)
	e.pl.startEvictions(e.logger, nil, e.key, a, &gangPreemptor{pod: e.train0, priority: corev1helpers.PodPriority(e.train0)})
	e.pl.evicting.Wait()
	if got := ev.get(); len(got) != 0 {
		t.Errorf("evicted %v for an abandoned attempt, want nothing", got)
	}
}

// TestFailureWhileAnotherEvictionRuns: two evictions at a time, victims low-node-1,
// low-node-2 and other, in that order. low-node-2's call fails while low-node-1's is in
// flight: other is never sent, and low-node-1's call runs to its end with a context that the
// failure did not cancel (a call cut between its condition and its delete would leave a
// running pod marked for disruption), and counts as evicted in the failure's Event.
func TestFailureWhileAnotherEvictionRuns(t *testing.T) {
	e := newDrainEnv(t)
	e.h.parallelism = 2
	e.inAPI(t)
	e.pl.gangs.Lock()
	e.pl.gangs.EndPreemptionLocked(e.key, e.pl.gangs.WaitingPreemptionLocked(e.key))
	a := &gangstate.Preemption{Domain: wholeCluster, Victims: []*v1.Pod{e.low1, e.low2, e.other},
		Members: []*v1.Pod{e.train0, e.train1}, Nodes: map[types.UID]string{e.train0.UID: "node-1", e.train1.UID: "node-2"}}
	e.pl.startLocked(e.logger, e.key, a)
	e.pl.gangs.Unlock()
	// The order is fixed by kube-scheduler's parallelizer: 3 victims on 2 workers are 3 chunks
	// of one, taken in order, so low-node-2 goes to the worker that low-node-1 does not block.
	// (With 4 or more victims a chunk holds two, and one worker would run both in turn.)
	// evict is called directly, not through startEvictions, to give it a sending context the
	// calls can watch.
	sending, stop := context.WithCancel(e.ctx)
	firstInFlight := make(chan struct{})
	var inFlightCtxErr error
	run := e.observeEvictions(t, func(ctx context.Context, v *v1.Pod) (bool, error) {
		switch v.Name {
		case "low-node-1":
			close(firstInFlight)
			select {
			case <-sending.Done(): // the failure stopped the sending
			case <-time.After(wait.ForeverTestTimeout):
				t.Error("low-node-2's failure did not stop the sending")
			}
			inFlightCtxErr = ctx.Err()
			return false, nil
		case "low-node-2":
			<-firstInFlight
			return false, errors.New("admission webhook denied the request")
		}
		return false, nil
	})
	e.pl.evicting.Add(1)
	e.pl.evict(sending, stop, e.logger, trainPodGroup, e.key, a, &gangPreemptor{pod: e.train0, priority: corev1helpers.PodPriority(e.train0)})

	if inFlightCtxErr != nil {
		t.Errorf("the call in flight had its context cancelled by the failure: %v", inFlightCtxErr)
	}
	run.check(t, evictionOutcome{
		evicted:   []string{"low-node-1", "low-node-2"}, // not other
		activated: []string{"train-0", "train-1"},
		ends:      []string{"ns/train"},
		event: "Warning GangPreemptionFailed gang ns/train: evicting ns/low-node-2 in the cluster failed: admission webhook denied the request; " +
			"1 of the 3 pods chosen were evicted; the members' nominations are withdrawn and the gang is retried; ns/low-node-2 is not chosen again for 5m0s",
		nominating: map[string]string{"train-0": "", "train-1": ""},
		refused:    []string{"low-node-2"},
		result:     metrics.ResultFailed,
	})
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

// AddNominatedPod: actuate nominates the members it places in kube-scheduler's memory.
func (h *cacheView) AddNominatedPod(klog.Logger, fwk.PodInfo, *fwk.NominatingInfo) {}

// TestPostFilterDoesNotWaitForTheEvictions: the cycle that preempts returns with the
// member's nomination while the eviction calls are still blocked, with the attempt already
// counting the victims down and the other member nominated; the calls then complete.
func TestPostFilterDoesNotWaitForTheEvictions(t *testing.T) {
	schedmetrics.Register()
	e := newDrainEnv(t)
	e.pl.gangs.Lock()
	e.pl.gangs.EndPreemptionLocked(e.key, e.pl.gangs.WaitingPreemptionLocked(e.key)) // actuate starts its own
	e.pl.gangs.Unlock()
	release := make(chan struct{})
	ev := &evictions{answer: func(context.Context, *v1.Pod) (bool, error) {
		<-release
		return false, nil
	}}
	e.pl.evictPod = ev.evict
	e.inAPI(t)
	unitOf := func(p *v1.Pod) *unit {
		return &unit{key: "pod ns/" + p.Name, pods: []placed{{pod: p, node: p.Spec.NodeName}}}
	}
	c := &choice{domain: domain{name: wholeCluster, nodes: []string{"node-1", "node-2", "node-3"}},
		victims: []*unit{unitOf(e.low1), unitOf(e.low2)}, assign: map[string]string{"train-0": "node-1", "train-1": "node-2"}}
	returned := make(chan *fwk.PostFilterResult)
	go func() {
		result, _ := e.pl.actuate(e.ctx, e.train0, e.registry.Gang(e.key), 2, c, nil, 0)
		returned <- result
	}()
	select {
	case result := <-returned:
		if diff := cmp.Diff(nominate("node-1"), result); diff != "" {
			t.Errorf("PostFilter result (-want,+got):\n%s", diff)
		}
	case <-time.After(wait.ForeverTestTimeout):
		close(release)
		t.Fatal("the preempting cycle waited for the eviction calls")
	}
	e.pl.gangs.Lock()
	var waiting []string
	if a := e.pl.gangs.WaitingPreemptionLocked(e.key); a != nil {
		waiting = sortedUIDs(a.Waiting)
	}
	e.pl.gangs.Unlock()
	if diff := cmp.Diff([]string{"low-node-1", "low-node-2"}, waiting); diff != "" {
		t.Errorf("victims waited for while the calls run (-want,+got):\n%s", diff)
	}
	if wish, _ := e.pl.nominations.Pending("ns", "train-1"); wish != "node-2" {
		t.Errorf("train-1's nomination written: %q, want node-2", wish)
	}
	close(release)
	e.pl.evicting.Wait()
	if diff := cmp.Diff([]string{"low-node-1", "low-node-2"}, ev.get()); diff != "" {
		t.Errorf("evicted (-want,+got):\n%s", diff)
	}
}
