package gang

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// asyncClock runs a fake clock's timers in goroutines of their own, as the real clock does
// (the fake one calls them under its lock, which the deadline's own reads of the clock
// need); step advances the clock and waits for the timers that fired.
type asyncClock struct {
	*testingclock.FakeClock
	fired *sync.WaitGroup
}

func (c asyncClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return c.FakeClock.AfterFunc(d, func() { c.fired.Go(f) })
}

func (c asyncClock) step(d time.Duration) {
	c.Step(d)
	c.fired.Wait()
}

// roundsEnv is a gang team/train of minMember 3 with members p0 and p1 waiting in Permit on a
// fake clock (p2 never comes), and a preemption holder the test switches.
type roundsEnv struct {
	*env
	clock   asyncClock
	start   time.Time
	key     podgroup.Key
	waiting []*v1.Pod
}

func newRoundsEnv(t *testing.T, timeoutSeconds int32) *roundsEnv {
	t.Helper()
	e := &roundsEnv{env: newEnv(t, 60), start: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC), key: podgroup.Key{Namespace: ns, Name: "train"}}
	e.clock = asyncClock{FakeClock: testingclock.NewFakeClock(e.start), fired: &sync.WaitGroup{}}
	e.plugin.clock = e.clock
	e.podGroup("train", 3, ptr.To(timeoutSeconds))
	e.waiting = []*v1.Pod{member("p0", "train"), member("p1", "train")}
	for _, p := range append(e.waiting, member("p2", "train")) {
		e.registry.SetPod(nil, p)
	}
	for _, p := range e.waiting {
		if s := e.reserveAndPermit(t, p); s.Code() != fwk.Wait {
			t.Fatalf("Permit(%s) = %v, want Wait", p.Name, s)
		}
	}
	drain(e.recorder.Events)
	return e
}

// deadline is when the gang's round times out.
func (e *roundsEnv) deadline(t *testing.T) time.Time {
	t.Helper()
	e.gangs.Lock()
	defer e.gangs.Unlock()
	r := e.gangs.RoundLocked(e.key)
	if r == nil {
		t.Fatal("the gang has no round")
	}
	return r.DeadlineAt
}

// awaitEvent polls for an Event: the deadline records it after releasing the gang lock.
func (e *env) awaitEvent(t *testing.T, want string) {
	t.Helper()
	var events []string
	if err := wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		events = append(events, drain(e.recorder.Events)...)
		return contains(events, want), nil
	}); err != nil {
		t.Fatalf("events %q do not contain %q", events, want)
	}
}

// assertWaiting fails unless both members are still in the gang's open round.
func (e *roundsEnv) assertWaiting(t *testing.T) {
	t.Helper()
	e.gangs.Lock()
	defer e.gangs.Unlock()
	r := e.gangs.RoundLocked(e.key)
	if r == nil || r.Ended {
		t.Fatal("the gang's round ended")
	}
	for _, p := range e.waiting {
		if r.Members[p.UID] == nil || e.fw.GetWaitingPod(p.UID) == nil {
			t.Errorf("%s no longer waits in the round", p.Name)
		}
	}
}

// assertRejected waits for both members' rejection and checks its message.
func (e *roundsEnv) assertRejected(t *testing.T, want string) {
	t.Helper()
	for _, p := range e.waiting {
		s := e.fw.WaitOnPermit(e.ctx, p)
		if s.Code() != fwk.Unschedulable || s.Message() != want {
			t.Errorf("%s: %v, want Unschedulable %q", p.Name, s, want)
		}
	}
}

// preempting starts a preemption for the gang, with a victim that terminates, or ends it.
func (e *roundsEnv) preempting(on bool) {
	e.gangs.Lock()
	defer e.gangs.Unlock()
	if !on {
		p, _ := e.gangs.PreemptionLocked(e.key)
		e.gangs.EndPreemptionLocked(e.key, p)
		return
	}
	e.gangs.StartPreemptionLocked(e.key, &gangstate.Preemption{Victims: []*v1.Pod{
		st.MakePod().Namespace("other").Name("victim").UID("victim").Node("node-1").Obj()}})
}

// deferDeadline lets the gang's 10 s timeout pass while a preemption for it runs, and checks
// that the round is deferred to the limit, its members still waiting.
func (e *roundsEnv) deferDeadline(t *testing.T) {
	t.Helper()
	e.preempting(true)
	e.clock.step(10 * time.Second)
	e.awaitEvent(t, "Normal GangDeadlineDeferred gang team/train: its timeout (10s) passed while pods evicted for it terminate; its 2 reserved members keep their nodes until 10s after the preemption ends, at most 14m30s after the first one waited")
	if got, want := e.deadline(t), e.start.Add(14*time.Minute+30*time.Second); !got.Equal(want) {
		t.Errorf("deferred deadline %v, want %v", got, want)
	}
	e.assertWaiting(t)
}

// timesOutAfter checks that the round still waits a second before d from now, and times out
// at d: both members rejected with why, and the GangTimedOut Event.
func (e *roundsEnv) timesOutAfter(t *testing.T, d time.Duration, why string) {
	t.Helper()
	e.clock.step(d - time.Second)
	e.assertWaiting(t)
	e.clock.step(time.Second)
	e.assertRejected(t, "gang team/train rejected: "+why)
	e.awaitEvent(t, "Warning GangTimedOut gang team/train: "+why+"; 2 waiting members rejected and their resources released")
}

// TestDeadlineWaitsForThePreemption: the gang's timeout passes while pods evicted for it
// terminate. Its waiting members keep their nodes; when the preemption ends they have the
// gang's timeout again, and then time out as usual.
func TestDeadlineWaitsForThePreemption(t *testing.T) {
	e := newRoundsEnv(t, 10)
	e.deferDeadline(t)
	e.clock.step(5 * time.Minute)
	e.assertWaiting(t)

	e.preempting(false)
	e.gangs.PreemptionEnded(e.key)
	if got, want := e.deadline(t), e.start.Add(5*time.Minute+20*time.Second); !got.Equal(want) {
		t.Errorf("deadline after the preemption %v, want %v", got, want)
	}
	e.timesOutAfter(t, 10*time.Second, "timed out 10s after the preemption for it ended (5m20s in all) waiting for 3 members (minMember); 2 were reserved or bound")
}

// TestDeadlineDeferredAtMostToKubeSchedulersLimit: a preemption that never ends holds the
// waiting members until 30 s before kube-scheduler's own 15-minute limit, and the gang says
// why it was rejected.
func TestDeadlineDeferredAtMostToKubeSchedulersLimit(t *testing.T) {
	e := newRoundsEnv(t, 10)
	e.deferDeadline(t)
	e.timesOutAfter(t, 14*time.Minute+20*time.Second, "waited 14m30s, as long as kube-scheduler lets a pod wait in Permit, for 3 members (minMember) while pods evicted for the gang still terminated; 2 were reserved or bound")
}

// TestPreemptionEndSetsTheDeadline: the end of a preemption gives the waiting members at least
// the gang's timeout from then, never past the limit, and never takes time away.
func TestPreemptionEndSetsTheDeadline(t *testing.T) {
	tests := []struct {
		name           string
		timeoutSeconds int32
		endAfter       time.Duration
		want           time.Duration
	}{
		{name: "ends before the deadline: the timeout again from the end", timeoutSeconds: 10, endAfter: 8 * time.Second, want: 18 * time.Second},
		{name: "ends at once: the later deadline stays", timeoutSeconds: 10, want: 10 * time.Second},
		{name: "the limit bounds it", timeoutSeconds: 600, endAfter: 400 * time.Second, want: 14*time.Minute + 30*time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newRoundsEnv(t, tc.timeoutSeconds)
			e.clock.step(tc.endAfter)
			e.gangs.PreemptionEnded(e.key)
			e.gangs.PreemptionEnded(podgroup.Key{Namespace: ns, Name: "no-round"})
			if got, want := e.deadline(t), e.start.Add(tc.want); !got.Equal(want) {
				t.Errorf("deadline %v after the start, want %v", got.Sub(e.start), tc.want)
			}
			e.assertWaiting(t)
		})
	}
}

// TestPermitWaitsAtMostKubeSchedulersLimit: Permit asks the framework for its longest wait
// (the round's deadline decides), and a PodGroup that asks for a longer timeout gets the
// limit, with an Event that says so.
func TestPermitWaitsAtMostKubeSchedulersLimit(t *testing.T) {
	tests := []struct {
		name           string
		timeoutSeconds int32
		wantTimeout    time.Duration
		wantEvent      string
	}{
		{name: "within the limit", timeoutSeconds: 870, wantTimeout: 870 * time.Second,
			wantEvent: "Normal GangWaiting gang team/train: members are reserved and wait in Permit for the rest of the gang (minMember 2, timeout 14m30s)"},
		{name: "past the limit", timeoutSeconds: 3600, wantTimeout: 870 * time.Second,
			wantEvent: "Normal GangWaiting gang team/train: members are reserved and wait in Permit for the rest of the gang (minMember 2, timeout 14m30s: scheduleTimeoutSeconds 3600 is longer than kube-scheduler lets a pod wait in Permit)"},
		{name: "short", timeoutSeconds: 5, wantTimeout: 5 * time.Second,
			wantEvent: "Normal GangWaiting gang team/train: members are reserved and wait in Permit for the rest of the gang (minMember 2, timeout 5s)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 60)
			e.podGroup("train", 2, ptr.To(tc.timeoutSeconds))
			p0 := member("p0", "train")
			e.registry.SetPod(nil, p0)
			e.registry.SetPod(nil, member("p1", "train"))
			if got := e.plugin.timeout(e.registry.Info(podgroup.Key{Namespace: ns, Name: "train"})); got != tc.wantTimeout {
				t.Errorf("timeout %v, want %v", got, tc.wantTimeout)
			}
			state, waits := e.permitWithoutWaiting(t, p0)
			if diff := cmp.Diff(map[string]time.Duration{Name: 15 * time.Minute}, waits); diff != "" {
				t.Errorf("framework wait (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{tc.wantEvent}, drain(e.recorder.Events)); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
			e.fw.RunReservePluginsUnreserve(e.ctx, state, p0, "node-1")
		})
	}
}

// TestRoundRejectedBeforeTheMemberWaits: kube-scheduler adds a member to its waiting pods only
// after Permit returned Wait, outside the gang lock. A round rejected in between (here by a
// sibling's Unreserve) still rejects that member once it waits, not 15 minutes later.
func TestRoundRejectedBeforeTheMemberWaits(t *testing.T) {
	e := newEnv(t, 60)
	e.podGroup("train", 3, nil)
	p0, p1, p2 := member("p0", "train"), member("p1", "train"), member("p2", "train")
	for _, p := range []*v1.Pod{p0, p1, p2} {
		e.registry.SetPod(nil, p)
	}
	if s := e.reserveAndPermit(t, p0); s.Code() != fwk.Wait {
		t.Fatalf("Permit(p0) = %v, want Wait", s)
	}
	_, waits := e.permitWithoutWaiting(t, p1)
	other := framework.NewCycleState()
	if s := e.fw.RunReservePluginsReserve(e.ctx, other, p2, "node-2"); !s.IsSuccess() {
		t.Fatal(s)
	}
	e.fw.RunReservePluginsUnreserve(e.ctx, other, p2, "node-2")
	e.fw.AddWaitingPod(p1, waits)

	const want = "gang team/train rejected: member p2 was unreserved"
	for _, p := range []*v1.Pod{p0, p1} {
		done := make(chan *fwk.Status, 1)
		go func() { done <- e.fw.WaitOnPermit(e.ctx, p) }()
		select {
		case s := <-done:
			if s.Code() != fwk.Unschedulable || s.Message() != want {
				t.Errorf("%s: %v, want Unschedulable %q", p.Name, s, want)
			}
		case <-time.After(wait.ForeverTestTimeout):
			t.Fatalf("%s still waits in Permit after its round was rejected", p.Name)
		}
	}
	e.awaitEvent(t, "Warning GangRejected gang team/train: member p2 was unreserved; 2 waiting members rejected and their resources released")
}

// TestLateRejectionSparesTheNextAttempt: two waiting members are preempted together and leave
// the waiting pods; the first one's Unreserve rejects the round and looks out for the second,
// which it takes for a member not yet waiting. The second's next attempt must not be
// rejected by that look-out.
func TestLateRejectionSparesTheNextAttempt(t *testing.T) {
	e := newEnv(t, 60)
	e.podGroup("train", 3, nil)
	p0, p1 := member("p0", "train"), member("p1", "train")
	for _, p := range []*v1.Pod{p0, p1, member("p2", "train")} {
		e.registry.SetPod(nil, p)
	}
	for _, p := range []*v1.Pod{p0, p1} {
		if s := e.reserveAndPermit(t, p); s.Code() != fwk.Wait {
			t.Fatalf("Permit(%s) = %v, want Wait", p.Name, s)
		}
	}
	for _, p := range []*v1.Pod{p0, p1} {
		e.fw.GetWaitingPod(p.UID).Preempt("DefaultPreemption", "preempted")
		if s := e.fw.WaitOnPermit(e.ctx, p); s.IsSuccess() {
			t.Fatalf("%s = %v, want preempted", p.Name, s)
		}
	}
	e.unreserve(p0)
	e.unreserve(p1)
	if s := e.reserveAndPermit(t, p1); s.Code() != fwk.Wait {
		t.Fatalf("Permit(p1) again = %v, want Wait", s)
	}
	e.plugin.rejecters.Wait()
	e.fw.GetWaitingPod(p1.UID).Allow(Name)
	if s := e.fw.WaitOnPermit(e.ctx, p1); !s.IsSuccess() {
		t.Errorf("p1's next attempt = %v, want allowed (not rejected by the earlier round's look-out)", s)
	}
}

// permitWithoutWaiting runs Reserve and Permit on node-1 for a member that must wait, and
// returns what kube-scheduler then passes to AddWaitingPod (not called here).
func (e *env) permitWithoutWaiting(t *testing.T, pod *v1.Pod) (fwk.CycleState, map[string]time.Duration) {
	t.Helper()
	state := framework.NewCycleState()
	if s := e.fw.RunReservePluginsReserve(e.ctx, state, pod, "node-1"); !s.IsSuccess() {
		t.Fatalf("Reserve(%s) = %v", pod.Name, s)
	}
	waits, s := e.fw.RunPermitPlugins(e.ctx, state, pod, "node-1")
	if s.Code() != fwk.Wait {
		t.Fatalf("Permit(%s) = %v, want Wait", pod.Name, s)
	}
	return state, waits
}

// TestTimeoutSaysWhatTheSubGroupsLacked: a round of a job with sub-groups that times out says
// which sub-group rule it waited for and how far it got.
func TestTimeoutSaysWhatTheSubGroupsLacked(t *testing.T) {
	e := newEnv(t, 60)
	pods := e.partitionedJob(`[{"name":"tp","subGroupSize":2,"minSubGroups":2,"matchLabelKeys":["partition"]}]`, 4, 6, 2)
	for _, p := range pods[:2] {
		if s := e.reserveAndPermit(t, p); s.Code() != fwk.Wait {
			t.Fatalf("Permit(%s) = %v, want Wait", p.Name, s)
		}
	}
	key := podgroup.Key{Namespace: ns, Name: "job"}
	e.gangs.Lock()
	r := e.gangs.RoundLocked(key)
	armed := r.Armed
	e.gangs.Unlock()
	e.plugin.expire(klog.Background(), key, r, armed)
	const want = "gang team/job rejected: timed out after 1m0s waiting for 4 members (minMember) and 2 complete sub-groups of tp (minSubGroups, 2 members each); 2 were reserved or bound, complete sub-groups of tp: 1"
	if s := e.fw.WaitOnPermit(e.ctx, pods[0]); s.Code() != fwk.Unschedulable || s.Message() != want {
		t.Errorf("p0 = %v, want Unschedulable %q", s, want)
	}
}

// TestPodGroupChangeDecidesTheWaitingRoundAgain: a PodGroup change that completes the waiting
// round (a lower minMember or minSubGroups) allows its members at once; one that asks for more
// leaves them waiting.
func TestPodGroupChangeDecidesTheWaitingRoundAgain(t *testing.T) {
	const policy = `[{"name":"tp","subGroupSize":2,"minSubGroups":%d,"matchLabelKeys":["partition"]}]`
	setJob := func(e *env, minMember int32, annotations map[string]string) {
		e.registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job", UID: "uid-job", Annotations: annotations},
			Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: minMember},
		})
	}
	// threeOfThree is the gang "job" of three members, minMember 3.
	threeOfThree := func(e *env) []*v1.Pod {
		setJob(e, 3, nil)
		pods := []*v1.Pod{member("p0", "job"), member("p1", "job"), member("p2", "job")}
		for _, p := range pods {
			e.registry.SetPod(nil, p)
		}
		return pods
	}
	for _, tc := range []struct {
		name string
		// job makes the gang "job" and returns its members; the first two wait in Permit.
		job    func(e *env) []*v1.Pod
		change func(e *env)
		// allowed is whether p0 and p1 are allowed; event the Event posted.
		allowed bool
		event   string
	}{{
		name:    "minMember lowered to the members reserved",
		job:     threeOfThree,
		change:  func(e *env) { setJob(e, 2, nil) },
		allowed: true,
		event:   "Normal GangScheduled gang team/job: its PodGroup changed; 2 of 2 (minMember) members reserved or bound; 2 waiting members allowed to bind",
	}, {
		name:   "minMember raised",
		job:    threeOfThree,
		change: func(e *env) { setJob(e, 4, nil) },
	}, {
		name: "minSubGroups lowered to the complete sub-groups",
		job: func(e *env) []*v1.Pod {
			return e.partitionedJob(fmt.Sprintf(policy, 2), 4, 4, 2)
		},
		change: func(e *env) {
			setJob(e, 2, map[string]string{podgroup.SubGroupPolicyAnnotation: fmt.Sprintf(policy, 1)})
		},
		allowed: true,
		event:   "Normal GangScheduled gang team/job: its PodGroup changed; 2 of 2 (minMember) members reserved or bound; 2 waiting members allowed to bind",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 60)
			pods := tc.job(e)
			for _, p := range pods[:2] {
				if s := e.reserveAndPermit(t, p); s.Code() != fwk.Wait {
					t.Fatalf("Permit(%s) = %v, want Wait", p.Name, s)
				}
			}
			drain(e.recorder.Events)
			tc.change(e)
			var events []string
			if tc.event != "" {
				events = []string{tc.event}
			}
			if diff := cmp.Diff(events, drain(e.recorder.Events)); diff != "" {
				t.Errorf("Events (-want +got):\n%s", diff)
			}
			for _, p := range pods[:2] {
				if !tc.allowed {
					if e.fw.GetWaitingPod(p.UID) == nil {
						t.Errorf("%s no longer waits in Permit", p.Name)
					}
					continue
				}
				if s := e.fw.WaitOnPermit(e.ctx, p); !s.IsSuccess() {
					t.Errorf("%s = %v, want allowed", p.Name, s)
				}
			}
		})
	}
}

// TestDecideAgainLeavesOutAMemberBetweenReserveAndPermit: minMember is lowered from 4 to 2
// while p0 and p1 wait and p2's cycle is between its Reserve and its Permit. The round is
// allowed without p2, whose own Permit then allows it in a batch that waits for theirs: all
// three bind. Before, p2 was put in the batch, its Permit found its round gone and rejected
// it, and its Unreserve failed the batch the others were allowed in. When p0 fails after
// being allowed, p2's PreBind, which waits for the earlier batch, fails with it: its quorum
// counted p0.
func TestDecideAgainLeavesOutAMemberBetweenReserveAndPermit(t *testing.T) {
	for _, tc := range []struct {
		name           string
		firstFails     bool
		wantP2, wantP1 string
	}{
		{name: "all bind"},
		{name: "p0 does not bind", firstFails: true,
			wantP2: "gang " + ns + "/train: member p0, allowed earlier and counted for this one, did not bind",
			wantP1: "gang " + ns + "/train: member p0 was allowed with this one but did not bind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 60)
			pods := e.gangOf(4, 4)
			for _, p := range pods[:2] {
				if s := e.reserveAndPermit(t, p); s.Code() != fwk.Wait {
					t.Fatalf("Permit(%s) = %v, want Wait", p.Name, s)
				}
			}
			state := framework.NewCycleState()
			if s := e.fw.RunReservePluginsReserve(e.ctx, state, pods[2], "node-1"); !s.IsSuccess() {
				t.Fatal(s)
			}
			e.podGroup("train", 2, nil)
			if _, s := e.fw.RunPermitPlugins(e.ctx, state, pods[2], "node-1"); !s.IsSuccess() {
				t.Fatalf("Permit(p2) = %v, want Success", s)
			}
			p2 := make(chan *fwk.Status, 1)
			go func() { p2 <- e.fw.RunPreBindPlugins(e.ctx, framework.NewCycleState(), pods[2], "node-1") }()
			for _, p := range pods[:2] {
				if s := e.fw.WaitOnPermit(e.ctx, p); !s.IsSuccess() {
					t.Fatalf("%s = %v, want allowed", p.Name, s)
				}
			}
			message := func(s *fwk.Status) string {
				if s.IsSuccess() {
					return ""
				}
				return s.Message()
			}
			if tc.firstFails {
				e.fw.RunReservePluginsUnreserve(e.ctx, framework.NewCycleState(), pods[0], "node-1")
				if got := message(e.fw.RunPreBindPlugins(e.ctx, framework.NewCycleState(), pods[1], "node-1")); !strings.Contains(got, tc.wantP1) {
					t.Errorf("PreBind(p1) = %q, want %q", got, tc.wantP1)
				}
				if got := message(<-p2); !strings.Contains(got, tc.wantP2) {
					t.Errorf("PreBind(p2) = %q, want %q", got, tc.wantP2)
				}
				return
			}
			done := make(chan *fwk.Status, 2)
			for _, p := range pods[:2] {
				go func() { done <- e.fw.RunPreBindPlugins(e.ctx, framework.NewCycleState(), p, "node-1") }()
			}
			for _, ch := range []chan *fwk.Status{done, done, p2} {
				if s := <-ch; !s.IsSuccess() {
					t.Errorf("PreBind = %v, want success: the gang (minMember 2) is complete", s)
				}
			}
		})
	}
}
