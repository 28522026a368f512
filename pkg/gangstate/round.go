package gangstate

import (
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/metrics"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// A gang's attempts to complete are rounds (the Gang plugin's Permit). A round holds the
// members reserved since the last round ended that have not been allowed yet; it ends when
// its last members are allowed, or it is rejected (a member failed, the gang timed out, a
// gang of higher precedence needed the room). The members allowed together form a batch,
// which binds only when every one of them reached PreBind.

// Round is a gang's current attempt.
type Round struct {
	// Members are the round's reserved members that have not been allowed.
	Members map[types.UID]*v1.Pod
	// WaitingSince is when the round's first member waited in Permit; the deadline then
	// fires at DeadlineAt, the gang's timeout later unless a preemption for the gang moves it.
	WaitingSince time.Time
	DeadlineAt   time.Time
	Deadline     clock.Timer
	// Armed counts the deadline's timers: one that fired just as it was replaced finds a
	// newer count and does nothing.
	Armed int
	// Deferred says the deadline came while a preemption for the gang ran: the preemption's
	// end sets it again, and the round's limit bounds it. PreemptionEndedAt is when an end
	// gave the round a later deadline.
	Deferred          bool
	PreemptionEndedAt time.Time
	// Waiters are the members whose Permit returned Wait: kube-scheduler adds each to its
	// waiting pods a moment later, outside the lock.
	Waiters sets.Set[types.UID]
	// Ended is set by Stop, so that the waiting gangs' gauge counts each round once.
	Ended bool
	// Failed are the members that could not be placed while the round was open; an elastic
	// gang's round survives them while the others can still make minMember.
	Failed sets.Set[types.UID]
}

// Waiting reports whether the round's members wait in Permit.
func (r *Round) Waiting() bool { return r != nil && !r.Ended && !r.WaitingSince.IsZero() }

// Stop ends the round: its deadline is stopped and it no longer counts as waiting. Later
// calls do nothing. The lock must be held.
func (r *Round) Stop() {
	if r.Ended {
		return
	}
	r.Ended = true
	if r.Deadline != nil {
		r.Deadline.Stop()
	}
	if !r.WaitingSince.IsZero() {
		metrics.GangsWaitingInPermit.Dec()
	}
}

// Batch is the set of members that Permit allowed together. They bind only when every one of
// them has reached PreBind: a member whose Allow came too late (it was preempted or timed
// out while the quorum was being counted) is unreserved instead, fails the batch, and then no
// member of the batch binds. Without the barrier the others would bind below minMember.
//
// A batch allowed while an earlier batch of its gang is still short of its barrier counted
// that batch's members in its quorum: it binds only after they pass it, and fails with them
// (an extra member of an elastic gang, a sub-group completed after the job's batch).
type Batch struct {
	Key     Key
	Members int
	// Earlier are the gang's batches still open when this one was allowed.
	Earlier []*Batch
	Arrived int
	// Bound counts the members that reached PostBind.
	Bound int
	// Ready is closed when every member arrived, Failed when one member failed.
	Ready  chan struct{}
	Failed chan struct{}
	once   sync.Once
	// Member is the member whose failure failed the batch, Reason what its members are told.
	Member, Reason string
}

// RoundLocked returns the gang's current round (nil: none). The lock must be held.
func (t *Tracker) RoundLocked(key Key) *Round {
	if s := t.gangs[key]; s != nil {
		return s.round
	}
	return nil
}

// ReserveInRoundLocked puts a member the scheduler reserved in its gang's current round,
// which it starts if there is none, and returns it; nil when the registry does not know the
// gang. The first reservation of the gang is remembered (BindingStarted). The lock must be
// held.
func (t *Tracker) ReserveInRoundLocked(key Key, pod *v1.Pod, now time.Time) *Round {
	s, _ := t.gangLocked(key)
	if s == nil {
		return nil
	}
	t.step(key, MemberReservedInRound, func() {
		if s.round == nil {
			s.round = &Round{Members: map[types.UID]*v1.Pod{}}
		}
		s.round.Members[pod.UID] = pod
	})
	t.memberRound[pod.UID] = s.round
	if s.firstReserved.IsZero() {
		s.firstReserved = now
	}
	return s.round
}

// EndRoundLocked stops the gang's round and forgets it (its last members were allowed or it
// was rejected). The lock must be held.
func (t *Tracker) EndRoundLocked(key Key) {
	if s := t.gangs[key]; s != nil && s.round != nil {
		t.step(key, RoundEnded, func() {
			s.round.Stop()
			s.round = nil
		})
	}
}

// EachRoundLocked calls f for every gang's round. The lock must be held.
func (t *Tracker) EachRoundLocked(f func(Key, *Round)) {
	for key, s := range t.gangs {
		if s.round != nil {
			f(key, s.round)
		}
	}
}

// MemberRoundLocked returns the round the member was reserved in (nil: none, or it was
// allowed or rejected). The lock must be held.
func (t *Tracker) MemberRoundLocked(uid types.UID) *Round { return t.memberRound[uid] }

// LeaveRoundLocked takes the member out of the round it was reserved in. The lock must be
// held.
func (t *Tracker) LeaveRoundLocked(uid types.UID) { delete(t.memberRound, uid) }

// MemberBatchLocked returns the batch the member was allowed with (nil: none). The lock must
// be held.
func (t *Tracker) MemberBatchLocked(uid types.UID) *Batch { return t.memberBatch[uid] }

// LeaveBatchLocked forgets the member's batch (it bound, or was unreserved). The lock must be
// held.
func (t *Tracker) LeaveBatchLocked(uid types.UID) { delete(t.memberBatch, uid) }

// JobComplete reports the quorum of a gang: minMember members reserved or bound, counting only the members that can bind
// (those of complete sub-groups and of the default group), and minSubGroups complete
// sub-groups of every policy.
func JobComplete(info podgroup.Info, progress podgroup.SubGroupProgress) bool {
	if progress.Bindable < info.MinMember() {
		return false
	}
	for _, p := range info.SubGroupPolicies {
		if progress.CompleteByPolicy[p.Name] < int(p.MinSubGroups) {
			return false
		}
	}
	return true
}

// AllowBatchLocked makes a batch of the gang's members allowed together, after the gang's
// open batches: the members leave the round (which ends when nobody is left in it) and wait
// for each other in PreBind. A batch below the gang's quorum (JobComplete) is refused: nil,
// reported as a violation (no gang binds below minMember). The lock must be held.
func (t *Tracker) AllowBatchLocked(key Key, r *Round, members sets.Set[types.UID]) *Batch {
	s, d := t.gangLocked(key)
	if s == nil {
		return nil
	}
	if info, progress := d.InfoLocked(), t.reg.ProgressLocked(key, nil); !JobComplete(info, progress) {
		phase := t.phaseLocked(key)
		t.refused(key, BatchAllowed, phase, fmt.Sprintf("a batch of %d below the quorum (%d members can bind of minMember %d)", members.Len(), progress.Bindable, info.MinMember()))
		return nil
	}
	b := &Batch{Key: key, Members: members.Len(), Ready: make(chan struct{}), Failed: make(chan struct{})}
	for e := range s.openBatches {
		b.Earlier = append(b.Earlier, e)
	}
	t.step(key, BatchAllowed, func() {
		if s.openBatches == nil {
			s.openBatches = map[*Batch]struct{}{}
		}
		s.openBatches[b] = struct{}{}
		for uid := range members {
			delete(r.Members, uid)
			r.Waiters.Delete(uid)
			delete(t.memberRound, uid)
			t.memberBatch[uid] = b
		}
		if len(r.Members) == 0 && s.round == r {
			r.Stop()
			s.round = nil
		}
	})
	return b
}

// FailBatchLocked fails the batch because the member did not bind, with the first reason
// given. The lock must be held.
func (t *Tracker) FailBatchLocked(b *Batch, member, reason string) {
	b.once.Do(func() {
		b.Member, b.Reason = member, reason
		close(b.Failed)
	})
	t.CloseBatchLocked(b)
}

// ArriveLocked counts a member of the batch that reached PreBind; when it is the last, the
// batch is ready and leaves its gang's open batches. The lock must be held.
func (t *Tracker) ArriveLocked(b *Batch) {
	b.Arrived++
	if b.Arrived == b.Members {
		close(b.Ready)
		t.CloseBatchLocked(b)
	}
}

// CloseBatchLocked takes a batch that passed its barrier or failed out of its gang's open
// batches. The lock must be held.
func (t *Tracker) CloseBatchLocked(b *Batch) {
	if s := t.gangs[b.Key]; s != nil {
		t.step(b.Key, BatchClosed, func() { delete(s.openBatches, b) })
	}
}

// BindingStartedLocked returns when the gang's first member was reserved (ok false: none
// since the gang's quorum last bound), for the time a gang takes to bind. The lock must be
// held.
func (t *Tracker) BindingStartedLocked(key Key) (time.Time, bool) {
	if s := t.gangs[key]; s != nil && !s.firstReserved.IsZero() {
		return s.firstReserved, true
	}
	return time.Time{}, false
}

// QuorumBoundLocked records that the gang's quorum batch bound, and reports whether it had
// before. The lock must be held.
func (t *Tracker) QuorumBoundLocked(key Key) (before bool) {
	s, _ := t.gangLocked(key)
	if s == nil {
		return true
	}
	before, s.quorumBound = s.quorumBound, true
	return before
}

// ForgetRoundsLocked forgets when the gang's binding started and whether its quorum bound
// (its PodGroup was deleted). The lock must be held.
func (t *Tracker) ForgetRoundsLocked(key Key) {
	if s := t.gangs[key]; s != nil {
		s.firstReserved, s.quorumBound = time.Time{}, false
	}
}

// RoundsLeft counts what the rounds keep: members in a batch, members in a round, gangs with
// a round, and gangs with open batches; all are 0 when nothing waits in Permit or PreBind.
func (t *Tracker) RoundsLeft() (memberBatches, memberRounds, rounds, openBatches int) {
	t.reg.RLock()
	defer t.reg.RUnlock()
	for _, s := range t.gangs {
		if s.round != nil {
			rounds++
		}
		if len(s.openBatches) > 0 {
			openBatches++
		}
	}
	return len(t.memberBatch), len(t.memberRound), rounds, openBatches
}
