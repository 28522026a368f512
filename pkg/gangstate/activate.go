package gangstate

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// Activate moves the pods to kube-scheduler's active queue (running PreEnqueue again for a
// gated one); nil pods are skipped. It reports how many it asked for. Never call it with the
// registry's lock held: the queue runs PreEnqueue, and GangRetryGate's takes that lock.
func Activate(logger klog.Logger, activator fwk.PodActivator, pods ...*v1.Pod) int {
	byKey := make(map[string]*v1.Pod, len(pods))
	for _, p := range pods {
		if p != nil {
			byKey[p.Namespace+"/"+p.Name] = p
		}
	}
	if len(byKey) > 0 {
		activator.Activate(logger, byKey)
	}
	return len(byKey)
}

// ActivatePending activates the gang's members that are neither bound nor reserved: no
// cluster event requeues a member that waits for its gang. It reports how many.
func (t *Tracker) ActivatePending(logger klog.Logger, activator fwk.PodActivator, key Key) int {
	return Activate(logger, activator, t.reg.PendingMembers(key)...)
}
