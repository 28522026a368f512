// Package gang implements the Gang plugin: all-or-nothing scheduling of the pods of a
// scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1).
//
// A member is held back (PreEnqueue) until its PodGroup exists and has minMember members.
// Reserved members wait in Permit until minMember members of the group are reserved or bound,
// then all are allowed at once. When a member cannot be placed, the waiting members of its
// group are rejected at once so their resources are free again; when the reason is that other
// gangs' waiting members hold the resources, the gang of lower precedence yields, so two
// gangs can never hold each other's resources until both time out.
package gang

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	"github.com/hypernode-dev/hypernode-scheduler/apis/config/validation"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// Name is the name of the plugin used in the plugin registry and configurations.
const Name = "Gang"

// Event reasons recorded on PodGroups. Each situation has its own reason: the events API
// folds Events of one object with the same reason into one series that keeps the first note.
const (
	// EventWaitingForMembers: members are held back until minMember of them exist.
	EventWaitingForMembers = "WaitingForMembers"
	// EventGangWaiting: reserved members wait in Permit for the rest of the gang.
	EventGangWaiting = "GangWaiting"
	// EventGangScheduled: minMember members are reserved or bound; the gang binds.
	EventGangScheduled = "GangScheduled"
	// EventGangRejected: the gang's waiting members were rejected and their resources freed.
	EventGangRejected = "GangRejected"
	// EventGangTimedOut: the gang did not complete within its schedule timeout.
	EventGangTimedOut = "GangTimedOut"
	// EventInvalidSubGroupPolicy: the PodGroup's sub-group annotation is unusable.
	EventInvalidSubGroupPolicy = "InvalidSubGroupPolicy"
	eventAction                = "Schedule"
)

// Gang is the plugin.
type Gang struct {
	args       config.GangArgs
	handle     fwk.Handle
	registry   *podgroup.Registry
	conditions *conditionWriter
	events     *podgroup.EventLog

	// mu serialises every decision about a group's waiting members: the quorum check with
	// the Allow of the waiting members (Permit) and their rejection (Unreserve, PostFilter),
	// so a rejection can never interleave with an allowance and bind part of a gang.
	mu sync.Mutex
	// waitingSince is when the first member of a group's current round entered Permit; it
	// tells a timeout from another rejection in Unreserve.
	waitingSince map[podgroup.Key]time.Time
	// round numbers a group's attempts; it advances when a round is rejected. roundOf
	// records the round each reserved member belongs to, so that a late Unreserve of a
	// member of a rejected round does not reject the members of the next one.
	round   map[podgroup.Key]int
	roundOf map[types.UID]int
}

// permitMargin is how close to the round's timeout the last member may complete a gang:
// closer than this, a waiting member's timer may fire while the gang is being allowed, so
// the round is rejected instead (members time out at their own Permit time + timeout, never
// earlier than the round's start + timeout).
const permitMargin = time.Second

var (
	_ fwk.PreEnqueuePlugin  = &Gang{}
	_ fwk.PreFilterPlugin   = &Gang{}
	_ fwk.PostFilterPlugin  = &Gang{}
	_ fwk.ReservePlugin     = &Gang{}
	_ fwk.PermitPlugin      = &Gang{}
	_ fwk.EnqueueExtensions = &Gang{}
	_ fwk.SignPlugin        = &Gang{}
)

// New validates the args and builds the plugin around the scheduler's PodGroup registry.
// Invalid args fail the scheduler's start.
func New(ctx context.Context, obj runtime.Object, handle fwk.Handle, registry *podgroup.Registry) (fwk.Plugin, error) {
	args, ok := obj.(*config.GangArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type GangArgs, got %T", obj)
	}
	if err := validation.ValidateGangArgs(nil, args); err != nil {
		return nil, err
	}
	return newPlugin(ctx, *args, handle, registry), nil
}

// newPlugin builds the plugin around a registry (the process's shared one, or a test's).
func newPlugin(ctx context.Context, args config.GangArgs, handle fwk.Handle, registry *podgroup.Registry) *Gang {
	g := &Gang{
		args:         args,
		handle:       handle,
		registry:     registry,
		conditions:   newConditionWriter(handle.ClientSet(), handle.SharedInformerFactory().Core().V1().Pods().Lister()),
		events:       podgroup.NewEventLog(handle.EventRecorder(), eventAction),
		waitingSince: map[podgroup.Key]time.Time{},
		round:        map[podgroup.Key]int{},
		roundOf:      map[types.UID]int{},
	}
	g.conditions.run(ctx)
	// The registry and kube-scheduler's queue watch the same objects through different
	// informers with no ordering between them: when the registry sees a group become ready,
	// the held-back members are activated so that PreEnqueue looks again.
	registry.OnGroupChange(func(key podgroup.Key) { g.activateIfReady(klog.FromContext(ctx), key) })
	return g
}

// Name returns the name of the plugin.
func (g *Gang) Name() string { return Name }

func (g *Gang) activateIfReady(logger klog.Logger, key podgroup.Key) {
	info := g.registry.Info(key)
	if info.PodGroup == nil || info.Members < info.MinMember() {
		return
	}
	g.activatePending(logger, key)
}

// activatePending moves the group's members that are neither reserved nor bound to the
// active queue, so that a gang is scheduled back to back.
func (g *Gang) activatePending(logger klog.Logger, key podgroup.Key) {
	pending := g.registry.PendingMembers(key)
	if len(pending) == 0 {
		return
	}
	pods := make(map[string]*v1.Pod, len(pending))
	for _, p := range pending {
		pods[p.Namespace+"/"+p.Name] = p
	}
	g.handle.Activate(logger, pods)
}

// PreEnqueue holds a member back until its PodGroup exists and has minMember members.
func (g *Gang) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return nil
	}
	info := g.registry.Info(key)
	var msg string
	switch {
	case info.PodGroup == nil:
		msg = fmt.Sprintf("waiting for PodGroup %s (named by label %s): it does not exist", key, schedulingv1alpha1.PodGroupLabel)
	case info.SubGroupErr != nil:
		msg = fmt.Sprintf("PodGroup %s: %v", key, info.SubGroupErr)
		g.events.Record(info.PodGroup, v1.EventTypeWarning, EventInvalidSubGroupPolicy, msg)
	case info.Members < info.MinMember():
		// The pod's condition says what it waits for without a count: a count would go stale
		// as siblings arrive, and rewriting every waiting member's condition on every arrival
		// costs O(members^2) API calls. The Event on the PodGroup carries the count.
		msg = fmt.Sprintf("waiting for PodGroup %s to have %d members (minMember)", key, info.MinMember())
		g.events.Record(info.PodGroup, v1.EventTypeNormal, EventWaitingForMembers,
			fmt.Sprintf("waiting for the members of PodGroup %s: %d of %d (minMember) exist", key, info.Members, info.MinMember()))
	default:
		g.conditions.clear(pod)
		return nil
	}
	g.conditions.set(pod, msg)
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

// PreFilter refuses members of a group whose minResources exceed what the whole cluster can
// allocate: no placement can ever work until nodes are added.
func (g *Gang) PreFilter(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	info := g.registry.Info(key)
	if info.PodGroup == nil || len(info.PodGroup.Spec.MinResources) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if short := shortfall(info.PodGroup.Spec.MinResources, g.registry.ClusterAllocatable()); short != "" {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("PodGroup %s needs minResources the whole cluster cannot allocate: %s", key, short))
	}
	return nil, fwk.NewStatus(fwk.Skip)
}

// shortfall describes the resources of want that exceed have, or "".
func shortfall(want, have v1.ResourceList) string {
	var parts []string
	for name, q := range want {
		h := have[name]
		if q.Cmp(h) > 0 {
			parts = append(parts, fmt.Sprintf("%s %s (cluster allocatable %s)", name, q.String(), quantityString(h)))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func quantityString(q resource.Quantity) string {
	if q.IsZero() {
		return "0"
	}
	return q.String()
}

// PreFilterExtensions returns nil: the plugin keeps no per-node state.
func (g *Gang) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// SignPod lets members of one group with the same shape share scheduling results: the only
// per-pod input of PreFilter is the group.
func (g *Gang) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	key, _ := podgroup.KeyOf(pod)
	return []fwk.SignFragment{{Key: "hypernode.dev/gang.PodGroup", Value: key.String()}}, nil
}

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
	info := g.registry.Info(key)
	if yielded := g.makeRoom(ctx, state, pod, key, info, statuses); len(yielded) > 0 {
		g.activatePending(logger, key)
		msg := fmt.Sprintf("gang %s: waiting members of lower-precedence gang(s) %s were rejected to make room; retrying", key, strings.Join(yielded, ", "))
		logger.V(3).Info("Lower-precedence gangs yielded", "pod", klog.KObj(pod), "podGroup", key, "yielded", yielded)
		return nil, fwk.NewStatus(fwk.Unschedulable, msg)
	}
	why := fmt.Sprintf("member %s cannot be placed", pod.Name)
	if reasons := g.failureReasons(statuses); reasons != "" {
		why += " (" + reasons + ")"
	}
	only, subGroup := g.rejectionScope(key, info, pod)
	if subGroup != "" {
		why = fmt.Sprintf("sub-group %s: %s", subGroup, why)
	}
	g.mu.Lock()
	rejected := g.rejectRoundLocked(key, fmt.Sprintf("gang %s rejected: %s", key, why), only)
	g.mu.Unlock()
	if info.PodGroup != nil {
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
	reasons := make([]string, 0, len(counts))
	for r := range counts {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if counts[reasons[i]] != counts[reasons[j]] {
			return counts[reasons[i]] > counts[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	const shown = 3
	parts := make([]string, 0, shown)
	for _, r := range reasons[:min(shown, len(reasons))] {
		parts = append(parts, fmt.Sprintf("%d %s", counts[r], r))
	}
	return strings.Join(parts, ", ")
}

// rank orders gangs: higher pod priority first, then the older PodGroup, then by name.
type rank struct {
	priority int32
	created  metav1.Time
	key      string
}

func (r rank) before(o rank) bool {
	if r.priority != o.priority {
		return r.priority > o.priority
	}
	if !r.created.Equal(&o.created) {
		return r.created.Before(&o.created)
	}
	return r.key < o.key
}

func (g *Gang) rankOf(pod *v1.Pod, key podgroup.Key, pg *schedulingv1alpha1.PodGroup) rank {
	r := rank{key: key.String()}
	if pod.Spec.Priority != nil {
		r.priority = *pod.Spec.Priority
	}
	if pg != nil {
		r.created = pg.CreationTimestamp
	}
	return r
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
	mine := g.rankOf(pod, key, info.PodGroup)
	// Waiting members of lower-precedence gangs, by node.
	byNode := map[string][]*v1.Pod{}
	victimGroups := map[podgroup.Key]bool{}
	g.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		p := wp.GetPod()
		k, ok := podgroup.KeyOf(p)
		if !ok || k == key || !candidates[p.Spec.NodeName] {
			return
		}
		if other := g.rankOf(p, k, g.registry.Info(k).PodGroup); mine.before(other) {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		}
	})
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
		g.mu.Lock()
		n := g.rejectRoundLocked(k, fmt.Sprintf("gang %s rejected: it yields its reserved resources to gang %s, which takes precedence", k, key), nil)
		g.mu.Unlock()
		if pg := g.registry.Info(k).PodGroup; pg != nil {
			g.events.Record(pg, v1.EventTypeWarning, EventGangRejected,
				fmt.Sprintf("gang %s: yielded to gang %s, which takes precedence (priority, then age); %d waiting members rejected", k, key, n))
		}
		yielded = append(yielded, k.String())
	}
	sort.Strings(yielded)
	return yielded
}

// EventsToRegister returns the events that can make a rejected or held-back member
// schedulable, each with a hint that requeues only the members it concerns.
func (g *Gang) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		// A new member can complete the group's member count.
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add}, QueueingHintFn: g.isSchedulableAfterMemberAdded},
		// The PodGroup appearing or changing (minMember, timeout, minResources).
		{Event: fwk.ClusterEvent{Resource: podgroup.EventResource, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: g.isSchedulableAfterPodGroupChange},
		// Freed or added capacity can let a rejected gang complete.
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: g.isSchedulableAfterCapacityChange},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint}, QueueingHintFn: g.isSchedulableAfterCapacityChange},
	}, nil
}

func (g *Gang) isSchedulableAfterMemberAdded(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	_, added, err := util.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	mine, ok := podgroup.KeyOf(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	if theirs, ok := podgroup.KeyOf(added); ok && theirs == mine {
		logger.V(5).Info("A member of the gang was added", "pod", klog.KObj(pod), "added", klog.KObj(added))
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

func (g *Gang) isSchedulableAfterPodGroupChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	mine, ok := podgroup.KeyOf(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	namespace, name, err := objectName(newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if (podgroup.Key{Namespace: namespace, Name: name}) == mine {
		logger.V(5).Info("The gang's PodGroup changed", "pod", klog.KObj(pod), "podGroup", mine)
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// objectName reads the namespace and name of a PodGroup event object, which kube-scheduler's
// dynamic informer delivers as unstructured.
func objectName(obj any) (string, string, error) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return o.GetNamespace(), o.GetName(), nil
	case *schedulingv1alpha1.PodGroup:
		return o.Namespace, o.Name, nil
	case metav1.Object:
		return o.GetNamespace(), o.GetName(), nil
	}
	return "", "", fmt.Errorf("unexpected PodGroup event object %T", obj)
}

func (g *Gang) isSchedulableAfterCapacityChange(_ klog.Logger, pod *v1.Pod, _, _ any) (fwk.QueueingHint, error) {
	if _, ok := podgroup.KeyOf(pod); !ok {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}
