package gang

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

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

// waitSlack is how much longer than the round's own deadline the framework lets a member
// wait in Permit: the framework's timer is a backstop that never decides.
const waitSlack = 30 * time.Second

// round is a gang's current attempt.
type round struct {
	// members are the round's reserved members that have not been allowed.
	members map[types.UID]*v1.Pod
	// waitingSince is when the round's first member waited in Permit; deadline then fires
	// at the gang's timeout.
	waitingSince time.Time
	deadline     *time.Timer
	// ended is set by stop, so that the waiting gangs' gauge counts each round once.
	ended bool
	// failed are the members that could not be placed while the round was open; an elastic
	// gang's round survives them while the others can still make minMember.
	failed sets.Set[types.UID]
}

// start starts the round's deadline: its members wait in Permit from now. g.mu must be held.
func (r *round) start(timeout time.Duration, expire func()) {
	r.waitingSince = time.Now()
	r.deadline = time.AfterFunc(timeout, expire)
	metrics.GangsWaitingInPermit.Inc()
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

// expire rejects the round at its deadline, unless it was allowed or rejected first.
func (g *Gang) expire(logger klog.Logger, key podgroup.Key, r *round) {
	g.mu.Lock()
	if g.rounds[key] != r {
		g.mu.Unlock()
		return
	}
	info := g.registry.Info(key)
	timeout := g.timeout(info)
	why := fmt.Sprintf("timed out after %s waiting for %d members (minMember); %d were reserved or bound", timeout, info.MinMember(), info.Scheduled)
	rejected := g.rejectRoundLocked(key, fmt.Sprintf("gang %s rejected: %s", key, why), nil)
	g.mu.Unlock()
	if info.PodGroup != nil {
		g.events.Record(info.PodGroup, v1.EventTypeWarning, EventGangTimedOut,
			fmt.Sprintf("gang %s: %s; %d waiting members rejected and their resources released", key, why, rejected))
	}
	logger.V(3).Info("Gang round timed out", "podGroup", key, "rejected", rejected)
}

// rejectRoundLocked rejects the gang's current round, or, with only, the part of it that only
// selects: the waiting members are rejected (the framework then unreserves them), and every
// rejected member's reservation is released from the registry now. A rejected member that is
// still between Reserve and Permit is rejected at Permit. It returns how many waiting members
// were rejected. g.mu must be held.
func (g *Gang) rejectRoundLocked(key podgroup.Key, msg string, only func(*v1.Pod) bool) int {
	r := g.rounds[key]
	if r == nil {
		return 0
	}
	waiting := map[types.UID]fwk.WaitingPod{}
	g.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if g.memberRound[wp.GetPod().UID] == r {
			waiting[wp.GetPod().UID] = wp
		}
	})
	rejected := 0
	for uid, pod := range r.members {
		if only != nil && !only(pod) {
			continue
		}
		delete(r.members, uid)
		delete(g.memberRound, uid)
		g.registry.Unreserve(pod)
		if wp := waiting[uid]; wp != nil && wp.Reject(Name, msg) {
			rejected++
		}
	}
	if only == nil || len(r.members) == 0 {
		r.stop()
		delete(g.rounds, key)
	}
	return rejected
}
