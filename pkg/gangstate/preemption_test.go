package gangstate

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// TestPreemptionFollowsItsVictims: a gang's preemption is under way while its victims
// terminate and while it drains; its members' nominations are held meanwhile, and nothing is
// held for another gang or once the drain ends. A new preemption ends the one before, and a
// victim two gangs wait for counts down both.
func TestPreemptionFollowsItsVictims(t *testing.T) {
	tr := New()
	r := tr.Registry()
	running, other := Key{Namespace: "ns", Name: "g"}, Key{Namespace: "ns", Name: "other"}
	m0, o0 := member("m-0", "g"), member("o-0", "other")
	r.SetPod(nil, m0)
	r.SetPod(nil, o0)
	victim := func(name string) *v1.Pod {
		return st.MakePod().Namespace("ns").Name(name).UID(name).Node("node-1").Obj()
	}
	vA, vB := victim("v-1"), victim("v-2")
	check := func(step string, wantRunning, wantOther bool, wantNode string) {
		t.Helper()
		if got := tr.Preempting(running); got != wantRunning {
			t.Errorf("%s: Preempting(g) = %v, want %v", step, got, wantRunning)
		}
		if got := tr.Preempting(other); got != wantOther {
			t.Errorf("%s: Preempting(other) = %v, want %v", step, got, wantOther)
		}
		if node, held := tr.NominationHeld(m0); node != wantNode || held != (wantNode != "") {
			t.Errorf("%s: NominationHeld(m-0) = %q, %v; want %q", step, node, held, wantNode)
		}
		if tr.PreemptionsUnderWay() != (wantRunning || wantOther) {
			t.Errorf("%s: PreemptionsUnderWay = %v", step, tr.PreemptionsUnderWay())
		}
	}
	check("before", false, false, "")

	tr.Lock()
	tr.StartPreemptionLocked(running, &Preemption{Victims: []*v1.Pod{vA, vB}, Members: []*v1.Pod{m0}, Nodes: map[types.UID]string{m0.UID: "node-1"}})
	tr.StartPreemptionLocked(other, &Preemption{Victims: []*v1.Pod{vB}})
	tr.Unlock()
	check("started", true, true, "node-1")

	tr.Lock()
	drained := tr.VictimGoneLocked(vB.UID)
	tr.Unlock()
	if _, ok := drained[other]; len(drained) != 1 || !ok {
		t.Errorf("v-2 gone: drained %v, want only other", drained)
	}
	check("v-2 gone", true, true, "node-1")

	tr.Lock()
	drained = tr.VictimGoneLocked(vA.UID)
	_, draining := tr.PreemptionLocked(running)
	tr.Unlock()
	if _, ok := drained[running]; len(drained) != 1 || !ok || !draining {
		t.Errorf("v-1 gone: drained %v, draining %v; want g, true", drained, draining)
	}
	check("draining", true, true, "node-1")

	tr.Lock()
	stopped := tr.StopDrainingLocked(running)
	again := tr.StopDrainingLocked(running)
	tr.Unlock()
	if !stopped || again {
		t.Errorf("StopDrainingLocked: %v then %v, want true then false", stopped, again)
	}
	check("drained", false, true, "")

	tr.Lock()
	first := &Preemption{Victims: []*v1.Pod{vA}}
	tr.StartPreemptionLocked(running, first)
	if old := tr.StartPreemptionLocked(running, &Preemption{Victims: []*v1.Pod{vB}}); old != first {
		t.Errorf("a new preemption replaced %v, want the first one", old)
	}
	if drained := tr.VictimGoneLocked(vA.UID); len(drained) != 0 {
		t.Errorf("the ended preemption's victim drained %v", drained)
	}
	tr.Unlock()
	check("replaced", true, true, "")
}

// TestPlanPrefersThePreemptedDomain: once a gang's preemption ends, its views name the room
// the preemption made (its domain, the nodes it nominated members on), until a plan places
// members, for PreemptedRoomFor at most; a preemption ended because the PodGroup was
// deleted names none. The failed plan that led to it is forgotten, one made after is not.
func TestPlanPrefersThePreemptedDomain(t *testing.T) {
	start := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	room := &PreemptedRoom{Domain: "spine-1", Nodes: []string{"node-1", "node-2"}}
	for _, tc := range []struct {
		name string
		// steps: "preempt" (spine-1), "drain" (its victim goes and the drain ends), "give up"
		// (EndPreemptionLocked), "forget", "plan" (members placed), "plan nobody", "wait".
		steps []string
		want  *PreemptedRoom
		// wantFailure: the view still has a failed plan ("fail" records one).
		wantFailure bool
	}{
		{name: "none before any preemption", want: nil},
		{name: "none while it is under way", steps: []string{"preempt"}, want: nil},
		{name: "drained", steps: []string{"preempt", "drain"}, want: room},
		{name: "given up", steps: []string{"preempt", "give up"}, want: room},
		{name: "a plan that places nobody keeps it", steps: []string{"preempt", "drain", "plan nobody"}, want: room},
		{name: "a plan that places members uses it up", steps: []string{"preempt", "drain", "plan"}, want: nil},
		{name: "it expires", steps: []string{"preempt", "drain", "wait"}, want: nil},
		{name: "the PodGroup deleted", steps: []string{"preempt", "forget"}, want: nil},
		{name: "the failed plan before it is forgotten", steps: []string{"fail", "preempt", "drain"}, want: room},
		{name: "a failed plan after it is kept", steps: []string{"preempt", "drain", "fail"}, want: room, wantFailure: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newGangEnv(t)
			now := start
			e.tr.now = func() time.Time { return now }
			victim := st.MakePod().Namespace("other").Name("victim").UID("victim").Node("node-1").Obj()
			for _, step := range tc.steps {
				e.locked(func() {
					switch step {
					case "preempt":
						e.tr.StartPreemptionLocked(e.key, &Preemption{Domain: "spine-1", Victims: []*v1.Pod{victim},
							Nodes: map[types.UID]string{"a": "node-2", "b": "node-1", "c": "node-2"}})
					case "drain":
						e.tr.VictimGoneLocked(victim.UID)
						e.tr.StopDrainingLocked(e.key)
					case "give up":
						e.tr.EndPreemptionLocked(e.key, e.tr.WaitingPreemptionLocked(e.key))
					case "forget":
						e.tr.ForgetPreemptionLocked(e.key)
					case "plan":
						e.tr.SetPlanLocked(e.key, plan("a", "b", "c"))
					case "fail":
						e.tr.RecordPlanFailureLocked(e.key, e.pods["a"], &PlanFailure{})
					case "plan nobody":
						e.tr.SetPlanLocked(e.key, plan())
					case "wait":
						now = now.Add(PreemptedRoomFor)
					}
				})
			}
			v, err := e.tr.Begin(context.Background(), framework.NewCycleState(), e.pods["a"], Cycle{
				Placed: func(podgroup.Info) bool { return true },
				Ready:  func(context.Context) (*hypernode.Snapshot, error) { return nil, nil },
				Judge:  func(context.Context, *View) Answer { return Replan },
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, v.Preempted); diff != "" {
				t.Errorf("View.Preempted (-want,+got):\n%s", diff)
			}
			if (v.Failure != nil) != tc.wantFailure {
				t.Errorf("View.Failure %v, want one: %v", v.Failure, tc.wantFailure)
			}
		})
	}
}
