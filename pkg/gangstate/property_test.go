package gangstate

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// machine drives one gang's state with random events, the way the plugins and the informers
// do, and keeps what a plugin would have to hold: the plans it made and has not withdrawn.
type machine struct {
	e   *gangEnv
	rnd *rand.Rand
	// open are the plans whose promises were made and not withdrawn (the tracker returns a
	// plan it drops or replaces; its caller withdraws it).
	open map[*Plan]bool
	// victims counts the victims made, for their names.
	victims int
	// trace is what ran, for the failure message.
	trace []string
}

func (m *machine) member() *v1.Pod {
	names := make([]string, 0, len(m.e.pods))
	for name := range m.e.pods {
		names = append(names, name)
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	return m.e.pods[names[m.rnd.IntN(len(names))]]
}

// topology reports whether the gang's PodGroup has a topology constraint: NetworkTopologyAware
// plans it (its plans, failures, refusals and holds); Gang remembers the failed rounds of the
// others.
func (m *machine) topology() bool {
	return m.e.reg.Info(m.e.key).PlacedByTopology()
}

func (m *machine) withdraw(plans ...*Plan) {
	for _, p := range plans {
		delete(m.open, p)
	}
}

// events are the random events, each as its source makes it.
func (m *machine) events() []struct {
	name string
	run  func()
} {
	e := m.e
	key := e.key
	return []struct {
		name string
		run  func()
	}{
		{"member added", func() { e.add(fmt.Sprintf("m%d", m.rnd.IntN(6))) }},
		{"member deleted", func() {
			if p := m.member(); p != nil {
				e.reg.DeletePod(p)
				delete(e.pods, p.Name)
			}
		}},
		{"member bound elsewhere", func() {
			if p := m.member(); p != nil && p.Spec.NodeName == "" && m.rnd.IntN(4) == 0 {
				e.bind(p.Name)
			}
		}},
		{"PodGroup revised", func() {
			var annotations map[string]string
			if m.rnd.IntN(2) == 0 {
				annotations = map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`}
			}
			e.podGroupWith(int32(1+m.rnd.IntN(4)), annotations)
		}},
		{"PodGroup deleted", func() { e.reg.DeletePodGroup("ns", "g") }},
		{"node changed", func() { e.reg.SetNode(nil, st.MakeNode().Name(fmt.Sprintf("n%d", m.rnd.IntN(1000))).Obj()) }},
		{"blocker found", func() {
			if p := m.member(); p != nil {
				e.tr.SetBlocked(key, Blocker{UID: p.UID, Name: p.Name, Reason: "taint"})
			}
		}},
		{"held for retry", func() {
			if p := m.member(); p != nil && m.topology() {
				e.tr.HoldForRetry(key, p.UID)
			}
		}},
		{"retry released", func() { e.tr.ReleaseRetry(key) }},
		{"hold taken", func() {
			if info := e.reg.Info(key); info.PodGroup != nil {
				e.tr.TakeHold(klog.Background(), &Hold{Key: key, Need: map[string]v1.ResourceList{fmt.Sprintf("n%d", m.rnd.IntN(3)): nil},
					Since: time.Now(), Precedence: podgroup.GangPrecedence(key, 0, info.PodGroup.CreationTimestamp.Time)}, 1+m.rnd.IntN(2))
			}
		}},
		{"hold released", func() { e.tr.ReleaseHold(key, HoldTimedOut) }},
		{"retry gate asked", func() {
			if p := m.member(); p != nil {
				e.tr.RetryGate(p)
			}
		}},
		{"unplaced", func() {
			// Gang remembers the failed round of a gang placed member by member.
			if p := m.member(); p != nil && !m.topology() && e.reg.Info(key).PodGroup != nil {
				e.tr.MarkUnplaced(key, p.UID, "no room", time.Now(), Room{Free: map[v1.ResourceName]int64{v1.ResourceCPU: 0}}, e.tr.NodeChanges())
			}
		}},
		{"unplaced retried", func() {
			if p := m.member(); p != nil {
				e.tr.RetryUnplaced(key, p.UID, time.Now(), func([]v1.ResourceName) Room {
					return Room{Free: map[v1.ResourceName]int64{v1.ResourceCPU: int64(m.rnd.IntN(2))}}
				})
			}
		}},
		{"plan made", func() {
			p := m.member()
			if p == nil || !m.topology() {
				return // NetworkTopologyAware plans only a gang with a topology constraint
			}
			plan := planOf(e.pods)
			m.open[plan] = true
			m.withdraw(e.tr.Settle(klog.Background(), e.h, &View{Key: key, Pod: p}, Settlement{Plan: plan}).Replaced)
		}},
		{"plan dropped", func() { e.locked(func() { m.withdraw(e.tr.DropPlanLocked(key)) }) }},
		{"plan failed", func() {
			if p := m.member(); p != nil && m.topology() {
				e.tr.Settle(klog.Background(), e.h, &View{Key: key, Pod: p}, Settlement{Failure: &PlanFailure{},
					Blockers: []Blocker{{UID: p.UID, Name: p.Name, Reason: "taint"}},
					Status:   func(int) *fwk.Status { return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "no room") }})
			}
		}},
		{"constraint refused", func() {
			if p := m.member(); p != nil && m.topology() {
				e.tr.Settle(klog.Background(), e.h, &View{Key: key, Pod: p}, Settlement{Refused: true, RefusedOn: 1})
			}
		}},
		{"refusal forgotten", func() { e.locked(func() { e.tr.ForgetRefusalLocked(key) }) }},
		{"promise kept", func() {
			e.locked(func() {
				if plan := e.tr.PlanLocked(key); plan != nil && plan.Promised["s0"] > 0 {
					e.tr.StepLocked(key, PromiseKept, func() { plan.Promised["s0"]-- })
				}
			})
		}},
		{"member reserved", func() {
			if p := m.member(); p != nil && p.Spec.NodeName == "" {
				var out podgroup.Outcome
				e.locked(func() {
					out = e.reg.ReserveLocked(p, "node-"+p.Name)
					e.tr.ReserveInRoundLocked(key, p, time.Now())
				})
				out.Run()
			}
		}},
		{"round waits", func() {
			e.locked(func() {
				if r := e.tr.RoundLocked(key); r != nil && !r.Waiting() {
					e.tr.StepLocked(key, RoundWaiting, func() { r.WaitingSince = time.Now() })
				}
			})
		}},
		{"batch allowed", func() {
			e.locked(func() {
				r := e.tr.RoundLocked(key)
				if r == nil || len(r.Members) == 0 {
					return
				}
				// Gang allows a round only at its quorum (the tracker refuses it below).
				if !JobComplete(e.reg.InfoLocked(key), e.reg.ProgressLocked(key, nil)) {
					return
				}
				members := sets.New[types.UID]()
				for uid := range r.Members {
					members.Insert(uid)
				}
				e.tr.AllowBatchLocked(key, r, members)
			})
		}},
		{"batch member arrived", func() {
			e.locked(func() {
				if p := m.member(); p != nil {
					if b := e.tr.MemberBatchLocked(p.UID); b != nil && b.Arrived < b.Members {
						e.tr.ArriveLocked(b)
					}
				}
			})
		}},
		{"batch member failed", func() {
			e.locked(func() {
				if p := m.member(); p != nil {
					if b := e.tr.MemberBatchLocked(p.UID); b != nil {
						e.tr.LeaveBatchLocked(p.UID)
						e.tr.FailBatchLocked(b, p.Name, "did not bind")
					}
				}
			})
		}},
		{"round ended", func() { e.locked(func() { e.tr.EndRoundLocked(key) }) }},
		{"member unreserved", func() {
			if p := m.member(); p != nil {
				e.locked(func() {
					e.reg.UnreserveLocked(p)
					e.tr.LeaveRoundLocked(p.UID)
				})
			}
		}},
		{"preemption started", func() {
			if e.reg.Info(key).PodGroup == nil {
				return
			}
			m.victims++
			v := st.MakePod().Namespace("other").Name(fmt.Sprintf("v%d", m.victims)).UID(fmt.Sprintf("v%d", m.victims)).Node("node-1").Obj()
			e.locked(func() { e.tr.StartPreemptionLocked(key, &Preemption{Victims: []*v1.Pod{v}}) })
		}},
		{"victim gone", func() {
			e.locked(func() { e.tr.VictimGoneLocked(types.UID(fmt.Sprintf("v%d", m.victims))) })
		}},
		{"drain ended", func() { e.locked(func() { e.tr.StopDrainingLocked(key) }) }},
		{"preemption given up", func() {
			e.locked(func() {
				p, _ := e.tr.PreemptionLocked(key)
				e.tr.EndPreemptionLocked(key, p)
			})
		}},
	}
}

// check asserts what the table forbids never happened: no phase change outside the table; no
// state for a gang the registry does not know (a scout with no gang); a held gang with a
// scout; no promises outliving their plan; one preemption per gang, its victims indexed to
// it alone.
func (m *machine) check() error {
	t := m.e.tr
	if v := t.Violations(); len(v) > 0 {
		return fmt.Errorf("violations: %v", v)
	}
	t.reg.RLock()
	defer t.reg.RUnlock()
	underWay := 0
	for key, s := range t.gangs {
		if t.reg.GroupLocked(key) == nil {
			return fmt.Errorf("state kept for %s, which the registry does not know", key)
		}
		if s.retryHeld && s.scout == "" {
			return fmt.Errorf("%s is held without a scout", key)
		}
		for plan := range m.open {
			if plan != s.plan {
				return fmt.Errorf("%s: a plan's promises outlive it (the tracker dropped it without handing it back)", key)
			}
		}
		if s.preemption != nil {
			underWay++
		}
		if s.hold != nil && t.reg.GroupLocked(key).InfoLocked().PodGroup == nil {
			return fmt.Errorf("%s holds nodes without a PodGroup", key)
		}
		if indexed := len(t.Holds().On(firstNode(s.hold))) > 0; (s.hold != nil) != indexed {
			return fmt.Errorf("%s: hold %v, indexed %v", key, s.hold, indexed)
		}
	}
	if len(t.gangs) == 0 && t.Holds() != nil {
		return fmt.Errorf("holds indexed without a gang: %v", t.Holds().List())
	}
	if len(t.gangs) == 0 && len(m.open) > 0 {
		return fmt.Errorf("promises of %d plans outlive their gang", len(m.open))
	}
	if int(t.preemptions.underWay.Load()) != underWay {
		return fmt.Errorf("%d preemptions counted under way, %d kept", t.preemptions.underWay.Load(), underWay)
	}
	for uid, keys := range t.victimOf {
		for key := range keys {
			s := t.gangs[key]
			if s == nil || s.preemption == nil || s.preemption.Draining || !s.preemption.Waiting.Has(uid) {
				return fmt.Errorf("victim %s indexed to %s, whose preemption does not wait for it", uid, key)
			}
		}
	}
	return nil
}

// TestRandomEventsNeverReachAForbiddenState drives a gang through random sequences of events
// and checks after each one that nothing the table forbids happened.
func TestRandomEventsNeverReachAForbiddenState(t *testing.T) {
	for seed := range uint64(300) {
		e := newGangEnv(t)
		m := &machine{e: e, rnd: rand.New(rand.NewPCG(seed, 1)), open: map[*Plan]bool{}}
		// The plugins' forgetters: a deleted PodGroup's plan, rounds and preemption go, and
		// the plan's promises are withdrawn.
		e.reg.OnGroupDelete(func(key Key) {
			e.locked(func() {
				m.withdraw(e.tr.ForgetPlanningLocked(key))
				e.tr.ForgetRoundsLocked(key)
				e.tr.ForgetPreemptionLocked(key)
				e.tr.EndRoundLocked(key)
			})
		})
		events := m.events()
		for range 80 {
			ev := events[m.rnd.IntN(len(events))]
			m.trace = append(m.trace, ev.name)
			ev.run()
			if err := m.check(); err != nil {
				t.Fatalf("seed %d: after %v: %v", seed, m.trace, err)
			}
		}
	}
}

// firstNode is a node the hold holds ("" without a hold).
func firstNode(h *Hold) string {
	if h == nil {
		return ""
	}
	return h.Nodes()[0]
}

// planOf is a plan that promises a slot in leaf s0 to every member named.
func planOf(pods map[string]*v1.Pod) *Plan {
	names := make([]string, 0, len(pods))
	for name := range pods {
		names = append(names, name)
	}
	return plan(names...)
}
