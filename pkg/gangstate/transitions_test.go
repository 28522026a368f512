package gangstate

import (
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices/devicestest"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// fakeHandle is the part of a framework handle the tracker uses: activation, and the profile.
type fakeHandle struct {
	fwk.Handle
	activated []string
}

func (h *fakeHandle) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	for _, p := range pods {
		h.activated = append(h.activated, p.Name)
	}
	sort.Strings(h.activated)
}

func (h *fakeHandle) ProfileName() string { return "hypernode-scheduler" }

// gangEnv is gang ns/g (minMember 3) with members a, b and c, each of which went through a
// scheduling cycle, in a profile that runs GangRetryGate.
type gangEnv struct {
	t        *testing.T
	tr       *Tracker
	reg      *podgroup.Registry
	key      Key
	h        *fakeHandle
	notified int
	pods     map[string]*v1.Pod
}

func newGangEnv(t *testing.T) *gangEnv {
	e := &gangEnv{t: t, tr: New(), key: Key{Namespace: "ns", Name: "g"}, h: &fakeHandle{}, pods: map[string]*v1.Pod{}}
	e.reg = e.tr.Registry()
	e.tr.EnableRetryGate("hypernode-scheduler")
	e.podGroup(3)
	for _, name := range []string{"a", "b", "c"} {
		e.add(name)
	}
	e.reg.OnGroupChange(func(Key, bool) { e.notified++ })
	return e
}

func (e *gangEnv) podGroup(minMember int32) { e.podGroupWith(minMember, nil) }

// podGroupWith sets the PodGroup with annotations (a topology constraint, say).
func (e *gangEnv) podGroupWith(minMember int32, annotations map[string]string) {
	e.reg.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", Annotations: annotations},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: minMember}})
}

func (e *gangEnv) add(name string) {
	p := member(name, "g")
	e.pods[name] = p
	e.reg.SetPod(nil, p)
	e.tr.MarkAttempted(p)
}

// addAwaitingClaims adds a member whose claim from a ResourceClaimTemplate does not exist yet.
func (e *gangEnv) addAwaitingClaims(name string) {
	p := devicestest.FromTemplate(member(name, "g"))
	e.pods[name] = p
	e.reg.SetPod(nil, p)
}

// claimCreated names the member's generated claim in its status.
func (e *gangEnv) claimCreated(name string) {
	named := devicestest.ClaimCreated(e.pods[name])
	e.reg.SetPod(e.pods[name], named)
	e.pods[name] = named
}

func (e *gangEnv) bind(name string) {
	bound := e.pods[name].DeepCopy()
	bound.Spec.NodeName = "node-" + name
	e.reg.SetPod(e.pods[name], bound)
	e.pods[name] = bound
}

// locked runs f with the gangs' lock held.
func (e *gangEnv) locked(f func()) {
	e.tr.Lock()
	defer e.tr.Unlock()
	f()
}

// plan is a plan that promises a slot in leaf s0 to each member named.
func plan(members ...string) *Plan {
	p := &Plan{PodLeaf: map[string]string{}, Promised: map[string]int{}, Reserved: sets.New[string](), Deferred: sets.New[string](),
		PlacedByLeaf: map[string]int{}, Relocated: map[string]string{}}
	for _, m := range members {
		p.PodLeaf[m] = "s0"
		p.Promised["s0"]++
	}
	return p
}

// round reserves the members in the gang's round and makes them wait in Permit.
func (e *gangEnv) round(members ...string) *Round {
	var r *Round
	e.locked(func() {
		for _, m := range members {
			e.reg.ReserveLocked(e.pods[m], "node-"+m)
			r = e.tr.ReserveInRoundLocked(e.key, e.pods[m], time.Now())
		}
		e.tr.StepLocked(e.key, RoundWaiting, func() { r.WaitingSince = time.Now() })
	})
	return r
}

func (e *gangEnv) preempt() *Preemption {
	p := &Preemption{Victims: []*v1.Pod{st.MakePod().Namespace("other").Name("victim").UID("victim").Node("node-1").Obj()}}
	e.locked(func() { e.tr.StartPreemptionLocked(e.key, p) })
	return p
}

// TestTransitions: each event of the table moves the gang from the phase before to the phase
// after, and tells (notifies the gang's listeners, activates members) what it must; nothing
// is recorded as a violation.
func TestTransitions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		setup    func(*gangEnv)
		event    func(*gangEnv)
		before   Phase
		after    Phase
		notified int
		// activated are the members Settle activated.
		activated []string
	}{
		{name: "MemberSet: the last member of minMember arrives", setup: func(e *gangEnv) { e.podGroup(4) },
			event: func(e *gangEnv) { e.add("d") }, before: WaitingForMembers, after: Pending, notified: 1},
		{name: "MemberSet: minMember members bound",
			event: func(e *gangEnv) {
				for _, m := range []string{"a", "b", "c"} {
					e.bind(m)
				}
			}, before: Pending, after: Running},
		{name: "MemberSet: the scout is bound elsewhere", setup: func(e *gangEnv) { e.tr.HoldForRetry(e.key, "a") },
			event: func(e *gangEnv) { e.bind("a") }, before: HeldAtGate, after: Pending, notified: 1},
		{name: "MemberSet: a new member's claim from a template does not exist yet",
			event: func(e *gangEnv) { e.addAwaitingClaims("d") }, before: Pending, after: WaitingForMembers},
		{name: "MemberSet: the last member's claim is created", setup: func(e *gangEnv) { e.addAwaitingClaims("d") },
			event: func(e *gangEnv) { e.claimCreated("d") }, before: WaitingForMembers, after: Pending, notified: 1},
		{name: "MemberSet: a running gang's further member waits for its claim",
			setup: func(e *gangEnv) {
				for _, m := range []string{"a", "b", "c"} {
					e.bind(m)
				}
			},
			event: func(e *gangEnv) { e.addAwaitingClaims("d") }, before: Running, after: WaitingForMembers},
		{name: "MemberSet: the running gang's further member's claim is created",
			setup: func(e *gangEnv) {
				for _, m := range []string{"a", "b", "c"} {
					e.bind(m)
				}
				e.addAwaitingClaims("d")
			},
			event: func(e *gangEnv) { e.claimCreated("d") }, before: WaitingForMembers, after: Running, notified: 1},
		{name: "MemberDeleted: the member that waited for its claim", setup: func(e *gangEnv) { e.addAwaitingClaims("d") },
			event: func(e *gangEnv) { e.reg.DeletePod(e.pods["d"]) }, before: WaitingForMembers, after: Pending, notified: 1},
		{name: "MemberDeleted: below minMember",
			event: func(e *gangEnv) { e.reg.DeletePod(e.pods["c"]) }, before: Pending, after: WaitingForMembers},
		{name: "MemberReserved: the blocker reserves a node",
			setup: func(e *gangEnv) { e.tr.SetBlocked(e.key, Blocker{UID: "a", Name: "a", Reason: "taint"}) },
			event: func(e *gangEnv) { e.reg.Reserve(e.pods["a"], "node-1") }, before: Blocked, after: Pending, notified: 1},
		{name: "PodGroupRevised: a new spec ends the hold", setup: func(e *gangEnv) { e.tr.HoldForRetry(e.key, "a") },
			event: func(e *gangEnv) { e.podGroup(2) }, before: HeldAtGate, after: Pending, notified: 1},
		{name: "PodGroupDeleted: the members wait for a PodGroup",
			event: func(e *gangEnv) { e.reg.DeletePodGroup("ns", "g") }, before: Pending, after: WaitingForMembers},
		{name: "NodesChanged: a blocker may fit now",
			setup: func(e *gangEnv) { e.tr.SetBlocked(e.key, Blocker{UID: "a", Name: "a", Reason: "taint"}) },
			event: func(e *gangEnv) { e.reg.SetNode(nil, st.MakeNode().Name("node-9").Obj()) }, before: Blocked, after: Pending},
		{name: "HeldForRetry",
			event: func(e *gangEnv) { e.tr.HoldForRetry(e.key, "a") }, before: Pending, after: HeldAtGate},
		{name: "RetryReleased", setup: func(e *gangEnv) { e.tr.HoldForRetry(e.key, "a") },
			event: func(e *gangEnv) { e.tr.ReleaseRetry(e.key) }, before: HeldAtGate, after: Pending},
		{name: "BlockerFound: the job cannot do without the member",
			event: func(e *gangEnv) { e.tr.SetBlocked(e.key, Blocker{UID: "a", Name: "a", Reason: "taint"}) }, before: Pending, after: Blocked},
		{name: "UnplacedFound",
			event: func(e *gangEnv) {
				e.tr.MarkUnplaced(e.key, "a", "no room", time.Now(), Room{Free: map[v1.ResourceName]int64{v1.ResourceCPU: 0}}, e.tr.NodeChanges())
			}, before: Pending, after: WaitingForRoom},
		{name: "UnplacedRetried: more room",
			setup: func(e *gangEnv) {
				e.tr.MarkUnplaced(e.key, "a", "no room", time.Now(), Room{Free: map[v1.ResourceName]int64{v1.ResourceCPU: 0}}, e.tr.NodeChanges())
			},
			event: func(e *gangEnv) {
				e.tr.RetryUnplaced(e.key, "a", time.Now(), func([]v1.ResourceName) Room {
					return Room{Free: map[v1.ResourceName]int64{v1.ResourceCPU: 1000}}
				})
			}, before: WaitingForRoom, after: Pending},
		{name: "PlanMade",
			event: func(e *gangEnv) { e.locked(func() { e.tr.SetPlanLocked(e.key, plan("a", "b", "c")) }) }, before: Pending, after: Planned},
		{name: "PlanMade by the scout: the hold ends and the held members come back",
			setup: func(e *gangEnv) { e.tr.HoldForRetry(e.key, "a") },
			event: func(e *gangEnv) {
				e.tr.Settle(klog.Background(), e.h, &View{Key: e.key, Pod: e.pods["a"]}, Settlement{Plan: plan("a", "b", "c")})
			}, before: HeldAtGate, after: Planned, activated: []string{"a", "b", "c"}},
		{name: "PlanDropped", setup: func(e *gangEnv) { e.locked(func() { e.tr.SetPlanLocked(e.key, plan("a", "b", "c")) }) },
			event: func(e *gangEnv) { e.locked(func() { e.tr.DropPlanLocked(e.key) }) }, before: Planned, after: Pending},
		{name: "PlanDropped: refused at a member's planned place", setup: func(e *gangEnv) { e.locked(func() { e.tr.SetPlanLocked(e.key, plan("a", "b", "c")) }) },
			event: func(e *gangEnv) { e.locked(func() { e.tr.DropRefusedPlanLocked(e.key) }) }, before: Planned, after: Pending},
		{name: "PlanFailed: the scout retries for the gang",
			event: func(e *gangEnv) {
				e.tr.Settle(klog.Background(), e.h, &View{Key: e.key, Pod: e.pods["a"]}, Settlement{Failure: &PlanFailure{},
					Status: func(int) *fwk.Status { return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "no room") }})
			}, before: Pending, after: HeldAtGate},
		{name: "PlanFailureForgotten: the hold stays",
			setup: func(e *gangEnv) {
				e.locked(func() { e.tr.RecordPlanFailureLocked(e.key, e.pods["a"], &PlanFailure{}) })
			},
			event: func(e *gangEnv) { e.locked(func() { e.tr.ForgetPlanFailureLocked(e.key) }) }, before: HeldAtGate, after: HeldAtGate},
		{name: "ConstraintRefused",
			event: func(e *gangEnv) {
				e.tr.Settle(klog.Background(), e.h, &View{Key: e.key, Pod: e.pods["a"]}, Settlement{Refused: true, RefusedOn: 1})
			}, before: Pending, after: Unplannable},
		{name: "ConstraintRefused on a tree that changed since: the member comes back",
			event: func(e *gangEnv) {
				e.tr.Settle(klog.Background(), e.h, &View{Key: e.key, Pod: e.pods["a"]}, Settlement{Refused: true, RefusedOn: 1, RetryNow: func() bool { return true }})
			}, before: Pending, after: Pending, activated: []string{"a"}},
		{name: "RefusalForgotten", setup: func(e *gangEnv) { e.locked(func() { e.tr.RefuseLocked(e.key, 1) }) },
			event: func(e *gangEnv) { e.locked(func() { e.tr.ForgetRefusalLocked(e.key) }) }, before: Unplannable, after: Pending},
		{name: "PromiseKept: the last planned member reserves", setup: func(e *gangEnv) { e.locked(func() { e.tr.SetPlanLocked(e.key, plan("a")) }) },
			event: func(e *gangEnv) {
				e.locked(func() {
					p := e.tr.PlanLocked(e.key)
					e.tr.StepLocked(e.key, PromiseKept, func() { p.Promised["s0"]--; p.Reserved.Insert("a") })
				})
			}, before: Planned, after: Pending},
		{name: "PlanningForgotten: the PodGroup was deleted", setup: func(e *gangEnv) { e.locked(func() { e.tr.SetPlanLocked(e.key, plan("a")) }) },
			event: func(e *gangEnv) { e.locked(func() { e.tr.ForgetPlanningLocked(e.key) }) }, before: Planned, after: Pending},
		{name: "MemberReservedInRound: the round does not wait yet", setup: func(e *gangEnv) { e.locked(func() { e.tr.SetPlanLocked(e.key, plan("a", "b", "c")) }) },
			event: func(e *gangEnv) {
				e.locked(func() { e.tr.ReserveInRoundLocked(e.key, e.pods["a"], time.Now()) })
			}, before: Planned, after: Planned},
		{name: "RoundWaiting", event: func(e *gangEnv) { e.round("a") }, before: Pending, after: Reserving},
		{name: "RoundEnded: the round was rejected", setup: func(e *gangEnv) { e.round("a") },
			event: func(e *gangEnv) { e.locked(func() { e.tr.EndRoundLocked(e.key) }) }, before: Reserving, after: Pending},
		{name: "BatchAllowed: the quorum", setup: func(e *gangEnv) { e.round("a", "b", "c") },
			event: func(e *gangEnv) {
				e.locked(func() { e.tr.AllowBatchLocked(e.key, e.tr.RoundLocked(e.key), sets.New[types.UID]("a", "b", "c")) })
			}, before: Reserving, after: Binding},
		{name: "BatchClosed: every member arrived in PreBind", setup: func(e *gangEnv) {
			r := e.round("a", "b", "c")
			e.locked(func() { e.tr.AllowBatchLocked(e.key, r, sets.New[types.UID]("a", "b", "c")) })
		},
			event: func(e *gangEnv) {
				e.locked(func() {
					for _, m := range []string{"a", "b", "c"} {
						e.tr.ArriveLocked(e.tr.MemberBatchLocked(types.UID(m)))
					}
				})
			}, before: Binding, after: Pending},
		{name: "PreemptionStarted: members wait in Permit", setup: func(e *gangEnv) { e.round("a") },
			event: func(e *gangEnv) { e.preempt() }, before: Reserving, after: Preempting},
		{name: "PreemptionEnded", setup: func(e *gangEnv) { e.round("a") },
			event: func(e *gangEnv) {
				p := e.preempt()
				e.locked(func() { e.tr.EndPreemptionLocked(e.key, p) })
			}, before: Reserving, after: Reserving},
		{name: "VictimsGone: the preemption drains", setup: func(e *gangEnv) { e.preempt() },
			event: func(e *gangEnv) { e.locked(func() { e.tr.VictimGoneLocked("victim") }) }, before: Preempting, after: Preempting},
		{name: "HoldTaken", event: func(e *gangEnv) { e.hold() }, before: Pending, after: Holding},
		{name: "HoldTaken over a plan failure", setup: func(e *gangEnv) { e.tr.HoldForRetry(e.key, "a") },
			event: func(e *gangEnv) { e.hold() }, before: HeldAtGate, after: Holding},
		{name: "HoldReleased", setup: func(e *gangEnv) { e.hold() },
			event: func(e *gangEnv) { e.tr.ReleaseHold(e.key, HoldTimedOut) }, before: Holding, after: Pending},
		{name: "MemberSet: minMember members bound end the hold", setup: func(e *gangEnv) { e.hold() },
			event: func(e *gangEnv) {
				for _, m := range []string{"a", "b", "c"} {
					e.bind(m)
				}
			}, before: Holding, after: Running},
		{name: "PodGroupDeleted ends the hold", setup: func(e *gangEnv) { e.hold() },
			event: func(e *gangEnv) { e.reg.DeletePodGroup("ns", "g") }, before: Holding, after: WaitingForMembers},
		{name: "PodGroupRevised: holds turned off", setup: func(e *gangEnv) { e.hold() },
			event: func(e *gangEnv) { e.podGroupWith(3, map[string]string{podgroup.HoldAfterAnnotation: "never"}) }, before: Holding, after: Pending},
		{name: "PreemptionEnded: the drain is over", setup: func(e *gangEnv) {
			e.preempt()
			e.locked(func() { e.tr.VictimGoneLocked("victim") })
		},
			event: func(e *gangEnv) { e.locked(func() { e.tr.StopDrainingLocked(e.key) }) }, before: Preempting, after: Pending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newGangEnv(t)
			if tc.setup != nil {
				tc.setup(e)
			}
			e.notified = 0
			if got := e.tr.Phase(e.key); got != tc.before {
				t.Fatalf("before: %s, want %s", got, tc.before)
			}
			tc.event(e)
			if got := e.tr.Phase(e.key); got != tc.after {
				t.Errorf("after: %s, want %s", got, tc.after)
			}
			if e.notified != tc.notified {
				t.Errorf("notified %d times, want %d", e.notified, tc.notified)
			}
			if diff := cmp.Diff(tc.activated, e.h.activated); diff != "" {
				t.Errorf("activated (-want,+got):\n%s", diff)
			}
			if v := e.tr.Violations(); len(v) > 0 {
				t.Errorf("violations: %v", v)
			}
		})
	}
}

// hold makes the gang hold node-1.
func (e *gangEnv) hold() {
	info := e.reg.Info(e.key)
	if ok, why := e.tr.TakeHold(klog.Background(), &Hold{Key: e.key, Need: map[string]v1.ResourceList{"node-1": nil}, Since: time.Now(),
		Precedence: podgroup.GangPrecedence(e.key, 0, info.PodGroup.CreationTimestamp.Time)}, -1); !ok {
		e.t.Fatalf("hold refused: %s", why)
	}
}

// TestTableRefusesWhatItDoesNotList: a change the table does not allow is recorded, with the
// event and both phases, and so is a batch below the quorum, which is refused; the table
// allows exactly its rows.
func TestTableRefusesWhatItDoesNotList(t *testing.T) {
	e := newGangEnv(t)
	// A plan dropped does not refuse the gang's constraint.
	e.locked(func() { e.tr.StepLocked(e.key, PlanDropped, func() { e.tr.gangs[e.key].refused = true }) })
	want := []Violation{{Key: e.key, Event: PlanDropped, From: Pending, To: Unplannable}}
	if diff := cmp.Diff(want, e.tr.Violations()); diff != "" {
		t.Errorf("violations (-want,+got):\n%s", diff)
	}
	// A batch below the gang's quorum (1 of minMember 3 reserved) is refused.
	r := e.round("a")
	e.locked(func() {
		if b := e.tr.AllowBatchLocked(e.key, r, sets.New[types.UID]("a")); b != nil {
			t.Error("a batch of 1 of minMember 3 was allowed")
		}
	})
	want = append(want, Violation{Key: e.key, Event: BatchAllowed, From: Reserving, To: Reserving,
		Why: "a batch of 1 below the quorum (1 members can bind of minMember 3)"})
	if diff := cmp.Diff(want, e.tr.Violations()); diff != "" {
		t.Errorf("violations after a batch below the quorum (-want,+got):\n%s", diff)
	}
	for _, tc := range []struct {
		ev       Event
		from, to Phase
		want     bool
	}{
		{PlanMade, Pending, Planned, true},
		{PlanMade, HeldAtGate, Planned, true},
		{PlanMade, Pending, Blocked, false},
		{RoundWaiting, Planned, Reserving, true},
		{RoundWaiting, Preempting, Reserving, false},
		{PreemptionEnded, Preempting, Pending, true},
		{PreemptionEnded, Reserving, Pending, false},
		{NodesChanged, Blocked, Planned, true},
		{NodesChanged, Pending, Blocked, false},
		{VictimsGone, Preempting, Preempting, true},
	} {
		if got := Allowed(tc.ev, tc.from, tc.to); got != tc.want {
			t.Errorf("Allowed(%s, %s -> %s) = %v, want %v", tc.ev, tc.from, tc.to, got, tc.want)
		}
	}
}
