package podgroup

import v1 "k8s.io/api/core/v1"

// NominationHolder reports whether a decision of one plugin holds a pod's nomination, and on
// which node: GangPreemption's, while the victims of the member's gang terminate. Another
// plugin that writes status.nominatedNodeName (NetworkTopologyAware's plans, from their own
// writer) must then leave the field alone: its write may land after the preemption's, and
// kube-scheduler drops a nomination whose field an update clears.
type NominationHolder func(pod *v1.Pod) (node string, held bool)

// AddNominationHolder registers a holder (one per profile that runs GangPreemption: the
// registry is shared by the profiles). Register before the informers start.
func (r *Registry) AddNominationHolder(h NominationHolder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nominationHolders = append(r.nominationHolders, h)
}

// NominationHeld asks the registered holders whether one holds the pod's nomination.
func (r *Registry) NominationHeld(pod *v1.Pod) (node string, held bool) {
	r.mu.RLock()
	holders := r.nominationHolders
	r.mu.RUnlock()
	for _, h := range holders {
		if node, held := h(pod); held {
			return node, true
		}
	}
	return "", false
}
