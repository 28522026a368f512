package gangstate

import (
	"fmt"
	"sync"

	"k8s.io/klog/v2"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/metrics"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// Phase is where a gang is in its life in this scheduler: what it waits for, and so what
// moves it on. A gang is in exactly one phase, the highest-ranked one its state shows (a gang
// whose members wait in Permit while a preemption for it runs is Preempting).
type Phase int

// The phases, highest rank first.
const (
	// Preempting: pods evicted for the gang terminate, or the scheduler's cache still counts
	// them. Moved on by their deletion, or the preemption's time limit.
	Preempting Phase = iota
	// Blocked: a member fits no node and the job cannot do without it; the others wait
	// behind it. Moved on by the member or the nodes changing, or the member reserving.
	Blocked
	// Binding: members allowed together wait for each other in PreBind, then bind. Moved on
	// by the last one arriving (or one failing).
	Binding
	// Reserving: members reserved nodes and wait in Permit for the rest of the gang. Moved on
	// by the quorum, a member failing, or the round's deadline.
	Reserving
	// Holding: the gang cannot be placed and holds a domain that drains for it: pods after
	// it in queue order do not take the room it needs there. Moved on by its members
	// binding, the hold ending (timeout, displaced, impossible) or moving.
	Holding
	// HeldAtGate: the gang's plan failed; only its scout is retried, the other members wait
	// in GangRetryGate. Moved on by a change that can make room, after a back-off.
	HeldAtGate
	// WaitingForRoom: a gang without a topology constraint could not place its members; only
	// its scout retries, when the nodes offer more than at the failure.
	WaitingForRoom
	// Unplannable: the gang's constraint names a tier the tree cannot serve. Moved on by a
	// change of the tree or the PodGroup.
	Unplannable
	// Planned: a plan holds promises (nominations) for pending members. Moved on by the
	// members reserving, or failing.
	Planned
	// WaitingForMembers: PreEnqueue holds the members back (no PodGroup, fewer than minMember
	// members, an unusable sub-group policy, or a member's ResourceClaims not created yet).
	// Moved on by a member or the PodGroup.
	WaitingForMembers
	// Running: minMember members are bound. Moved on by members leaving.
	Running
	// Pending: none of the above; the members are tried as the queue brings them.
	Pending
	numPhases
)

var phaseNames = [numPhases]string{"Preempting", "Blocked", "Binding", "Reserving", "Holding", "HeldAtGate", "WaitingForRoom",
	"Unplannable", "Planned", "WaitingForMembers", "Running", "Pending"}

func (p Phase) String() string {
	if p < 0 || p >= numPhases {
		return fmt.Sprintf("Phase(%d)", int(p))
	}
	return phaseNames[p]
}

// Phases lists every phase, highest rank first.
func Phases() []Phase {
	out := make([]Phase, numPhases)
	for i := range out {
		out[i] = Phase(i)
	}
	return out
}

// outranks reports whether p is shown over o when a gang's state has both.
func (p Phase) outranks(o Phase) bool { return p < o }

// Event is what moves a gang's state: a change of its data the registry reports, or what a
// plugin tells the tracker.
type Event int

// The events.
const (
	// Data changes (podgroup.State).
	MemberSet Event = iota
	MemberDeleted
	MemberReserved
	PodGroupRevised
	PodGroupDeleted
	NodesChanged
	// The retry gate and the blocker.
	HeldForRetry
	RetryReleased
	BlockerFound
	// A gang placed member by member.
	UnplacedFound
	UnplacedRetried
	// A topology gang's plan.
	PlanMade
	PlanDropped
	PlanFailed
	PlanFailureForgotten
	ConstraintRefused
	RefusalForgotten
	PromiseKept
	PlanningForgotten
	// Permit rounds and PreBind batches.
	MemberReservedInRound
	RoundWaiting
	RoundEnded
	BatchAllowed
	BatchClosed
	// Preemption.
	PreemptionStarted
	PreemptionEnded
	VictimsGone
	// Holds.
	HoldTaken
	HoldReleased
	numEvents
)

var eventNames = [numEvents]string{"MemberSet", "MemberDeleted", "MemberReserved", "PodGroupRevised", "PodGroupDeleted",
	"NodesChanged", "HeldForRetry", "RetryReleased", "BlockerFound", "UnplacedFound", "UnplacedRetried", "PlanMade",
	"PlanDropped", "PlanFailed", "PlanFailureForgotten", "ConstraintRefused", "RefusalForgotten", "PromiseKept",
	"PlanningForgotten", "MemberReservedInRound", "RoundWaiting", "RoundEnded", "BatchAllowed", "BatchClosed",
	"PreemptionStarted", "PreemptionEnded", "VictimsGone", "HoldTaken", "HoldReleased"}

func (e Event) String() string {
	if e < 0 || e >= numEvents {
		return fmt.Sprintf("Event(%d)", int(e))
	}
	return eventNames[e]
}

// Transition is a row of the table: the phases an event can raise a gang to (from any phase
// they outrank), and the phases it can lower a gang from (to any phase below: what the gang's
// state shows once the facet the event cleared is gone). Every event may leave the phase as it
// is: it then changed a facet that a higher phase hides.
type Transition struct {
	Event  Event
	Raises []Phase
	Lowers []Phase
}

// Transitions is the table of the gangs' life: which event moves a gang from which phase to
// which. The tracker checks every phase change against it.
var Transitions = []Transition{
	{Event: MemberSet, Raises: []Phase{WaitingForMembers, Running},
		// The blocker or a member that fits nowhere changed, one more member lets the job do
		// without the blocked ones, the scout was bound elsewhere, the count reached minMember
		// (which ends a hold).
		Lowers: []Phase{Blocked, Holding, HeldAtGate, WaitingForRoom, WaitingForMembers, Running}},
	{Event: MemberDeleted, Raises: []Phase{WaitingForMembers},
		Lowers: []Phase{Blocked, WaitingForMembers, Running}},
	// A member reserved while its group was forgotten (PodGroup and members deleted during
	// its cycle) makes the group again, without a PodGroup.
	{Event: MemberReserved, Raises: []Phase{WaitingForMembers}, Lowers: []Phase{Blocked, WaitingForMembers}},
	// A PodGroup seen first restores the hold it records; one that turns holds off ends it.
	{Event: PodGroupRevised, Raises: []Phase{Holding, WaitingForMembers, Running},
		Lowers: []Phase{Blocked, Holding, HeldAtGate, WaitingForRoom, WaitingForMembers, Running}},
	{Event: PodGroupDeleted, Raises: []Phase{WaitingForMembers}, Lowers: []Phase{Blocked, Holding, Running}},
	{Event: NodesChanged, Lowers: []Phase{Blocked}},
	{Event: HeldForRetry, Raises: []Phase{HeldAtGate}},
	{Event: RetryReleased, Lowers: []Phase{HeldAtGate, WaitingForRoom}},
	{Event: BlockerFound, Raises: []Phase{Blocked}, Lowers: []Phase{Blocked}},
	{Event: UnplacedFound, Raises: []Phase{WaitingForRoom}},
	{Event: UnplacedRetried, Lowers: []Phase{WaitingForRoom}},
	{Event: PlanMade, Raises: []Phase{Planned}, Lowers: []Phase{HeldAtGate, Unplannable, Planned}},
	{Event: PlanDropped, Lowers: []Phase{Planned}},
	{Event: PlanFailed, Raises: []Phase{HeldAtGate}},
	{Event: PlanFailureForgotten},
	{Event: ConstraintRefused, Raises: []Phase{Unplannable}},
	{Event: RefusalForgotten, Lowers: []Phase{Unplannable}},
	{Event: PromiseKept, Lowers: []Phase{Planned}},
	{Event: PlanningForgotten, Lowers: []Phase{Unplannable, Planned}},
	{Event: MemberReservedInRound},
	{Event: RoundWaiting, Raises: []Phase{Reserving}},
	{Event: RoundEnded, Lowers: []Phase{Reserving}},
	{Event: BatchAllowed, Raises: []Phase{Binding}, Lowers: []Phase{Reserving}},
	{Event: BatchClosed, Lowers: []Phase{Binding}},
	{Event: PreemptionStarted, Raises: []Phase{Preempting}},
	{Event: PreemptionEnded, Lowers: []Phase{Preempting}},
	{Event: VictimsGone},
	{Event: HoldTaken, Raises: []Phase{Holding}},
	{Event: HoldReleased, Lowers: []Phase{Holding}},
}

// table indexes Transitions by event.
var table = func() [numEvents]Transition {
	var out [numEvents]Transition
	for _, tr := range Transitions {
		out[tr.Event] = tr
	}
	return out
}()

// Allowed reports whether the table lets ev move a gang from one phase to another.
func Allowed(ev Event, from, to Phase) bool {
	if from == to {
		return true
	}
	tr := table[ev]
	if to.outranks(from) {
		return contains(tr.Raises, to)
	}
	return contains(tr.Lowers, from)
}

func contains(list []Phase, p Phase) bool {
	for _, q := range list {
		if q == p {
			return true
		}
	}
	return false
}

// phaseLocked is the gang's phase: the highest-ranked one its state and data show. The
// registry's lock must be held.
func (t *Tracker) phaseLocked(key Key) Phase {
	return phaseOf(t.gangs[key], t.reg.GroupLocked(key))
}

func phaseOf(s *Gang, d *podgroup.Group) Phase {
	if s != nil {
		switch {
		case s.preemption != nil:
			return Preempting
		case s.blocker != nil:
			return Blocked
		case len(s.openBatches) > 0:
			return Binding
		case s.round.Waiting():
			return Reserving
		case s.hold != nil:
			return Holding
		case s.retryHeld && s.unplaced == nil:
			return HeldAtGate
		case s.retryHeld:
			return WaitingForRoom
		case s.refused:
			return Unplannable
		case s.plan.Places() && s.plan.Pending() > 0:
			return Planned
		}
	}
	if d == nil {
		return Pending
	}
	info := d.InfoLocked()
	switch {
	case info.PodGroup == nil || info.SubGroupErr != nil || info.HoldErr != nil || info.Members < info.MinMember() || info.AwaitingClaims > 0:
		// A running gang's further members wait too: its plan needs every member's devices.
		return WaitingForMembers
	case info.Bound >= info.MinMember():
		return Running
	}
	return Pending
}

// Phase returns the gang's phase now.
func (t *Tracker) Phase(key Key) Phase {
	t.reg.RLock()
	defer t.reg.RUnlock()
	return t.phaseLocked(key)
}

// PhaseCounts counts the gangs the registry knows by phase (every phase, zero or not): what
// the hypernode_gangs metric reports. O(gangs), for a metrics scrape.
func (t *Tracker) PhaseCounts() map[Phase]int {
	out := make(map[Phase]int, numPhases)
	for _, p := range Phases() {
		out[p] = 0
	}
	t.reg.RLock()
	defer t.reg.RUnlock()
	t.reg.EachGroupLocked(func(key Key, d *podgroup.Group) { out[phaseOf(t.gangs[key], d)]++ })
	return out
}

// PhaseCountsByName is PhaseCounts by the phases' names.
func (t *Tracker) PhaseCountsByName() map[string]int {
	out := map[string]int{}
	for p, n := range t.PhaseCounts() {
		out[p.String()] = n
	}
	return out
}

// step runs change on the gang's state as ev and checks the phase it moves the gang to
// against the table. The registry's write lock must be held.
func (t *Tracker) step(key Key, ev Event, change func()) {
	from := t.phaseLocked(key)
	change()
	t.checkLocked(key, ev, from)
}

// checkLocked checks the gang's phase now against the table, for ev moving it from from.
func (t *Tracker) checkLocked(key Key, ev Event, from Phase) {
	if to := t.phaseLocked(key); !Allowed(ev, from, to) {
		t.violation(key, ev, from, to)
	}
}

// Violation is a phase change the table does not allow: a defect of the scheduler, reported
// in its log and the hypernode_gang_state_violations_total metric.
type Violation struct {
	Key      Key
	Event    Event
	From, To Phase
	// Why says what a refused event would have done (empty for a phase change).
	Why string
}

func (v Violation) String() string {
	if v.Why != "" {
		return fmt.Sprintf("gang %s: %s refused in %s: %s", v.Key, v.Event, v.From, v.Why)
	}
	return fmt.Sprintf("gang %s: %s moved it from %s to %s, which the table does not allow", v.Key, v.Event, v.From, v.To)
}

// violations records the violations seen, for tests (bounded).
type violations struct {
	mu   sync.Mutex
	seen []Violation
}

func (t *Tracker) violation(key Key, ev Event, from, to Phase) {
	klog.Background().Error(nil, "Gang state changed as its table does not allow", "podGroup", key, "event", ev, "from", from, "to", to)
	t.record(Violation{Key: key, Event: ev, From: from, To: to})
}

// refused reports an event the tracker refused, in phase, because it would break what the
// table guards.
func (t *Tracker) refused(key Key, ev Event, phase Phase, why string) {
	klog.Background().Error(nil, "Gang state refused an event", "podGroup", key, "event", ev, "phase", phase, "why", why)
	t.record(Violation{Key: key, Event: ev, From: phase, To: phase, Why: why})
}

func (t *Tracker) record(v Violation) {
	metrics.GangStateViolationsTotal.WithLabelValues(v.Event.String()).Inc()
	t.violations.mu.Lock()
	if len(t.violations.seen) < 100 {
		t.violations.seen = append(t.violations.seen, v)
	}
	t.violations.mu.Unlock()
}

// Violations returns the violations seen so far (at most 100).
func (t *Tracker) Violations() []Violation {
	t.violations.mu.Lock()
	defer t.violations.mu.Unlock()
	return append([]Violation(nil), t.violations.seen...)
}
