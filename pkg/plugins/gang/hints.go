package gang

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/composition"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// EventsToRegister returns the events that can make a rejected or held-back member
// schedulable, each with a hint that requeues only the members it concerns: a held-back gang
// when it becomes ready, a rejected gang once per event that can make room (one member, whose
// Permit then activates the others).
func (g *Gang) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	if err := composition.Check(g.handle); err != nil {
		return nil, err // an unsafe profile: the scheduler does not start
	}
	return []fwk.ClusterEventWithHint{
		// A new member can complete the group's member count.
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add}, QueueingHintFn: g.isSchedulableAfterMemberAdded},
		// A pending pod's own labels: its gang, its sub-group.
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.UpdatePodLabel}, QueueingHintFn: g.isSchedulableAfterLabelChange},
		// The PodGroup appearing or changing (minMember, timeout, minResources).
		{Event: fwk.ClusterEvent{Resource: podgroup.EventResource, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: g.isSchedulableAfterPodGroupChange},
		// Freed or added capacity can let a rejected gang complete.
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: g.isSchedulableAfterPodDeleted},
		// A running pod resized down (a gang waiting for room is refused by Gang alone, so only
		// Gang's events requeue it).
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.UpdatePodScaleDown}, QueueingHintFn: g.isSchedulableAfterPodScaledDown},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint | fwk.UpdateNodeDeclaredFeature}, QueueingHintFn: g.isSchedulableAfterNodeChange},
		// A claim the members share was allocated (sharedclaims.go).
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: g.isSchedulableAfterClaimAllocated},
	}, nil
}

// isSchedulableAfterMemberAdded: a held-back gang whose new member brings it to minMember.
func (g *Gang) isSchedulableAfterMemberAdded(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	_, added, err := util.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	mine, ok := podgroup.KeyOf(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	if theirs, ok := podgroup.KeyOf(added); !ok || theirs != mine {
		return fwk.QueueSkip, nil
	}
	// Below minMember the member would be held back again; above it, the gang was ready
	// before (each further member would requeue every rejected one: O(added x rejected)
	// cycles as an elastic gang grows, and the new member's own Permit brings the others).
	// The registry may not have seen the new member yet: when it does and that makes the
	// gang ready, it activates the members itself.
	info := g.registry.Info(mine)
	if gangstate.GateReason(info, pod) != "" || info.Members != info.MinMember() {
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("A member completed the gang", "pod", klog.KObj(pod), "added", klog.KObj(added))
	return fwk.Queue, nil
}

// isSchedulableAfterLabelChange: the pending pod's own labels changed, which can make it a
// member of another gang or fix its sub-group membership (PreEnqueue decides again).
func (g *Gang) isSchedulableAfterLabelChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	_, updated, err := util.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if updated.UID != pod.UID {
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("A pending member's labels changed", "pod", klog.KObj(pod))
	return fwk.Queue, nil
}

// isSchedulableAfterPodGroupChange: the gang's own PodGroup appeared, or changed what
// scheduling reads (not a status update).
func (g *Gang) isSchedulableAfterPodGroupChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	mine, ok := podgroup.KeyOf(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	namespace, name, err := objectName(newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if (podgroup.Key{Namespace: namespace, Name: name}) != mine {
		return fwk.QueueSkip, nil
	}
	if oldObj != nil && !podgroup.SchedulingChanged(oldObj, newObj) {
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("The gang's PodGroup changed", "pod", klog.KObj(pod), "podGroup", mine)
	return fwk.Queue, nil
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

// isSchedulableAfterPodDeleted: room freed by a pod of another gang (kube-scheduler reports
// each of the gang's own rejected reservations as a deletion: those do not help it).
func (g *Gang) isSchedulableAfterPodDeleted(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	deleted, _, err := util.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if mine, ok := podgroup.KeyOf(pod); ok {
		if theirs, ok := podgroup.KeyOf(deleted); ok && theirs == mine {
			return fwk.QueueSkip, nil
		}
	}
	return g.isSchedulableAfterCapacityChange(logger, pod)
}

func (g *Gang) isSchedulableAfterPodScaledDown(logger klog.Logger, pod *v1.Pod, _, _ any) (fwk.QueueingHint, error) {
	return g.isSchedulableAfterCapacityChange(logger, pod)
}

func (g *Gang) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, _, _ any) (fwk.QueueingHint, error) {
	return g.isSchedulableAfterCapacityChange(logger, pod)
}

// isSchedulableAfterCapacityChange requeues one member of a ready, unblocked gang per event (a
// held-back gang waits for members, not room).
func (g *Gang) isSchedulableAfterCapacityChange(logger klog.Logger, pod *v1.Pod) (fwk.QueueingHint, error) {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	info := g.registry.Info(key)
	if gangstate.GateReason(info, pod) != "" {
		// PreEnqueue would hold it back again: it must not take the gang's requeue claim.
		return fwk.QueueSkip, nil
	}
	// A blocked gang waits for its blocker, which kube-scheduler's own hints retry; when it
	// fits, its Permit brings the others.
	if g.gangs.Blocker(key) != nil {
		return fwk.QueueSkip, nil
	}
	if g.gangs.Held(pod) || !g.gangs.ClaimRequeue(key, pod.UID, time.Now()) {
		// A held member (on its way to GangRetryGate) leaves the event to the retried one.
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("Gang requeued for room", "pod", klog.KObj(pod), "podGroup", key)
	return fwk.Queue, nil
}
