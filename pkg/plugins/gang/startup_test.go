package gang

import (
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	testingclock "k8s.io/utils/clock/testing"
)

// TestMembersMetBeforeTheRegistrySyncsWait: after a restart the queue may meet a member
// before the registry has counted its siblings. Until the registry syncs, PreEnqueue holds
// members back without a condition or an Event (plain pods pass), and activates them all once
// it has; a registry that never syncs opens the gate after the longest wait.
func TestMembersMetBeforeTheRegistrySyncsWait(t *testing.T) {
	for _, tc := range []struct {
		name    string
		syncs   bool
		maxWait time.Duration
	}{
		{name: "the registry syncs", syncs: true, maxWait: time.Hour},
		// Long enough that the checks before it run with the gate closed on a loaded machine.
		{name: "it never does", maxWait: 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 60)
			e.podGroup("train", 3, nil)
			p0 := member("p0", "train")
			e.registry.SetPod(nil, p0) // one of three counted so far
			var synced atomic.Bool
			e.plugin.watchStartup(e.ctx, synced.Load, tc.maxWait)

			for _, p := range []*struct {
				name string
				s    *fwk.Status
			}{{"p0", e.plugin.PreEnqueue(e.ctx, p0)}, {"p1", e.plugin.PreEnqueue(e.ctx, member("p1", "train"))}} {
				if p.s.Code() != fwk.UnschedulableAndUnresolvable || p.s.Message() != startupMessage {
					t.Errorf("PreEnqueue(%s) before the sync = %v, want %q", p.name, p.s, startupMessage)
				}
			}
			if s := e.plugin.PreEnqueue(e.ctx, st.MakePod().Namespace(ns).Name("plain").Obj()); s != nil {
				t.Errorf("PreEnqueue(plain pod) before the sync = %v, want nil", s)
			}
			if got := drain(e.recorder.Events); len(got) != 0 {
				t.Errorf("Events before the sync: %v", got)
			}
			if _, ok := e.plugin.conditions.Pending(ns, "p0"); ok {
				t.Error("a condition write was asked for before the sync")
			}
			if got := activatedNow(e); len(got) != 0 {
				t.Errorf("activated before the sync: %v", got)
			}

			synced.Store(tc.syncs)
			var got []string
			deadline := time.Now().Add(10 * time.Second)
			for len(got) < 2 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
				got = append(got, activatedNow(e)...)
			}
			if diff := cmp.Diff([]string{"team/p0", "team/p1"}, sorted(got)); diff != "" {
				t.Errorf("activated once the gate opened (-want,+got):\n%s", diff)
			}
			// The registry's answer from now on, with its Event.
			want := "waiting for PodGroup team/train to have 3 members (minMember)"
			if s := e.plugin.PreEnqueue(e.ctx, p0); s.Message() != want {
				t.Errorf("PreEnqueue(p0) after the gate opened = %v, want %q", s, want)
			}
			if got := drain(e.recorder.Events); len(got) != 1 {
				t.Errorf("Events after the gate opened: %v, want the WaitingForMembers one", got)
			}
		})
	}
}

// activatedNow returns and forgets the pods activated so far.
func activatedNow(e *env) []string {
	e.activator.mu.Lock()
	defer e.activator.mu.Unlock()
	got := e.activator.activated
	e.activator.activated = nil
	return got
}

// TestStartupWaitCountsFromTheFirstHeldMember: the longest wait runs from the first member
// held, not from the plugin's start: a standby whose informers start only when it leads
// (DelayCacheUntilActive) holds nobody until then.
func TestStartupWaitCountsFromTheFirstHeldMember(t *testing.T) {
	clock := testingclock.NewFakePassiveClock(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
	gate := &startupGate{held: map[string]*v1.Pod{}, clock: clock}
	clock.SetTime(clock.Now().Add(time.Hour))
	if got := gate.heldFor(); got != 0 {
		t.Fatalf("nobody held, an hour after the start: heldFor = %v, want 0", got)
	}
	if !gate.hold(member("p0", "train")) {
		t.Fatal("the closed gate did not hold p0")
	}
	clock.SetTime(clock.Now().Add(time.Minute))
	gate.hold(member("p1", "train"))
	clock.SetTime(clock.Now().Add(time.Minute))
	if got := gate.heldFor(); got != 2*time.Minute {
		t.Errorf("heldFor = %v, want 2m0s (from p0, the first held)", got)
	}
	if got := sorted(slices.Collect(maps.Keys(gate.release()))); !slices.Equal(got, []string{"team/p0", "team/p1"}) {
		t.Errorf("released %v, want team/p0 and team/p1", got)
	}
	if gate.hold(member("p2", "train")) {
		t.Error("the open gate held p2")
	}
}
