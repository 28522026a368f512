package gang

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// Reserve records the member as reserved in its gang's current round, and ends the hold of a
// gang placed member by member that failed before.
func (g *Gang) Reserve(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return nil
	}
	g.gangs.Lock()
	// The registry first: it makes the gang of a member it has not seen yet.
	out := g.registry.ReserveLocked(pod, nodeName)
	g.gangs.ReserveInRoundLocked(key, pod, time.Now())
	g.gangs.Unlock()
	out.Run()
	return nil
}

// Unreserve releases the member. A member of the current round rejects the round (or its
// sub-group's part of it), so that a gang never keeps resources for members that can no
// longer complete it; a member that was allowed fails its batch, so that none of the batch
// binds; a member of an already rejected round only releases itself.
func (g *Gang) Unreserve(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	g.binds.release(pod.UID)
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return
	}
	logger := klog.FromContext(ctx)
	g.gangs.Lock()
	g.registry.UnreserveLocked(pod)
	if b := g.gangs.MemberBatchLocked(pod.UID); b != nil {
		g.gangs.LeaveBatchLocked(pod.UID)
		g.gangs.FailBatchLocked(b, pod.Name, fmt.Sprintf("gang %s: member %s was allowed with this one but did not bind", key, pod.Name))
	}
	r := g.gangs.MemberRoundLocked(pod.UID)
	g.gangs.LeaveRoundLocked(pod.UID)
	if r == nil || r != g.gangs.RoundLocked(key) || r.Members[pod.UID] == nil {
		g.gangs.Unlock()
		logger.V(4).Info("Member of an earlier gang round unreserved", "pod", klog.KObj(pod), "podGroup", key)
		return
	}
	delete(r.Members, pod.UID)
	r.Waiters.Delete(pod.UID)
	view := g.registry.MemberViewLocked(key, pod)
	info := view.Info
	why := fmt.Sprintf("member %s was unreserved", pod.Name)
	only, subGroup := rejectionScope(view)
	if subGroup != "" {
		why = fmt.Sprintf("sub-group %s: %s", subGroup, why)
	}
	rejected := g.rejectRoundLocked(key, fmt.Sprintf("gang %s rejected: %s", key, why), only)
	g.gangs.Unlock()
	if info.PodGroup != nil && rejected > 0 {
		g.events.Record(info.PodGroup, v1.EventTypeWarning, EventGangRejected,
			fmt.Sprintf("gang %s: %s; %d waiting members rejected and their resources released", key, why, rejected))
	}
	logger.V(3).Info("Gang member unreserved", "pod", klog.KObj(pod), "podGroup", key, "rejectedSiblings", rejected)
}

// Permit makes members wait until the job is complete: minMember members reserved or bound
// and, for each sub-group policy, minSubGroups complete sub-groups; a member of a sub-group
// also waits until its own sub-group is complete (all or nothing at subGroupSize). The
// decision and the Allow of the waiting members happen under the gang lock, on counts that
// hold only the bound members, the allowed ones and the current round.
func (g *Gang) Permit(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) (*fwk.Status, time.Duration) {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return nil, 0
	}
	logger := klog.FromContext(ctx)
	g.gangs.Lock()
	r := g.gangs.MemberRoundLocked(pod.UID)
	if r == nil || r != g.gangs.RoundLocked(key) {
		g.gangs.Unlock()
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s: the round this member was reserved in was rejected", key)), 0
	}
	info := g.registry.InfoLocked(key)
	if info.PodGroup == nil {
		g.gangs.Unlock()
		// Deleted while this member was being scheduled.
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("PodGroup %s does not exist", key)), 0
	}
	minMember, timeout := info.MinMember(), g.timeout(info)
	progress := g.registry.ProgressLocked(key, pod)
	if !gangstate.JobComplete(info, progress) || (progress.InSub && !progress.SubComplete) {
		started := !r.WaitingSince.IsZero()
		if !started {
			g.startRoundLocked(logger, key, r, timeout)
		}
		if r.Waiters == nil {
			r.Waiters = sets.New[types.UID]()
		}
		r.Waiters.Insert(pod.UID)
		g.gangs.Unlock()
		if !started {
			g.events.Record(info.PodGroup, v1.EventTypeNormal, EventGangWaiting,
				fmt.Sprintf("gang %s: members are reserved and wait in Permit for the rest of the gang (minMember %d, timeout %s%s)", key, minMember, timeout, timeoutCapped(info)))
			// Once per round, not per member: activating the pending members costs
			// O(members), and they stay in the active queue once there.
			g.activatePending(logger, key)
		}
		logger.V(4).Info("Gang member waits for its gang", "pod", klog.KObj(pod), "podGroup", key, "scheduled", info.Scheduled, "minMember", minMember, "subGroup", progress.Sub.ID)
		msg := fmt.Sprintf("waiting for gang %s: %d of %d (minMember) members reserved or bound", key, info.Scheduled, minMember)
		if progress.InSub {
			msg += fmt.Sprintf("; sub-group %s complete: %v", progress.Sub.ID, progress.SubComplete)
		}
		// The round's own deadline rejects it under the gang lock; the framework's timer only
		// backs it up, so that it can never fire while the round is being allowed.
		return fwk.NewStatus(fwk.Wait, msg), maxPermitWait
	}
	// Allow this member and every waiting member of the round whose sub-group (if any) is
	// complete, as one batch. (This branch runs for each member that completes a sub-group
	// or comes after the job is complete: O(sub-groups) each, not for every member.)
	wasWaiting := !r.WaitingSince.IsZero()
	allowed, refused := g.allowLocked(key, r, info, pod)
	g.gangs.Unlock()
	if refused {
		// The gang state refused a batch below the quorum (and reported it): this member
		// does not bind either.
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s: its members would bind below minMember %d; refused", key, minMember)), 0
	}
	if wasWaiting || allowed > 0 {
		g.events.Record(info.PodGroup, v1.EventTypeNormal, EventGangScheduled,
			fmt.Sprintf("gang %s: %d of %d (minMember) members reserved or bound; %d waiting members allowed to bind", key, info.Scheduled, minMember, allowed))
	}
	logger.V(3).Info("Gang complete", "podGroup", key, "scheduled", info.Scheduled, "allowed", allowed)
	return nil, 0
}

// allowLocked allows, as one batch, the members of the round whose sub-group (if any) is
// complete, and pod (the member in Permit; nil when the round is decided again on its own),
// and returns how many waiting members it allowed, and whether the gang state refused the
// batch (below the quorum). The job must be complete. The gangs' lock must be held.
func (g *Gang) allowLocked(key podgroup.Key, r *gangstate.Round, info podgroup.Info, pod *v1.Pod) (int, bool) {
	var complete sets.Set[string]
	if len(info.SubGroupPolicies) > 0 {
		states := g.registry.SubGroupsLocked(key)
		complete = completeSubGroups(info, states)
	}
	counted := func(p *v1.Pod) bool {
		s, ok := podgroup.SubGroupOf(info.SubGroupPolicies, p)
		return !ok || complete.Has(s.ID)
	}
	// The batch is every member of the round the quorum counts (pod among them), not only
	// those allowed: one no longer waiting was rejected (preempted, deleted) and its
	// Unreserve has not run yet; in the batch, that Unreserve fails it and nobody binds below
	// minMember. The waiting ones are looked up by UID: O(round), not every waiting pod.
	batched := sets.New[types.UID]()
	if pod != nil {
		batched.Insert(pod.UID)
	}
	var allow []fwk.WaitingPod
	for uid, p := range r.Members {
		if !counted(p) || (pod == nil && !r.Waiters.Has(uid)) {
			// Decided again on its own, the round leaves out a member between its Reserve
			// and its Permit: that Permit decides for it (and waits for this batch in PreBind).
			continue
		}
		batched.Insert(uid)
		if wp := g.handle.GetWaitingPod(uid); (pod == nil || uid != pod.UID) && wp != nil {
			allow = append(allow, wp)
		}
	}
	if batched.Len() == 0 {
		return 0, false
	}
	if g.gangs.AllowBatchLocked(key, r, batched) == nil {
		// Below the quorum: the gang state refuses (and reports) it; nobody is allowed.
		return 0, true
	}
	for _, wp := range allow {
		wp.Allow(Name)
	}
	return len(allow), false
}

// completeSubGroups returns the sub-groups with at least subGroupSize members reserved or
// bound.
func completeSubGroups(info podgroup.Info, states []podgroup.SubGroupState) sets.Set[string] {
	size := map[string]int{}
	for _, p := range info.SubGroupPolicies {
		size[p.Name] = int(p.SubGroupSize)
	}
	out := sets.New[string]()
	for _, s := range states {
		if s.Scheduled >= size[s.Policy] {
			out.Insert(s.ID)
		}
	}
	return out
}

// rejectionScope says which waiting members a failure of pod rejects: only its own
// sub-group's when the job can do without that sub-group (it is complete already, or enough
// other members and sub-groups remain), else the whole job's.
func rejectionScope(view podgroup.MemberView) (func(*v1.Pod) bool, string) {
	info, sub := view.Info, view.Sub
	if !view.InSub {
		return nil, ""
	}
	dispensable := gangstate.JobComplete(info, view.Progress)
	if !dispensable {
		var others, subMembers int
		for _, s := range view.States {
			if s.ID == sub.ID {
				subMembers = s.Members
			} else if s.Policy == sub.Policy && s.Members > 0 {
				others++ // a sub-group whose members are all gone is not one (CanDropSubGroup)
			}
		}
		policy, _ := info.Policy(sub.Policy)
		dispensable = info.Members-subMembers >= info.MinMember() && others >= int(policy.MinSubGroups)
	}
	if !dispensable {
		return nil, ""
	}
	return func(p *v1.Pod) bool {
		s, ok := podgroup.SubGroupOf(info.SubGroupPolicies, p)
		return ok && s.ID == sub.ID
	}, sub.ID
}

// timeout is the PodGroup's scheduleTimeoutSeconds, else the plugin's default (validated to
// at most roundLimit), never more than roundLimit.
func (g *Gang) timeout(info podgroup.Info) time.Duration {
	if s := podGroupTimeout(info); s > 0 {
		return min(time.Duration(s)*time.Second, roundLimit)
	}
	return time.Duration(g.args.DefaultScheduleTimeoutSeconds) * time.Second
}

// podGroupTimeout is the PodGroup's scheduleTimeoutSeconds, 0 when it sets none.
func podGroupTimeout(info podgroup.Info) int64 {
	if info.PodGroup != nil && info.PodGroup.Spec.ScheduleTimeoutSeconds != nil {
		return int64(*info.PodGroup.Spec.ScheduleTimeoutSeconds)
	}
	return 0
}

// timeoutCapped says, for the GangWaiting Event, that the PodGroup asked for a longer wait
// than kube-scheduler allows in Permit.
func timeoutCapped(info podgroup.Info) string {
	if s := podGroupTimeout(info); s > config.MaxScheduleTimeoutSeconds {
		return fmt.Sprintf(": scheduleTimeoutSeconds %d is longer than kube-scheduler lets a pod wait in Permit", s)
	}
	return ""
}
