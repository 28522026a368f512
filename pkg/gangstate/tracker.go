package gangstate

import (
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// Key identifies a gang: its PodGroup's namespace and name.
type Key = podgroup.Key

// Tracker keeps the scheduling state of every gang of a scheduler process (one per process,
// shared by every profile and plugin). It is guarded by the registry's lock (podgroup.Registry),
// so that a gang's data and its state change together.
type Tracker struct {
	reg *podgroup.Registry

	// The fields below are guarded by reg's lock.
	gangs map[Key]*Gang
	// retryGates are the profiles that run GangRetryGate (retry.go).
	retryGates sets.Set[string]
	// unplaced are the gangs that may be waiting for room (unplaced.go), told by scoutWakers.
	unplaced    sets.Set[Key]
	scoutWakers []func(Key, *v1.Pod)
	// nodeChanges counts the node changes seen (NodesChanged), for MarkUnplaced.
	nodeChanges uint64
	// victimOf maps each victim of a preemption under way to the gangs that wait for it,
	// preemptions counts those preemptions, and preemptionEnders are told when one ends
	// (preemption.go).
	victimOf         map[types.UID]sets.Set[Key]
	preemptions      preemptionCounts
	preemptionEnders []func(Key)
	// memberRound is the round each reserved member belongs to (a member whose round was
	// rejected is no longer in it), memberBatch the batch each allowed member binds with
	// (round.go).
	memberRound map[types.UID]*Round
	memberBatch map[types.UID]*Batch
	// deferring are the gangs whose plan leaves members out for lack of room (plan.go);
	// failuresRecorded counts the failed plans recorded.
	deferring        sets.Set[Key]
	failuresRecorded uint64
	// now is the tracker's clock (a fake one in tests).
	now func() time.Time
	// before is the phase of the gang the registry is about to change (Before).
	before struct {
		key   Key
		phase Phase
	}
	violations violations
	// holdPolicy says when gangs hold domains, holdEnders are told when a hold ends
	// (hold.go); holdIndex is every hold, read without the lock by Filter, and heldNodes
	// counts their nodes.
	holdPolicy    HoldPolicy
	holdPolicySet bool
	holdEnders    []func(HoldEnd)
	holdIndex     atomic.Pointer[HoldIndex]
	heldNodes     atomic.Int64
}

// Gang is one gang's scheduling state. Its fields are guarded by the registry's lock.
type Gang struct {
	// retryHeld says the gang's placement failed and only scout is retried (retry.go);
	// attempted are the members that went through a scheduling cycle: only those are held.
	retryHeld bool
	scout     types.UID
	attempted sets.Set[types.UID]
	// requeued is the member that a cluster event last requeued for the whole gang, and
	// when (requeue.go).
	requeued   types.UID
	requeuedAt time.Time
	// blocker is a member that fits no node (blocked.go); formerBlocker is the one a node
	// change cleared, until it blocks or reserves again or is deleted.
	blocker       *Blocker
	formerBlocker types.UID
	// fitNowhere are the members known to fit no node (SetBlocked), the blocker among them:
	// the gang is blocked only when it cannot do without all of them. fitNowhereShapes are
	// the shape signatures of fitNowhere members without claims.
	fitNowhere       sets.Set[types.UID]
	fitNowhereShapes sets.Set[string]
	// unplaced is the last failure of a gang placed member by member (unplaced.go);
	// scoutWokenAt is when a node change last woke its scout (NodesChanged).
	unplaced     *Unplaced
	scoutWokenAt time.Time
	// plan is the gang's current topology plan and planFailure its last failed one
	// (plan.go); refused says its constraint could not be served by the tree of generation
	// refusedOn.
	plan        *Plan
	planFailure *PlanFailure
	// planRefused says the gang's plan was refused at a member's planned place and the
	// next plan is made at once (DropRefusedPlanLocked).
	planRefused bool
	refused     bool
	refusedOn   uint64
	// round is the gang's current round of members waiting in Permit, openBatches its
	// batches that have neither passed their PreBind barrier nor failed (round.go);
	// firstReserved is when its first member was reserved and quorumBound whether its quorum
	// batch has bound, for the time a gang takes to bind.
	round         *Round
	openBatches   map[*Batch]struct{}
	firstReserved time.Time
	quorumBound   bool
	// preemption is the gang's preemption under way (preemption.go); resumed says a
	// preemption of an earlier scheduler process was looked for. preempted is the room its
	// last ended preemption made, preferred by its plans until preemptedUntil or until a
	// plan places members.
	preemption     *Preemption
	resumed        bool
	preempted      *PreemptedRoom
	preemptedUntil time.Time
	// hold is the domain held for the gang (hold.go); holdCooldown is until when it may not
	// hold again.
	hold         *Hold
	holdCooldown time.Time
}

var _ podgroup.State = &Tracker{}

// New returns a tracker over a new, empty registry.
func New() *Tracker {
	return NewFor(podgroup.New())
}

// NewFor returns a tracker over reg, which from now on tells it of every change.
func NewFor(reg *podgroup.Registry) *Tracker {
	t := &Tracker{reg: reg, gangs: map[Key]*Gang{}, unplaced: sets.New[Key](), deferring: sets.New[Key](),
		memberRound: map[types.UID]*Round{}, memberBatch: map[types.UID]*Batch{}, victimOf: map[types.UID]sets.Set[Key]{}, now: time.Now}
	reg.SetState(t)
	return t
}

// Registry returns the registry of the gangs' data.
func (t *Tracker) Registry() *podgroup.Registry { return t.reg }

// gangLocked returns the gang's state, made when the registry knows the group; nil
// otherwise. The registry's lock must be held (for writing when the state may be made).
func (t *Tracker) gangLocked(key Key) (*Gang, *podgroup.Group) {
	d := t.reg.GroupLocked(key)
	if d == nil {
		return nil, nil
	}
	s := t.gangs[key]
	if s == nil {
		s = &Gang{attempted: sets.New[types.UID]()}
		t.gangs[key] = s
	}
	return s, d
}

// peekLocked returns the gang's state without making it (nil when it has none) and its
// data. The registry's lock must be held.
func (t *Tracker) peekLocked(key Key) (*Gang, *podgroup.Group) {
	d := t.reg.GroupLocked(key)
	if d == nil {
		return nil, nil
	}
	return t.gangs[key], d
}

// Before records the gang's phase before the registry changes its data, so that the hook
// that follows checks the change against the table.
func (t *Tracker) Before(key Key) {
	t.before.key, t.before.phase = key, t.phaseLocked(key)
}

// afterData checks the phase a data change moved the gang to.
func (t *Tracker) afterData(key Key, ev Event) {
	if t.before.key == key {
		t.checkLocked(key, ev, t.before.phase)
	}
}

// Forget drops the state of a group the registry forgot.
func (t *Tracker) Forget(key Key) {
	held := false
	if s := t.gangs[key]; s != nil {
		s.forgetPlanFailureLocked()
		if s.preemption != nil {
			t.endPreemptionLocked(key, s, s.preemption)
		}
		held = s.hold != nil
	}
	delete(t.gangs, key)
	if held {
		// PodGroupDeleted ended it; a hold without a PodGroup is not kept either way.
		t.indexHoldsLocked()
	}
	t.unplaced.Delete(key)
	t.deferring.Delete(key)
}

// PodGroupRevised: a new revision of the PodGroup (its spec or constraints) ends what was
// decided under the old one: the blocker, and the hold of a failed gang (every member looks
// again).
func (t *Tracker) PodGroupRevised(key Key, d *podgroup.Group) podgroup.Outcome {
	defer t.afterData(key, PodGroupRevised)
	s, _ := t.gangLocked(key)
	var end *HoldEnd
	if info := d.InfoLocked(); info.HoldAfter.Set && info.HoldAfter.Never {
		end = t.releaseHoldLocked(key, HoldDisabled)
	}
	unblocked := s.unblockLocked()
	released := s.releaseRetryLocked()
	return podgroup.Outcome{Notify: unblocked || released, After: t.afterHoldEnd(end, nil)}
}

// PodGroupDeleted: the PodGroup is gone; what blocked the gang is forgotten.
func (t *Tracker) PodGroupDeleted(key Key, _ *podgroup.Group) podgroup.Outcome {
	defer t.afterData(key, PodGroupDeleted)
	s := t.gangs[key]
	if s == nil {
		return podgroup.Outcome{}
	}
	s.unblockLocked()
	// Its hold ends at once; a new PodGroup of the name is a new gang.
	end := t.releaseHoldLocked(key, HoldDeleted)
	return podgroup.Outcome{After: t.afterHoldEnd(end, nil)}
}

// MemberSet: a member was added or updated. An update of the blocker that can make it fit
// lifts the block; a new member of a shape known to fit nowhere counts as fitting nowhere;
// one more member, or one that may fit now, may let the job do without the rest; a scout
// bound elsewhere ends the hold, and one that is no longer pending is replaced.
func (t *Tracker) MemberSet(key Key, d *podgroup.Group, change podgroup.MemberChange) podgroup.Outcome {
	defer t.afterData(key, MemberSet)
	s, _ := t.gangLocked(key)
	pod := change.Pod
	known := change.Old != nil
	unblocked := known && s.blockerChangedLocked(change.Old, pod) && s.unblockLocked()
	refit := known && s.fitNowhere.Has(pod.UID) && specOrLabelsChanged(change.Old, pod)
	if refit {
		s.fitNowhere.Delete(pod.UID) // it may fit now
	}
	if !known {
		s.newMemberFitsNowhereLocked(d, pod)
	}
	if (!known || refit || change.Relabelled) && s.recheckBlockLocked(d) {
		// One more member, one fewer that fits nowhere, a member in another sub-group: the
		// job may do without them now.
		unblocked = true
	}
	scoutLost := s.scoutLostLocked(d, pod.UID)
	if scoutLost && d.BoundLocked(pod.UID) {
		// Bound elsewhere (not by a plan, which would have ended the hold): the hold ends.
		s.releaseRetryLocked()
	}
	var end *HoldEnd
	if info := d.InfoLocked(); s.hold != nil && info.Bound >= info.MinMember() {
		// The gang runs: the domain held for it is free for everybody at once.
		end = t.releaseHoldLocked(key, HoldBound)
	}
	return podgroup.Outcome{Notify: unblocked || scoutLost, After: t.afterHoldEnd(end, nil)}
}

// MemberDeleted: a member is gone. The blocker's deletion lifts the block, a former
// blocker's frees the members held for it, and a held gang whose scout went needs another.
func (t *Tracker) MemberDeleted(key Key, d *podgroup.Group, pod *v1.Pod) podgroup.Outcome {
	defer t.afterData(key, MemberDeleted)
	s := t.gangs[key]
	if s == nil {
		return podgroup.Outcome{}
	}
	s.attempted.Delete(pod.UID)
	unblocked := false
	if s.blocker != nil && s.blocker.UID == pod.UID {
		unblocked = s.unblockLocked()
	}
	s.fitNowhere.Delete(pod.UID)
	if s.formerBlocker == pod.UID {
		// The members held for it wait for nothing now.
		s.formerBlocker, unblocked = "", true
	}
	// A held gang whose scout went needs another one (retry.go).
	unblocked = unblocked || s.scoutLostLocked(d, pod.UID)
	return podgroup.Outcome{Notify: unblocked}
}

// MemberReserved: a blocker that reserved fits a node after all, so the gang is no longer
// blocked, and the members its Permit activates must not be refused for it (the node change
// that made it fit may reach kube-scheduler's queue before the registry); a former blocker's
// reservation lets the members held for it try; a member of a shape known to fit nowhere
// that reserved shows the shape fits; one more member may let the job do without the rest.
func (t *Tracker) MemberReserved(key Key, d *podgroup.Group, pod *v1.Pod) podgroup.Outcome {
	defer t.afterData(key, MemberReserved)
	s, _ := t.gangLocked(key)
	notify := s.recheckBlockLocked(d)
	if s.blocker != nil && s.blocker.UID == pod.UID {
		notify = s.unblockLocked() || notify
	}
	if s.formerBlocker == pod.UID {
		// The members held for it try now: its Permit activates pending members only when it
		// waits, not when the gang is complete with it (enough members bound already).
		s.formerBlocker, notify = "", true
	}
	if s.fitNowhere.Has(pod.UID) {
		// It fits after all, and so does its shape (a sibling of the blocker's, say).
		s.shapeFitsLocked(d, pod)
		notify = s.recheckBlockLocked(d) || notify
	}
	return podgroup.Outcome{Notify: notify}
}

// NodesChanged: a node was added or changed in capacity. Every blocker may fit now (the
// members held for it stay held until it reserves or goes, or fails again), and the scout of
// each gang waiting for room is woken, at most once per ScoutWakeInterval.
func (t *Tracker) NodesChanged() podgroup.Outcome {
	for key, s := range t.gangs {
		t.step(key, NodesChanged, func() {
			if s.blocker != nil {
				s.formerBlocker = s.blocker.UID
			}
			s.blocker, s.fitNowhere, s.fitNowhereShapes = nil, nil, nil
		})
	}
	return podgroup.Outcome{After: t.wakeScoutsLocked()}
}

// Len returns how many gangs the tracker keeps state for, counted once more for each that is
// deferring: every one of them has data in the registry.
func (t *Tracker) Len() int {
	t.reg.RLock()
	defer t.reg.RUnlock()
	return len(t.gangs) + t.deferring.Len()
}
