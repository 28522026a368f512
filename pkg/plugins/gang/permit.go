package gang

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// permitMargin is how close to the round's timeout the last member may complete a gang:
// closer than this, a waiting member's timer may fire while the gang is being allowed, so
// the round is rejected instead (members time out at their own Permit time + timeout, never
// earlier than the round's start + timeout).
const permitMargin = time.Second

// Reserve records the member as reserved.
func (g *Gang) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return nil
	}
	g.registry.Reserve(pod, nodeName)
	g.mu.Lock()
	g.roundOf[pod.UID] = g.round[key]
	g.mu.Unlock()
	return nil
}

// Unreserve releases the member and, if it belongs to the group's current round, rejects its
// waiting siblings at once, so that a gang never keeps resources for members that can no
// longer complete it. A member of an already rejected round only releases itself.
func (g *Gang) Unreserve(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return
	}
	g.registry.Unreserve(pod)
	info := g.registry.Info(key)
	timeout := g.timeout(info)
	g.mu.Lock()
	podRound, reserved := g.roundOf[pod.UID]
	delete(g.roundOf, pod.UID)
	if !reserved || podRound != g.round[key] {
		g.mu.Unlock()
		klog.FromContext(ctx).V(4).Info("Member of an earlier gang round unreserved", "pod", klog.KObj(pod), "podGroup", key)
		return
	}
	since, waiting := g.waitingSince[key]
	reason, why := EventGangRejected, fmt.Sprintf("member %s was unreserved", pod.Name)
	if waiting && time.Since(since) >= timeout {
		reason, why = EventGangTimedOut, fmt.Sprintf("timed out after %s waiting for %d members (minMember); %d were reserved or bound", timeout, info.MinMember(), info.Scheduled+1)
	}
	only, subGroup := g.rejectionScope(key, info, pod)
	if subGroup != "" {
		why = fmt.Sprintf("sub-group %s: %s", subGroup, why)
	}
	rejected := g.rejectRoundLocked(key, fmt.Sprintf("gang %s rejected: %s", key, why), only)
	g.mu.Unlock()
	if info.PodGroup != nil && (rejected > 0 || reason == EventGangTimedOut) {
		g.events.Record(info.PodGroup, v1.EventTypeWarning, reason,
			fmt.Sprintf("gang %s: %s; %d waiting members rejected and their resources released", key, why, rejected))
	}
	klog.FromContext(ctx).V(3).Info("Gang member unreserved", "pod", klog.KObj(pod), "podGroup", key, "rejectedSiblings", rejected)
}

// Permit makes members wait until the job is complete: minMember members reserved or bound
// and, for each sub-group policy, minSubGroups complete sub-groups; a member of a sub-group
// also waits until its own sub-group is complete (all or nothing at subGroupSize).
func (g *Gang) Permit(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) (*fwk.Status, time.Duration) {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return nil, 0
	}
	logger := klog.FromContext(ctx)
	info := g.registry.Info(key)
	if info.PodGroup == nil {
		// Deleted while this member was being scheduled.
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("PodGroup %s does not exist", key)), 0
	}
	minMember := info.MinMember()
	states, sub, inSub := g.registry.SubGroups(key, pod)
	complete := completeSubGroups(info, states)
	jobDone := g.jobComplete(info, states, complete)
	if !jobDone || (inSub && !complete.Has(sub.ID)) {
		g.mu.Lock()
		_, roundStarted := g.waitingSince[key]
		if !roundStarted {
			g.waitingSince[key] = time.Now()
		}
		g.mu.Unlock()
		if !roundStarted {
			g.events.Record(info.PodGroup, v1.EventTypeNormal, EventGangWaiting,
				fmt.Sprintf("gang %s: members are reserved and wait in Permit for the rest of the gang (minMember %d, timeout %s)", key, minMember, g.timeout(info)))
			// Once per round, not per member: activating the pending members costs
			// O(members), and they stay in the active queue once there.
			g.activatePending(logger, key)
		}
		logger.V(4).Info("Gang member waits for its gang", "pod", klog.KObj(pod), "podGroup", key, "scheduled", info.Scheduled, "minMember", minMember, "subGroup", sub.ID)
		msg := fmt.Sprintf("waiting for gang %s: %d of %d (minMember) members reserved or bound", key, info.Scheduled, minMember)
		if inSub {
			msg += fmt.Sprintf("; sub-group %s complete: %v", sub.ID, complete.Has(sub.ID))
		}
		return fwk.NewStatus(fwk.Wait, msg), g.timeout(info)
	}
	g.mu.Lock()
	since, wasWaiting := g.waitingSince[key]
	if wasWaiting && time.Since(since) > g.timeout(info)-permitMargin {
		// Too late to allow the round safely: a waiting member may be timing out now.
		rejected := g.rejectRoundLocked(key, fmt.Sprintf("gang %s rejected: the last member arrived at the end of the %s timeout", key, g.timeout(info)), nil)
		g.mu.Unlock()
		g.events.Record(info.PodGroup, v1.EventTypeWarning, EventGangTimedOut,
			fmt.Sprintf("gang %s: the last member arrived at the end of the %s timeout; %d waiting members rejected and their resources released", key, g.timeout(info), rejected))
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s: the round timed out while the last member was being scheduled", key)), 0
	}
	// Allow every waiting member of the job whose sub-group (if any) is complete.
	allowed := 0
	g.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		p := wp.GetPod()
		if k, ok := podgroup.KeyOf(p); !ok || k != key {
			return
		}
		if s, ok := podgroup.SubGroupOf(info.SubGroupPolicies, p); ok && !complete.Has(s.ID) {
			return
		}
		wp.Allow(Name)
		allowed++
	})
	delete(g.waitingSince, key)
	g.mu.Unlock()
	if wasWaiting || allowed > 0 {
		g.events.Record(info.PodGroup, v1.EventTypeNormal, EventGangScheduled,
			fmt.Sprintf("gang %s: %d of %d (minMember) members reserved or bound; %d waiting members allowed to bind", key, info.Scheduled, minMember, allowed))
	}
	logger.V(3).Info("Gang complete", "podGroup", key, "scheduled", info.Scheduled, "allowed", allowed)
	return nil, 0
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

// jobComplete: minMember members reserved or bound, counting only the members that can bind
// (those of complete sub-groups and of the default group), and minSubGroups complete
// sub-groups of every policy.
func (g *Gang) jobComplete(info podgroup.Info, states []podgroup.SubGroupState, complete sets.Set[string]) bool {
	bindable := info.Scheduled
	perPolicy := map[string]int{}
	for _, s := range states {
		if complete.Has(s.ID) {
			perPolicy[s.Policy]++
		} else {
			bindable -= s.Scheduled
		}
	}
	if bindable < info.MinMember() {
		return false
	}
	for _, p := range info.SubGroupPolicies {
		if perPolicy[p.Name] < int(p.MinSubGroups) {
			return false
		}
	}
	return true
}

// rejectionScope says which waiting members a failure of pod rejects: only its own
// sub-group's when the job can do without that sub-group (it is complete already, or enough
// other members and sub-groups remain), else the whole job's.
func (g *Gang) rejectionScope(key podgroup.Key, info podgroup.Info, pod *v1.Pod) (func(*v1.Pod) bool, string) {
	states, sub, inSub := g.registry.SubGroups(key, pod)
	if !inSub {
		return nil, ""
	}
	dispensable := g.jobComplete(info, states, completeSubGroups(info, states))
	if !dispensable {
		var minSubGroups, others, subMembers int
		for _, p := range info.SubGroupPolicies {
			if p.Name == sub.Policy {
				minSubGroups = int(p.MinSubGroups)
			}
		}
		for _, s := range states {
			if s.ID == sub.ID {
				subMembers = s.Members
			} else if s.Policy == sub.Policy {
				others++
			}
		}
		dispensable = info.Members-subMembers >= info.MinMember() && others >= minSubGroups
	}
	if !dispensable {
		return nil, ""
	}
	return func(p *v1.Pod) bool {
		s, ok := podgroup.SubGroupOf(info.SubGroupPolicies, p)
		return ok && s.ID == sub.ID
	}, sub.ID
}

// timeout is the PodGroup's scheduleTimeoutSeconds, else the plugin's default.
func (g *Gang) timeout(info podgroup.Info) time.Duration {
	if info.PodGroup != nil && info.PodGroup.Spec.ScheduleTimeoutSeconds != nil && *info.PodGroup.Spec.ScheduleTimeoutSeconds > 0 {
		return time.Duration(*info.PodGroup.Spec.ScheduleTimeoutSeconds) * time.Second
	}
	return time.Duration(g.args.DefaultScheduleTimeoutSeconds) * time.Second
}

// rejectRoundLocked ends the group's current round: every waiting member (or, with only, every
// waiting member only selects) is rejected (and
// will be unreserved by the framework) and later Unreserves of this round's members do not
// reject the next round. It returns how many members were waiting. g.mu must be held.
func (g *Gang) rejectRoundLocked(key podgroup.Key, msg string, only func(*v1.Pod) bool) int {
	var waiting []fwk.WaitingPod
	g.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if k, ok := podgroup.KeyOf(wp.GetPod()); ok && k == key && (only == nil || only(wp.GetPod())) {
			waiting = append(waiting, wp)
		}
	})
	g.round[key]++
	delete(g.waitingSince, key)
	rejected := 0
	for _, wp := range waiting {
		if wp.Reject(Name, msg) {
			rejected++
		}
	}
	return rejected
}
