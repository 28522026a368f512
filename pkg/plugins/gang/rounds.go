package gang

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/metrics"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// A gang's attempts to complete are rounds. A round holds the members reserved since the last
// round ended that have not been allowed yet; it ends when its last members are allowed, or
// it is rejected (a member failed, the gang timed out, a gang of higher precedence needed the
// room). Every decision on a round is taken under Gang.mu, and a rejected round's
// reservations are released from the registry at once, so the quorum that Permit reads from
// the registry counts exactly the bound members, the allowed ones and the current round:
// never the leftovers of a rejected round whose Unreserve calls have not run yet.

// maxPermitWait is kube-scheduler's limit on a pod's wait in Permit (the framework's
// maxTimeout). Permit asks for all of it: the framework's timer is only a backstop, and the
// round's own deadline, always earlier (roundLimit), decides.
const maxPermitWait = 15 * time.Minute

// roundLimit is the longest a round waits from its first waiting member, however long a
// preemption for the gang defers its deadline.
const roundLimit = time.Duration(config.MaxScheduleTimeoutSeconds) * time.Second

// round is a gang's current attempt.
type round struct {
	// members are the round's reserved members that have not been allowed.
	members map[types.UID]*v1.Pod
	// waitingSince is when the round's first member waited in Permit; the deadline then
	// fires at deadlineAt, the gang's timeout later unless a preemption for the gang moves it.
	waitingSince time.Time
	deadlineAt   time.Time
	deadline     clock.Timer
	// armed counts the deadline's timers: one that fired just as it was replaced finds a
	// newer count and does nothing.
	armed int
	// deferred says the deadline came while a preemption for the gang ran: the preemption's
	// end sets it again, and roundLimit bounds it. preemptionEndedAt is when an end gave the
	// round a later deadline.
	deferred          bool
	preemptionEndedAt time.Time
	// waiters are the members whose Permit returned Wait: kube-scheduler adds each to its
	// waiting pods a moment later, outside the gang lock (rejectWhenWaiting).
	waiters sets.Set[types.UID]
	// ended is set by stop, so that the waiting gangs' gauge counts each round once.
	ended bool
	// failed are the members that could not be placed while the round was open; an elastic
	// gang's round survives them while the others can still make minMember.
	failed sets.Set[types.UID]
}

// startRoundLocked starts the round's deadline: its members wait in Permit from now. g.mu
// must be held.
func (g *Gang) startRoundLocked(logger klog.Logger, key podgroup.Key, r *round, timeout time.Duration) {
	r.waitingSince = g.clock.Now()
	g.armLocked(logger, key, r, r.waitingSince.Add(timeout))
	metrics.GangsWaitingInPermit.Inc()
}

// armLocked sets the round's deadline to at, replacing the one before. g.mu must be held.
func (g *Gang) armLocked(logger klog.Logger, key podgroup.Key, r *round, at time.Time) {
	if r.deadline != nil {
		r.deadline.Stop()
	}
	r.armed++
	armed := r.armed
	r.deadlineAt = at
	r.deadline = g.clock.AfterFunc(at.Sub(g.clock.Now()), func() { g.expire(logger, key, r, armed) })
}

// stop ends the round: its deadline is stopped and it no longer counts as waiting. Later
// calls do nothing. g.mu must be held.
func (r *round) stop() {
	if r.ended {
		return
	}
	r.ended = true
	if r.deadline != nil {
		r.deadline.Stop()
	}
	if !r.waitingSince.IsZero() {
		metrics.GangsWaitingInPermit.Dec()
	}
}

// expire rejects the round at its deadline, unless it was allowed or rejected first, or a
// preemption for the gang still runs: then the members keep the nodes they reserved (the
// preemption counted them as placed; released, those nodes would go to pods of lower
// priority) and the deadline waits for the preemption's end (preemptionEnded), at most until
// roundLimit. Lock order: g.mu, then the preemption's own lock (Registry.Preempting).
func (g *Gang) expire(logger klog.Logger, key podgroup.Key, r *round, armed int) {
	g.mu.Lock()
	if g.rounds[key] != r || r.armed != armed || r.ended {
		g.mu.Unlock()
		return
	}
	info := g.registry.Info(key)
	timeout := g.timeout(info)
	if g.clock.Since(r.waitingSince) < roundLimit && g.gangs.Preempting(key) {
		r.deferred = true
		g.armLocked(logger, key, r, r.waitingSince.Add(roundLimit))
		reserved, limit := len(r.members), r.deadlineAt
		g.mu.Unlock()
		if info.PodGroup != nil {
			g.events.Record(info.PodGroup, v1.EventTypeNormal, EventGangDeadlineDeferred,
				fmt.Sprintf("gang %s: its timeout (%s) passed while pods evicted for it terminate; its %d reserved members keep their nodes until %s after the preemption ends, at most %s after the first one waited", key, timeout, reserved, timeout, roundLimit))
		}
		logger.V(2).Info("Gang round's deadline deferred: a preemption for the gang runs", "podGroup", key, "reserved", reserved, "limit", limit)
		return
	}
	wanted, had := g.waitedFor(key, info)
	why := fmt.Sprintf("timed out after %s waiting for %s; %s", timeout, wanted, had)
	switch {
	case r.deferred:
		why = fmt.Sprintf("waited %s, as long as kube-scheduler lets a pod wait in Permit, for %s while pods evicted for the gang still terminated; %s", roundLimit, wanted, had)
	case !r.preemptionEndedAt.IsZero():
		why = fmt.Sprintf("timed out %s after the preemption for it ended (%s in all) waiting for %s; %s",
			r.deadlineAt.Sub(r.preemptionEndedAt), r.deadlineAt.Sub(r.waitingSince).Round(time.Second), wanted, had)
	}
	rejected := g.rejectRoundLocked(key, fmt.Sprintf("gang %s rejected: %s", key, why), nil)
	g.mu.Unlock()
	if info.PodGroup != nil {
		g.events.Record(info.PodGroup, v1.EventTypeWarning, EventGangTimedOut,
			fmt.Sprintf("gang %s: %s; %d waiting members rejected and their resources released", key, why, rejected))
	}
	logger.V(3).Info("Gang round timed out", "podGroup", key, "rejected", rejected)
}

// decideAgain allows a waiting round that a change of its PodGroup completed (minMember or
// minSubGroups lowered, a smaller subGroupSize): without it the round would wait for another
// member's Permit, which may never come, and then time out with a message that contradicts
// the PodGroup. A change that asks for more leaves the round waiting for more members, as a
// round does until its deadline.
func (g *Gang) decideAgain(logger klog.Logger, key podgroup.Key) {
	g.mu.Lock()
	r := g.rounds[key]
	if r == nil || r.waitingSince.IsZero() || r.ended {
		g.mu.Unlock()
		return
	}
	info := g.registry.Info(key)
	if info.PodGroup == nil || !jobComplete(info, g.registry.Progress(key, nil)) {
		g.mu.Unlock()
		return
	}
	allowed := g.allowLocked(key, r, info, nil)
	g.mu.Unlock()
	if allowed > 0 {
		g.events.Record(info.PodGroup, v1.EventTypeNormal, EventGangScheduled,
			fmt.Sprintf("gang %s: its PodGroup changed; %d of %d (minMember) members reserved or bound; %d waiting members allowed to bind", key, info.Scheduled, info.MinMember(), allowed))
	}
	logger.V(3).Info("Gang round decided again after its PodGroup changed", "podGroup", key, "scheduled", info.Scheduled, "allowed", allowed)
}

// waitedFor says what a round waits for and what it had: minMember members and, with
// sub-group policies, each policy's minSubGroups complete sub-groups.
func (g *Gang) waitedFor(key podgroup.Key, info podgroup.Info) (wanted, had string) {
	wanted = fmt.Sprintf("%d members (minMember)", info.MinMember())
	had = fmt.Sprintf("%d were reserved or bound", info.Scheduled)
	if len(info.SubGroupPolicies) == 0 {
		return wanted, had
	}
	progress := g.registry.Progress(key, nil)
	for _, p := range info.SubGroupPolicies {
		wanted += fmt.Sprintf(" and %d complete sub-groups of %s (minSubGroups, %d members each)", p.MinSubGroups, p.Name, p.SubGroupSize)
		had += fmt.Sprintf(", complete sub-groups of %s: %d", p.Name, progress.CompleteByPolicy[p.Name])
	}
	return wanted, had
}

// preemptionEnded gives the gang's waiting round its timeout again from now: the members the
// preemption made room for are scheduled only now. A later deadline stays; none goes past
// roundLimit.
func (g *Gang) preemptionEnded(logger klog.Logger, key podgroup.Key) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.rounds[key]
	if r == nil || r.ended || r.waitingSince.IsZero() {
		return
	}
	at := g.clock.Now().Add(g.timeout(g.registry.Info(key)))
	if limit := r.waitingSince.Add(roundLimit); at.After(limit) {
		at = limit
	}
	if !r.deferred && !at.After(r.deadlineAt) {
		return
	}
	r.deferred = false
	r.preemptionEndedAt = g.clock.Now()
	g.armLocked(logger, key, r, at)
	logger.V(3).Info("Gang round's deadline set from the end of its preemption", "podGroup", key, "deadline", at)
}

// rejectRoundLocked rejects the gang's current round, or, with only, the part of it that only
// selects: the waiting members are rejected (the framework then unreserves them), and every
// rejected member's reservation is released from the registry now. A rejected member that is
// still between Reserve and Permit is rejected at Permit, one between Permit and the waiting
// pods as soon as it is there. It returns how many waiting members were rejected. g.mu must
// be held.
func (g *Gang) rejectRoundLocked(key podgroup.Key, msg string, only func(*v1.Pod) bool) int {
	r := g.rounds[key]
	if r == nil {
		return 0
	}
	chosen := make(map[types.UID]*v1.Pod, len(r.members))
	for uid, pod := range r.members {
		if only == nil || only(pod) {
			chosen[uid] = pod
		}
	}
	rejected := 0
	for uid, pod := range chosen {
		delete(r.members, uid)
		delete(g.memberRound, uid)
		g.registry.Unreserve(pod)
		// Looked up by UID: O(round), not every waiting pod of the cluster.
		if wp := g.handle.GetWaitingPod(uid); wp != nil {
			if wp.Reject(Name, msg) {
				rejected++
			}
		} else if r.waiters.Has(uid) {
			g.rejecters.Go(func() { g.rejectWhenWaiting(uid, msg) })
			rejected++
		}
		r.waiters.Delete(uid)
	}
	if only == nil || len(r.members) == 0 {
		r.stop()
		delete(g.rounds, key)
	}
	return rejected
}

// rejectWhenWaiting rejects a member whose round was rejected after its Permit returned Wait
// and before kube-scheduler added it to its waiting pods (two steps of the scheduling
// goroutine, outside the gang lock): it is there a moment later. Left alone, it would hold its
// node until the framework's backstop, 15 minutes on.
func (g *Gang) rejectWhenWaiting(uid types.UID, msg string) {
	err := wait.PollUntilContextTimeout(g.ctx, time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		wp := g.handle.GetWaitingPod(uid)
		if wp == nil {
			return false, nil
		}
		// A member in a round or batch again is a later attempt (the one rejected left the
		// waiting pods before this poll saw it, and Reserve precedes every Wait): not ours.
		g.mu.Lock()
		later := g.memberRound[uid] != nil || g.memberBatch[uid] != nil
		g.mu.Unlock()
		if !later {
			wp.Reject(Name, msg)
		}
		return true, nil
	})
	if err != nil {
		klog.FromContext(g.ctx).Error(err, "A gang member whose round was rejected did not come to wait in Permit", "podUID", uid)
	}
}
