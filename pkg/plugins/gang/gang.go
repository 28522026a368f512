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
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	"github.com/hypernode-dev/hypernode-scheduler/apis/config/validation"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/eventlog"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/names"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// Name is the name of the plugin used in the plugin registry and configurations.
const Name = names.Gang

// Event reasons recorded on PodGroups. Each situation has its own reason: the events API
// folds Events of one object with the same reason into one series that keeps the first note.
const (
	// EventWaitingForMembers: members are held back until minMember of them exist.
	EventWaitingForMembers = "WaitingForMembers"
	// EventWaitingForResourceClaims: members are held back until every pending member's
	// ResourceClaims from templates exist.
	EventWaitingForResourceClaims = "WaitingForResourceClaims"
	// EventGangWaiting: reserved members wait in Permit for the rest of the gang.
	EventGangWaiting = "GangWaiting"
	// EventGangScheduled: minMember members are reserved or bound; the gang binds.
	EventGangScheduled = "GangScheduled"
	// EventGangRejected: the gang's waiting members were rejected and their resources freed.
	EventGangRejected = "GangRejected"
	// EventGangTimedOut: the gang did not complete within its schedule timeout.
	EventGangTimedOut = "GangTimedOut"
	// EventGangDeadlineDeferred: the timeout passed while pods evicted for the gang
	// terminate; the members waiting in Permit keep their nodes.
	EventGangDeadlineDeferred = "GangDeadlineDeferred"
	// EventInvalidSubGroupMember: a member matches a sub-group policy but lacks its keys.
	EventInvalidSubGroupMember = "InvalidSubGroupMember"
	// EventInvalidSubGroupPolicy: the PodGroup's sub-group annotation is unusable.
	EventInvalidSubGroupPolicy = "InvalidSubGroupPolicy"
	// EventInvalidHoldAnnotation: the PodGroup's hold-after annotation is unusable.
	EventInvalidHoldAnnotation = "InvalidHoldAnnotation"
	// EventInTwoPodGroups: a member also names a native pod group (spec.schedulingGroup).
	EventInTwoPodGroups = "InTwoPodGroups"
	// EventSharedClaimUnallocated: members share a ResourceClaim that is not allocated,
	// which a gang cannot wait for (sharedclaims.go).
	EventSharedClaimUnallocated = "SharedClaimUnallocated"
	eventAction                 = "Schedule"
)

// Gang is the plugin.
type Gang struct {
	args       config.GangArgs
	handle     fwk.Handle
	registry   *podgroup.Registry
	gangs      *gangstate.Tracker
	conditions *conditionWriter
	events     *eventlog.Log

	// Every decision about a gang's reserved members (Reserve, the quorum check with the
	// Allow of the waiting members, their rejection, the PreBind barrier) is taken under the
	// gang state's lock, on its rounds and batches (gangstate.Round, gangstate.Batch), so a
	// rejection can never interleave with an allowance and bind part of a gang.
	// fingerprints is the nodes' fingerprints a gang waiting for room compares (unplaced.go).
	fingerprints nodeFingerprints
	// binds bounds the allowed members binding at once (binding.go).
	binds *bindSlots
	// clock runs the rounds' deadlines (a fake one in tests).
	clock clock.WithDelayedExecution
	// ctx is the scheduler's lifetime, for the work a round's rejection leaves behind;
	// rejecters counts that work in flight (rejectWhenWaiting), so that tests can wait for it.
	ctx       context.Context
	rejecters sync.WaitGroup
	// startup holds members met before the registry synced (startup.go).
	startup *startupGate
}

var (
	_ fwk.PreEnqueuePlugin  = &Gang{}
	_ fwk.PreFilterPlugin   = &Gang{}
	_ fwk.PostFilterPlugin  = &Gang{}
	_ fwk.ReservePlugin     = &Gang{}
	_ fwk.PermitPlugin      = &Gang{}
	_ fwk.PreBindPlugin     = &Gang{}
	_ fwk.PostBindPlugin    = &Gang{}
	_ fwk.EnqueueExtensions = &Gang{}
	_ fwk.SignPlugin        = &Gang{}
)

// New validates the args and builds the plugin around the scheduler's gang state (and its
// PodGroup registry). Invalid args fail the scheduler's start.
func New(ctx context.Context, obj runtime.Object, handle fwk.Handle, gangs *gangstate.Tracker) (fwk.Plugin, error) {
	args, ok := obj.(*config.GangArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type GangArgs, got %T", obj)
	}
	if err := validation.ValidateGangArgs(nil, args); err != nil {
		return nil, err
	}
	// Every profile's Gang sets the holds' policy: profiles that disagree fail the start.
	if err := gangs.SetHoldPolicy(holdPolicy(args.Hold)); err != nil {
		return nil, err
	}
	return newPlugin(ctx, *args, handle, gangs), nil
}

// holdPolicy is the gang state's policy of holds from the args.
func holdPolicy(args config.GangHoldArgs) gangstate.HoldPolicy {
	return gangstate.HoldPolicy{Wait: time.Duration(args.WaitSeconds) * time.Second,
		Timeout: time.Duration(args.TimeoutSeconds) * time.Second, MaxNodesPercent: args.MaxNodesPercent}
}

// newPlugin builds the plugin around a gang state (the process's shared one, or a test's).
func newPlugin(ctx context.Context, args config.GangArgs, handle fwk.Handle, gangs *gangstate.Tracker) *Gang {
	registry := gangs.Registry()
	g := &Gang{
		args:       args,
		handle:     handle,
		registry:   registry,
		gangs:      gangs,
		conditions: newConditionWriter(handle.ClientSet(), handle.SharedInformerFactory().Core().V1().Pods().Lister()),
		events:     eventlog.New(handle.EventRecorder(), eventAction),
		binds:      newBindSlots(maxConcurrentBinds),
		clock:      clock.RealClock{},
		ctx:        ctx,
	}
	g.conditions.Run(ctx)
	g.watchStartup(ctx, registry.HasSynced, maxStartupWait)
	go func() {
		// Rounds' deadlines must not outlive the scheduler.
		<-ctx.Done()
		gangs.Lock()
		gangs.EachRoundLocked(func(_ podgroup.Key, r *gangstate.Round) { r.Stop() })
		gangs.Unlock()
	}()
	// The registry and kube-scheduler's queue watch the same objects through different
	// informers with no ordering between them: when the registry sees a group become ready,
	// or its PodGroup appear or change, the held-back members are activated so that PreEnqueue
	// looks again.
	registry.OnGroupChange(func(key podgroup.Key, podGroupChanged bool) {
		g.activateOnChange(klog.FromContext(ctx), key, podGroupChanged)
	})
	// A gang waiting for room after a failed round is retried through its scout (gangstate.Unplaced).
	gangs.OnScoutWake(func(_ podgroup.Key, scout *v1.Pod) { gangstate.Activate(klog.FromContext(ctx), handle, scout) })
	registry.OnGroupDelete(g.forget)
	gangs.OnPreemptionEnd(func(key podgroup.Key) { g.preemptionEnded(klog.FromContext(ctx), key) })
	return g
}

// Name returns the name of the plugin.
func (g *Gang) Name() string { return Name }

// activateOnChange runs PreEnqueue again for the held-back members of a group that became
// ready. A change of the PodGroup itself re-runs it even below minMember: the members' gate
// message (the PodGroup "does not exist", a sub-group policy error) may be stale, since the
// queue's own PodGroup event can arrive before the registry has seen the PodGroup. It also
// decides the gang's waiting round again.
func (g *Gang) activateOnChange(logger klog.Logger, key podgroup.Key, podGroupChanged bool) {
	if podGroupChanged {
		g.decideAgain(logger, key)
	}
	info := g.registry.Info(key)
	if info.PodGroup == nil || (info.Members < info.MinMember() && !podGroupChanged) {
		return
	}
	g.activatePending(logger, key)
}

// activatePending moves the group's members that are neither reserved nor bound to the
// active queue, so that a gang is scheduled back to back.
func (g *Gang) activatePending(logger klog.Logger, key podgroup.Key) {
	g.gangs.ActivatePending(logger, g.handle, key)
}

// PreEnqueue holds a member back until its PodGroup exists and has minMember members, and
// every pending member's ResourceClaims from templates exist.
func (g *Gang) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return nil
	}
	if g.startup.hold(pod) {
		// No condition, no Event: the registry's answer may be stale for a moment.
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, startupMessage)
	}
	info := g.registry.Info(key)
	var msg string
	switch gangstate.GateReason(info, pod) {
	case gangstate.GatedInTwoPodGroups:
		msg = inTwoPodGroups(key, pod)
		if info.PodGroup != nil {
			g.events.Record(info.PodGroup, v1.EventTypeWarning, EventInTwoPodGroups, msg)
		}
	case gangstate.GatedPodGroupMissing:
		msg = fmt.Sprintf("waiting for PodGroup %s (named by label %s): it does not exist", key, schedulingv1alpha1.PodGroupLabel)
	case gangstate.GatedInvalidSubGroupPolicy:
		msg = fmt.Sprintf("PodGroup %s: %v", key, info.SubGroupErr)
		g.events.Record(info.PodGroup, v1.EventTypeWarning, EventInvalidSubGroupPolicy, msg)
	case gangstate.GatedInvalidSubGroupMember:
		msg = fmt.Sprintf("PodGroup %s: member %s: %s", key, pod.Name, podgroup.SubGroupMembershipProblem(info.SubGroupPolicies, pod))
		g.events.Record(info.PodGroup, v1.EventTypeWarning, EventInvalidSubGroupMember, msg)
	case gangstate.GatedInvalidHoldAnnotation:
		msg = fmt.Sprintf("PodGroup %s: %v", key, info.HoldErr)
		g.events.Record(info.PodGroup, v1.EventTypeWarning, EventInvalidHoldAnnotation, msg)
	case gangstate.GatedWaitingForMembers:
		// The pod's condition says what it waits for without a count: a count would go stale
		// as siblings arrive, and rewriting every waiting member's condition on every arrival
		// costs O(members^2) API calls. The Event on the PodGroup carries the count.
		msg = fmt.Sprintf("waiting for PodGroup %s to have %d members (minMember)", key, info.MinMember())
		g.events.Record(info.PodGroup, v1.EventTypeNormal, EventWaitingForMembers,
			fmt.Sprintf("waiting for the members of PodGroup %s: %d of %d (minMember) exist", key, info.Members, info.MinMember()))
	case gangstate.GatedWaitingForClaims:
		msg = fmt.Sprintf("waiting for the ResourceClaims that members of PodGroup %s request through ResourceClaimTemplates to be created: the gang is planned with every member's devices", key)
		g.events.Record(info.PodGroup, v1.EventTypeNormal, EventWaitingForResourceClaims,
			fmt.Sprintf("waiting for the ResourceClaims of PodGroup %s's members: %d pending members have claims from ResourceClaimTemplates not created yet", key, info.AwaitingClaims))
	default:
		g.conditions.clear(pod)
		return nil
	}
	g.conditions.set(pod, msg)
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

// inTwoPodGroups says why a pod in a PodGroup by label and in a native pod group is refused.
func inTwoPodGroups(key podgroup.Key, pod *v1.Pod) string {
	native := ""
	if sg := pod.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
		native = *sg.PodGroupName
	}
	return fmt.Sprintf("pod %s is in PodGroup %s (label %s) and in the native pod group %q (spec.schedulingGroup): a pod is scheduled with one gang; remove the label or the schedulingGroup",
		pod.Name, key, schedulingv1alpha1.PodGroupLabel, native)
}

// SignPod lets members of one group with the same shape share scheduling results: the only
// per-pod input of PreFilter is the group.
func (g *Gang) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	key, _ := podgroup.KeyOf(pod)
	return []fwk.SignFragment{{Key: "hypernode.dev/gang.PodGroup", Value: key.String()}}, nil
}

// forget drops what the plugin keeps for a gang whose PodGroup was deleted; its waiting
// members are rejected (nothing can complete them now).
func (g *Gang) forget(key podgroup.Key) {
	g.gangs.Lock()
	g.rejectRoundLocked(key, fmt.Sprintf("PodGroup %s was deleted", key), nil)
	g.gangs.ForgetRoundsLocked(key)
	g.gangs.Unlock()
	g.events.Forget(key)
}
