package gang

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/names"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// PostFilter runs when a member fits nowhere. If other gangs' waiting members, of lower
// precedence, hold resources without which the member would fit, those gangs yield: their
// waiting members are rejected. Otherwise this gang cannot complete now, and its own waiting
// members are rejected so that their resources serve others.
func (g *Gang) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	logger := klog.FromContext(ctx)
	if heldBehindBlocker.In(state) {
		// Refused in PreFilter behind the gang's blocker: not a failure of its own, so no
		// rejection and no Event for each member held this way.
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s: this member waits for the member that blocks the gang", key))
	}
	if gangstate.HeldForRoom(state) {
		// Refused in PreFilter for the gang's remembered failure: the attempt that failed
		// rejected the round and reported it.
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s: this member waits for room to be freed", key))
	}
	if gangstate.Yielded(state) {
		// NetworkTopologyAware planned the gang into room lower gangs are giving back: not a
		// failure of the gang, whose waiting members keep their places.
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s: planned into room that lower-precedence gangs are releasing; retrying", key))
	}
	// One read: the member counts and the sub-group counts must agree (see MemberView).
	view := g.registry.MemberView(key, pod)
	info := view.Info
	if !view.InSub && info.PodGroup != nil && gangstate.JobComplete(info, view.Progress) {
		// An extra member of a gang that runs already: nobody waits for it, nobody yields or
		// is released for it.
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf(
			"gang %s: this member cannot be placed; the gang has its minMember %d members placed and runs without it", key, info.MinMember()))
	}
	if yielded := g.makeRoom(ctx, state, pod, key, info, statuses); len(yielded) > 0 {
		g.activatePending(logger, key)
		msg := fmt.Sprintf("gang %s: waiting members of lower-precedence gang(s) %s were rejected to make room; retrying", key, strings.Join(yielded, ", "))
		logger.V(3).Info("Lower-precedence gangs yielded", "pod", klog.KObj(pod), "podGroup", key, "yielded", yielded)
		return nil, fwk.NewStatus(fwk.Unschedulable, msg)
	}
	reasons := g.failureReasons(statuses)
	why := fmt.Sprintf("member %s cannot be placed", pod.Name)
	if reasons != "" {
		why += " (" + reasons + ")"
	}
	// A blocked gang cannot complete without this member (and its siblings of its shape):
	// nothing is worth keeping, whatever the member counts say.
	blocked := g.fitsNowhere(statuses) && g.block(logger, key, info, pod, reasons)
	only, subGroup := rejectionScope(view)
	if blocked {
		only, subGroup = nil, ""
	}
	if subGroup != "" {
		why = fmt.Sprintf("sub-group %s: %s", subGroup, why)
	}
	g.gangs.Lock()
	if only == nil && !blocked && !neededSubGroupShort(view) && g.othersCanCompleteLocked(key, info, pod) {
		g.gangs.Unlock()
		logger.V(3).Info("Gang member cannot be placed; the others can still make minMember", "pod", klog.KObj(pod), "podGroup", key, "minMember", info.MinMember())
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf(
			"gang %s: this member cannot be placed now; the other members can still make minMember %d, so they keep their places", key, info.MinMember()))
	}
	var released []*v1.Pod
	if r := g.gangs.RoundLocked(key); r != nil && only == nil {
		for _, m := range r.Members {
			released = append(released, m)
		}
	}
	rejected := g.rejectRoundLocked(key, fmt.Sprintf("gang %s rejected: %s", key, why), only)
	g.gangs.Unlock()
	if len(released) > 0 && !blocked && info.PodGroup != nil && !info.PlacedByTopology() && !gangstate.Deferred(state) {
		// The released reservations would requeue this member into the room they free: until
		// there is more room than now, the gang is retried through it alone
		// (gangstate.Unplaced). A gang that reserved nothing spins on nothing: its members are
		// tried as they come (an elastic gang's others may fit without this one).
		last := why
		if verdict := gangstate.PreemptionVerdict(state); verdict != "" {
			last += "; " + verdict
		}
		if g.gangs.MarkUnplaced(key, pod.UID, last, time.Now(), g.freeRoom(requested(pod), released), g.nodeChangesAtStart(state)) {
			// A node changed during this cycle, maybe after its snapshot: the member comes
			// back for another look (it is in flight: kube-scheduler requeues it on return).
			gangstate.Activate(logger, g.handle, pod)
		}
	}
	// A member its gang's plan left out for lack of room fails here by design, each of them
	// in every cycle: an Event only when its failure released somebody.
	if info.PodGroup != nil && (rejected > 0 || !gangstate.Deferred(state)) {
		g.events.Record(info.PodGroup, v1.EventTypeWarning, EventGangRejected,
			fmt.Sprintf("gang %s: %s; %d waiting members rejected and their resources released", key, why, rejected))
	}
	// The pod's own condition already carries the Filter reasons (kube-scheduler puts them
	// before this message) and names the pod, so the status only adds what the gang did; the
	// Event and the waiting siblings get the full story above.
	msg := fmt.Sprintf("gang %s: this member cannot be placed, so no member binds", key)
	if subGroup != "" {
		msg = fmt.Sprintf("gang %s: sub-group %s: this member cannot be placed, so no member of the sub-group binds", key, subGroup)
	}
	if rejected > 0 {
		msg += fmt.Sprintf("; %d waiting members released", rejected)
	}
	return nil, fwk.NewStatus(fwk.Unschedulable, msg)
}

// othersCanCompleteLocked records pod as failed in its gang's open round and reports whether
// the members that have not failed in it can still make minMember: an elastic gang (more
// members than minMember) then keeps its waiting members when an extra one finds no room.
// The round's deadline still bounds the wait. The gangs' lock must be held.
func (g *Gang) othersCanCompleteLocked(key podgroup.Key, info podgroup.Info, pod *v1.Pod) bool {
	r := g.gangs.RoundLocked(key)
	if r == nil || info.Members <= info.MinMember() {
		return false
	}
	if r.Failed == nil {
		r.Failed = sets.New[types.UID]()
	}
	r.Failed.Insert(pod.UID)
	// Only members still pending count as failed: one that failed and then reserved does
	// not, nor one that was deleted (Members no longer counts it).
	failed := 0
	pending := g.registry.PendingMembersLocked(key)
	for _, m := range pending {
		if r.Failed.Has(m.UID) {
			failed++
		}
	}
	if !r.Failed.Has(pod.UID) || !slices.ContainsFunc(pending, func(m *v1.Pod) bool { return m.UID == pod.UID }) {
		failed++ // the failing member itself, if the registry does not list it as pending
	}
	return info.Members-failed >= info.MinMember()
}

// neededSubGroupShort reports whether the member's sub-group, which the job cannot do
// without (the failure's scope is the whole job), has no member to spare for it: the others
// cannot complete the job then, however many members it has.
func neededSubGroupShort(view podgroup.MemberView) bool {
	if !view.InSub {
		return false
	}
	policy, _ := view.Info.Policy(view.Sub.Policy)
	for _, s := range view.States {
		if s.ID == view.Sub.ID {
			return s.Members-1 < int(policy.SubGroupSize)
		}
	}
	return true
}

// failureReasons summarises why the member fit no node, the way kube-scheduler's own message
// does: the most frequent node statuses first, e.g. "3 Insufficient cpu, 1 node(s) had
// untolerated taint(s)". O(nodes), on the failure path only.
func (g *Gang) failureReasons(statuses fwk.NodeToStatusReader) string {
	nodes, err := g.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return ""
	}
	counts := map[string]int{}
	for _, ni := range nodes {
		st := statuses.Get(ni.Node().Name)
		if st == nil || st.IsSuccess() {
			continue
		}
		for _, r := range st.Reasons() {
			counts[r]++
		}
	}
	return gangstate.SummarizeReasons(counts, 3)
}

// makeRoom rejects the waiting members of lower-precedence gangs when, without them, the pod
// would fit on one of their nodes. It returns the gangs that yielded. It only considers nodes
// where the pod failed Filter with a resolvable status: a pod refused by a PreFilter plugin
// (its gang cannot fit its topology, its minResources exceed the cluster) or by a node's
// unresolvable property must not evict anybody.
func (g *Gang) makeRoom(ctx context.Context, state fwk.CycleState, pod *v1.Pod, key podgroup.Key, info podgroup.Info, statuses fwk.NodeToStatusReader) []string {
	resolvable, err := statuses.NodesForStatusCode(g.handle.SnapshotSharedLister().NodeInfos(), fwk.Unschedulable)
	if err != nil || len(resolvable) == 0 {
		return nil
	}
	candidates := make(map[string]bool, len(resolvable))
	for _, ni := range resolvable {
		candidates[ni.Node().Name] = true
	}
	mine := podgroup.PrecedenceOf(pod, key, info.PodGroup)
	// Waiting members of lower-precedence gangs, by node.
	byNode := map[string][]*v1.Pod{}
	victimGroups := map[podgroup.Key]bool{}
	// Collected first, judged after: the walk holds the waiting pods' lock, which the
	// binding goroutines take while they hold the gangs' lock.
	var waiting []*v1.Pod
	g.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if p := wp.GetPod(); candidates[p.Spec.NodeName] {
			waiting = append(waiting, p)
		}
	})
	for _, p := range waiting {
		k, ok := podgroup.KeyOf(p)
		if !ok || k == key {
			continue
		}
		if other := podgroup.PrecedenceOf(p, k, g.registry.Info(k).PodGroup); mine.Before(other) {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		}
	}
	if len(byNode) == 0 {
		return nil
	}
	logger := klog.FromContext(ctx)
	fits := false
	for node, victims := range byNode {
		nodeInfo, err := g.handle.SnapshotSharedLister().NodeInfos().Get(node)
		if err != nil {
			continue
		}
		trial := nodeInfo.Snapshot()
		trialState := state.Clone()
		for _, v := range victims {
			pi, err := framework.NewPodInfo(v)
			if err != nil {
				continue
			}
			if err := trial.RemovePod(logger, v); err != nil {
				continue
			}
			if s := g.handle.RunPreFilterExtensionRemovePod(ctx, trialState, pod, pi, trial); !s.IsSuccess() {
				continue
			}
		}
		if g.handle.RunFilterPluginsWithNominatedPods(ctx, trialState, pod, trial).IsSuccess() {
			fits = true
			for _, v := range victims {
				k, _ := podgroup.KeyOf(v)
				victimGroups[k] = true
			}
			break
		}
	}
	if !fits {
		return nil
	}
	var yielded []string
	for k := range victimGroups {
		g.gangs.Lock()
		n := g.rejectRoundLocked(k, fmt.Sprintf("gang %s rejected: it yields its reserved resources to gang %s, which takes precedence", k, key), nil)
		g.gangs.Unlock()
		if pg := g.registry.Info(k).PodGroup; pg != nil {
			g.events.Record(pg, v1.EventTypeWarning, EventGangRejected,
				fmt.Sprintf("gang %s: yielded to gang %s, which takes precedence (priority, then age); %d waiting members rejected", k, key, n))
		}
		yielded = append(yielded, k.String())
	}
	sort.Strings(yielded)
	return yielded
}

// fitsNowhere reports whether the member was tried on every node of the cluster and refused
// on each for a reason no other pod's departure can fix, by plugins other than the gang's own
// (whose refusals depend on the gang, not on the member).
func (g *Gang) fitsNowhere(statuses fwk.NodeToStatusReader) bool {
	nodes, err := g.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil || len(nodes) == 0 {
		return false
	}
	for _, ni := range nodes {
		st := statuses.Get(ni.Node().Name)
		if st == nil || !gangstate.RefusedForGood(st) {
			return false
		}
		// No plugin: the node was left out by a PreFilter result (a plan), not tried.
		if p := st.Plugin(); p == "" || p == Name || p == names.NetworkTopologyAware {
			return false
		}
	}
	return true
}

// block records that the member fits no node, so that the gang's other members wait for it
// instead of reserving and being rejected again and again, and reports it once. It returns
// whether the gang is blocked: the job cannot do without the members known to fit nowhere.
func (g *Gang) block(logger klog.Logger, key podgroup.Key, info podgroup.Info, pod *v1.Pod, reasons string) bool {
	b := gangstate.Blocker{UID: pod.UID, Name: pod.Name, Reason: reasons}
	blocked, reported := g.gangs.SetBlocked(key, b)
	if !reported || info.PodGroup == nil {
		return blocked
	}
	g.events.Record(info.PodGroup, v1.EventTypeWarning, gangstate.EventGangBlocked, b.Message(key))
	logger.V(2).Info("Gang blocked by a member that fits no node", "podGroup", key, "pod", klog.KObj(pod), "reason", reasons)
	return blocked
}
