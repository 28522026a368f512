package gang

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/metrics"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// A gang's attempts to complete are rounds. A round holds the members reserved since the last
// round ended that have not been allowed yet; it ends when its last members are allowed, or
// it is rejected (a member failed, the gang timed out, a gang of higher precedence needed the
// room). Every decision on a round is taken under the gang state's lock, and a rejected round's
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

// startRoundLocked starts the round's deadline: its members wait in Permit from now. The
// gangs' lock must be held.
func (g *Gang) startRoundLocked(logger klog.Logger, key podgroup.Key, r *gangstate.Round, timeout time.Duration) {
	g.gangs.StepLocked(key, gangstate.RoundWaiting, func() { r.WaitingSince = g.clock.Now() })
	g.armLocked(logger, key, r, r.WaitingSince.Add(timeout))
	metrics.GangsWaitingInPermit.Inc()
}

// armLocked sets the round's deadline to at, replacing the one before. The gangs' lock must
// be held.
func (g *Gang) armLocked(logger klog.Logger, key podgroup.Key, r *gangstate.Round, at time.Time) {
	if r.Deadline != nil {
		r.Deadline.Stop()
	}
	r.Armed++
	armed := r.Armed
	r.DeadlineAt = at
	r.Deadline = g.clock.AfterFunc(at.Sub(g.clock.Now()), func() { g.expire(logger, key, r, armed) })
}

// expire rejects the round at its deadline, unless it was allowed or rejected first, or a
// preemption for the gang still runs: then the members keep the nodes they reserved (the
// preemption counted them as placed; released, those nodes would go to pods of lower
// priority) and the deadline waits for the preemption's end (preemptionEnded), at most until
// roundLimit. Lock order: the gangs' lock, then the preemption's own (PreemptingLocked).
func (g *Gang) expire(logger klog.Logger, key podgroup.Key, r *gangstate.Round, armed int) {
	g.gangs.Lock()
	if g.gangs.RoundLocked(key) != r || r.Armed != armed || r.Ended {
		g.gangs.Unlock()
		return
	}
	info := g.registry.InfoLocked(key)
	timeout := g.timeout(info)
	if g.clock.Since(r.WaitingSince) < roundLimit && g.gangs.PreemptingLocked(key) {
		r.Deferred = true
		g.armLocked(logger, key, r, r.WaitingSince.Add(roundLimit))
		reserved, limit := len(r.Members), r.DeadlineAt
		g.gangs.Unlock()
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
	case r.Deferred:
		why = fmt.Sprintf("waited %s, as long as kube-scheduler lets a pod wait in Permit, for %s while pods evicted for the gang still terminated; %s", roundLimit, wanted, had)
	case !r.PreemptionEndedAt.IsZero():
		why = fmt.Sprintf("timed out %s after the preemption for it ended (%s in all) waiting for %s; %s",
			r.DeadlineAt.Sub(r.PreemptionEndedAt), r.DeadlineAt.Sub(r.WaitingSince).Round(time.Second), wanted, had)
	}
	rejected := g.rejectRoundLocked(key, fmt.Sprintf("gang %s rejected: %s", key, why), nil)
	g.gangs.Unlock()
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
	g.gangs.Lock()
	r := g.gangs.RoundLocked(key)
	if r == nil || r.WaitingSince.IsZero() || r.Ended {
		g.gangs.Unlock()
		return
	}
	info := g.registry.InfoLocked(key)
	if info.PodGroup == nil || !gangstate.JobComplete(info, g.registry.ProgressLocked(key, nil)) {
		g.gangs.Unlock()
		return
	}
	allowed, _ := g.allowLocked(key, r, info, nil)
	g.gangs.Unlock()
	if allowed > 0 {
		g.events.Record(info.PodGroup, v1.EventTypeNormal, EventGangScheduled,
			fmt.Sprintf("gang %s: its PodGroup changed; %d of %d (minMember) members reserved or bound; %d waiting members allowed to bind", key, info.Scheduled, info.MinMember(), allowed))
	}
	logger.V(3).Info("Gang round decided again after its PodGroup changed", "podGroup", key, "scheduled", info.Scheduled, "allowed", allowed)
}

// waitedFor says what a round waits for and what it had: minMember members and, with
// sub-group policies, each policy's minSubGroups complete sub-groups. The gangs' lock must be
// held.
func (g *Gang) waitedFor(key podgroup.Key, info podgroup.Info) (wanted, had string) {
	wanted = fmt.Sprintf("%d members (minMember)", info.MinMember())
	had = fmt.Sprintf("%d were reserved or bound", info.Scheduled)
	if len(info.SubGroupPolicies) == 0 {
		return wanted, had
	}
	progress := g.registry.ProgressLocked(key, nil)
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
	g.gangs.Lock()
	defer g.gangs.Unlock()
	r := g.gangs.RoundLocked(key)
	if r == nil || r.Ended || r.WaitingSince.IsZero() {
		return
	}
	at := g.clock.Now().Add(g.timeout(g.registry.InfoLocked(key)))
	if limit := r.WaitingSince.Add(roundLimit); at.After(limit) {
		at = limit
	}
	if !r.Deferred && !at.After(r.DeadlineAt) {
		return
	}
	r.Deferred = false
	r.PreemptionEndedAt = g.clock.Now()
	g.armLocked(logger, key, r, at)
	logger.V(3).Info("Gang round's deadline set from the end of its preemption", "podGroup", key, "deadline", at)
}

// rejectRoundLocked rejects the gang's current round, or, with only, the part of it that only
// selects: the waiting members are rejected (the framework then unreserves them), and every
// rejected member's reservation is released from the registry now. A rejected member that is
// still between Reserve and Permit is rejected at Permit, one between Permit and the waiting
// pods as soon as it is there. It returns how many waiting members were rejected. The gangs'
// lock must be held.
func (g *Gang) rejectRoundLocked(key podgroup.Key, msg string, only func(*v1.Pod) bool) int {
	r := g.gangs.RoundLocked(key)
	if r == nil {
		return 0
	}
	chosen := make(map[types.UID]*v1.Pod, len(r.Members))
	for uid, pod := range r.Members {
		if only == nil || only(pod) {
			chosen[uid] = pod
		}
	}
	rejected := 0
	for uid, pod := range chosen {
		delete(r.Members, uid)
		g.gangs.LeaveRoundLocked(uid)
		g.registry.UnreserveLocked(pod)
		// Looked up by UID: O(round), not every waiting pod of the cluster.
		if wp := g.handle.GetWaitingPod(uid); wp != nil {
			if wp.Reject(Name, msg) {
				rejected++
			}
		} else if r.Waiters.Has(uid) {
			g.rejecters.Go(func() { g.rejectWhenWaiting(uid, msg) })
			rejected++
		}
		r.Waiters.Delete(uid)
	}
	if only == nil || len(r.Members) == 0 {
		g.gangs.EndRoundLocked(key)
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
		g.gangs.Lock()
		later := g.gangs.MemberRoundLocked(uid) != nil || g.gangs.MemberBatchLocked(uid) != nil
		g.gangs.Unlock()
		if !later {
			wp.Reject(Name, msg)
		}
		return true, nil
	})
	if err != nil {
		klog.FromContext(g.ctx).Error(err, "A gang member whose round was rejected did not come to wait in Permit", "podUID", uid)
	}
}
