package networktopology

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/composition"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// EventsToRegister returns the events that can make a member that failed here schedulable.
// Each hint requeues a gang only when the event can change its answer, and then only one of
// its members (registry.ClaimRequeue): a gang is retried once per event, not once per member.
func (p *NetworkTopologyAware) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	if err := composition.Check(p.handle); err != nil {
		return nil, err // an unsafe profile: the scheduler does not start
	}
	return append([]fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint | fwk.UpdateNodeDeclaredFeature}, QueueingHintFn: p.isSchedulableAfterNodeChange},
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: p.isSchedulableAfterPodDeleted},
		{Event: fwk.ClusterEvent{Resource: hypernode.EventResource, ActionType: fwk.All}, QueueingHintFn: p.isSchedulableAfterHyperNodeChange},
		{Event: fwk.ClusterEvent{Resource: podgroup.EventResource, ActionType: fwk.Update | fwk.Delete}, QueueingHintFn: p.isSchedulableAfterPodGroupChange},
	}, p.deviceEvents()...), nil
}

// requeue queues the pod if it is the one member its gang requeues for this change.
func (p *NetworkTopologyAware) requeue(logger klog.Logger, pod *v1.Pod, key podgroup.Key, why string) fwk.QueueingHint {
	if p.gangs.Held(pod) || !p.gangs.ClaimRequeue(key, pod.UID, time.Now()) {
		// A held member (on its way to GangRetryGate) leaves the event to the retried one.
		return fwk.QueueSkip
	}
	logger.V(5).Info("Gang requeued", "pod", klog.KObj(pod), "podGroup", key, "event", why)
	return fwk.Queue
}

// isSchedulableAfterNodeChange: a node added, or one whose allocatable, labels or taints
// changed, can make room anywhere.
func (p *NetworkTopologyAware) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, _, _ any) (fwk.QueueingHint, error) {
	key, info, ok := p.constraint(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	p.markAllStale()
	if p.unplannable(key, info) || p.leftOutWaits(key, info, pod.Name) {
		return fwk.QueueSkip, nil
	}
	if p.waitsForBackoff(logger, key) {
		return fwk.QueueSkip, nil
	}
	return p.requeue(logger, pod, key, "node"), nil
}

// isSchedulableAfterPodDeleted: room freed on a node of a HyperNode that could host the gang.
// The gang's own members (kube-scheduler reports each rejected reservation as a deletion) do
// not count.
func (p *NetworkTopologyAware) isSchedulableAfterPodDeleted(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	key, info, ok := p.constraint(pod)
	if !ok {
		// This plugin rejects a pod without a constraint only to keep it off held room: a pod
		// that finishes on a held node leaves more room than the hold needs.
		return p.freedOnHeldNode(logger, pod, oldObj, newObj)
	}
	if p.gangs.Blocker(key) != nil || p.unplannable(key, info) {
		// A blocked gang waits for its blocker, which room freed elsewhere cannot help.
		return fwk.QueueSkip, nil
	}
	deleted, _, err := util.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	// kube-scheduler reports a pending pod's nomination dropped or moved as the deletion of
	// an assigned pod too: the room is freed on its nominated node.
	node := deleted.Spec.NodeName
	if node == "" {
		node = deleted.Status.NominatedNodeName
	}
	if theirs, ok := podgroup.KeyOf(deleted); ok && theirs == key {
		// Not a retry for the gang (its failure memory ignores its own members), but a plan
		// that left members out around this one no longer holds.
		p.leftOutFreedOn(node)
		return fwk.QueueSkip, nil
	}
	if !p.freedOn(node, key, deleted.UID) || p.leftOutWaits(key, info, pod.Name) ||
		p.waitsForBackoff(logger, key) {
		return fwk.QueueSkip, nil
	}
	return p.requeue(logger, pod, key, "pod deleted"), nil
}

// freedOnHeldNode queues a pod kept off held room when a pod finished on a held node.
func (p *NetworkTopologyAware) freedOnHeldNode(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	ix := p.gangs.Holds()
	if ix == nil {
		return fwk.QueueSkip, nil
	}
	deleted, _, err := util.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if len(ix.On(deleted.Spec.NodeName)) == 0 {
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("Pod requeued: a pod finished on a held node", "pod", klog.KObj(pod), "node", deleted.Spec.NodeName)
	return fwk.Queue, nil
}

// unplannable reports whether the gang's constraint is one no capacity can satisfy
// (constraintProblem, PreFilter's own check). Only a change of the PodGroup or of the tree
// can fix it, and their hints requeue it.
func (p *NetworkTopologyAware) unplannable(key podgroup.Key, info podgroup.Info) bool {
	return constraintProblem(p.cache.Snapshot(), key, info) != ""
}

// isSchedulableAfterHyperNodeChange: a HyperNode added or deleted, or its spec or labels
// changed; status-only updates (the controller's) do not change the tree.
func (p *NetworkTopologyAware) isSchedulableAfterHyperNodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	key, _, ok := p.constraint(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	if oldObj != nil && newObj != nil && !hyperNodeSpecChanged(oldObj, newObj) {
		return fwk.QueueSkip, nil
	}
	return p.requeue(logger, pod, key, "HyperNode"), nil
}

// isSchedulableAfterPodGroupChange: the gang's own PodGroup changed what scheduling reads; or
// another gang's hold freed room it kept the pod off (holds.go): it ended or left nodes (its
// record changed, or its PodGroup went). A gang's remembered failure counted the held room
// as taken, so it is stale.
func (p *NetworkTopologyAware) isSchedulableAfterPodGroupChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	key, inGang := podgroup.KeyOf(pod)
	changed := newObj
	if changed == nil {
		changed = oldObj // deleted
	}
	obj, ok := changed.(metav1.Object)
	if !ok {
		return fwk.QueueSkip, nil
	}
	own := inGang && obj.GetNamespace() == key.Namespace && obj.GetName() == key.Name
	if newObj == nil && podgroup.HoldFreedRoom(oldObj, newObj) {
		p.endDeletedHold(podgroup.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}, obj.GetUID())
	}
	switch {
	case own && newObj != nil && podgroup.SchedulingChanged(oldObj, newObj):
		return p.requeue(logger, pod, key, "PodGroup"), nil
	case own || !podgroup.HoldFreedRoom(oldObj, newObj):
		return fwk.QueueSkip, nil
	case inGang:
		if _, _, constrained := p.constraint(pod); constrained {
			p.markAllStale()
			return p.requeue(logger, pod, key, "hold ended"), nil
		}
	}
	logger.V(5).Info("Pod requeued: a hold ended or moved", "pod", klog.KObj(pod), "podGroup", klog.KObj(obj))
	return fwk.Queue, nil
}

// endDeletedHold ends the hold of a deleted PodGroup before the pods it kept off are
// requeued for it: the registry hears of the deletion on an informer of its own, perhaps
// after the pods' next cycle, which would find the hold still there and leave them waiting
// for an event that already came. A PodGroup of the same name created since (another UID) is
// another gang, whose hold stays.
func (p *NetworkTopologyAware) endDeletedHold(key podgroup.Key, uid types.UID) {
	if pg := p.registry.Info(key).PodGroup; pg != nil && pg.UID != uid {
		return
	}
	p.gangs.ReleaseHold(key, gangstate.HoldDeleted)
}

// hyperNodeSpecChanged compares the spec and labels of two HyperNode event objects (typed, or
// unstructured from kube-scheduler's dynamic informer).
func hyperNodeSpecChanged(oldObj, newObj any) bool {
	switch o := oldObj.(type) {
	case *topologyv1alpha1.HyperNode:
		n, ok := newObj.(*topologyv1alpha1.HyperNode)
		return !ok || !equality.Semantic.DeepEqual(o.Spec, n.Spec) || !equality.Semantic.DeepEqual(o.Labels, n.Labels)
	case *unstructured.Unstructured:
		n, ok := newObj.(*unstructured.Unstructured)
		return !ok || !equality.Semantic.DeepEqual(o.Object["spec"], n.Object["spec"]) || !equality.Semantic.DeepEqual(o.GetLabels(), n.GetLabels())
	}
	return true
}
