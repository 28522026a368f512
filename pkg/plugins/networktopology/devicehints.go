package networktopology

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
)

// deviceEvents are the DRA changes that can make room for a gang whose members claim
// devices: DynamicResources' own hints requeue only the pods it rejected, and a gang this
// plugin refused (no domain holds it) must hear of devices freed or added too.
func (p *NetworkTopologyAware) deviceEvents() []fwk.ClusterEventWithHint {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Update | fwk.Delete}, QueueingHintFn: p.isSchedulableAfterClaimReleased},
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: p.isSchedulableAfterDevicesChanged},
		{Event: fwk.ClusterEvent{Resource: fwk.DeviceClass, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: p.isSchedulableAfterDevicesChanged},
	}
}

// isSchedulableAfterClaimReleased: an allocated claim deallocated or deleted frees its
// devices on its node. The resource claim controller deallocates a finished pod's claims
// after the pod is gone, so the pod's deletion alone came too early for a gang that needs
// those devices.
func (p *NetworkTopologyAware) isSchedulableAfterClaimReleased(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	key, info, ok := p.constraint(pod)
	if !ok || (len(pod.Spec.ResourceClaims) == 0 && !p.devices.TakesDevices(pod)) {
		return fwk.QueueSkip, nil
	}
	old, err := devices.ReleasedClaim(oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if old == nil {
		return fwk.QueueSkip, nil
	}
	if p.gangs.Blocker(key) != nil || p.unplannable(key, info) {
		return fwk.QueueSkip, nil
	}
	helps := false
	if nodes := allocationNodes(old.Status.Allocation); len(nodes) > 0 {
		for _, node := range nodes {
			helps = p.freedOn(node, key, old.UID) || helps
		}
	} else {
		// Devices reachable from several nodes: they can help anywhere.
		p.markAllStale()
		helps = true
	}
	if !helps || p.leftOutWaits(key, info, pod.Name) || p.waitsForBackoff(logger, key) {
		return fwk.QueueSkip, nil
	}
	return p.requeue(logger, pod, key, "devices freed"), nil
}

// isSchedulableAfterDevicesChanged: devices published or changed, or a class changed what it
// selects: like a node added, they can make room anywhere.
func (p *NetworkTopologyAware) isSchedulableAfterDevicesChanged(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	key, info, ok := p.constraint(pod)
	if !ok || (len(pod.Spec.ResourceClaims) == 0 && !p.devices.TakesDevices(pod)) {
		return fwk.QueueSkip, nil
	}
	// The plan this requeue leads to bounds nodes by the inventory: it must have the change.
	p.inventory.CatchUp(oldObj, newObj)
	p.markAllStale()
	if p.unplannable(key, info) || p.leftOutWaits(key, info, pod.Name) || p.waitsForBackoff(logger, key) {
		return fwk.QueueSkip, nil
	}
	return p.requeue(logger, pod, key, "devices changed"), nil
}

// allocationNodes are the nodes an allocation's node selector names by metadata.name (the
// allocator's selector for a node's own devices); none when it selects otherwise.
func allocationNodes(a *resourceapi.AllocationResult) []string {
	if a.NodeSelector == nil {
		return nil
	}
	var out []string
	for _, term := range a.NodeSelector.NodeSelectorTerms {
		if len(term.MatchExpressions) > 0 {
			return nil
		}
		for _, r := range term.MatchFields {
			if r.Key != metav1.ObjectNameField || r.Operator != v1.NodeSelectorOpIn {
				return nil
			}
			out = append(out, r.Values...)
		}
	}
	return out
}
