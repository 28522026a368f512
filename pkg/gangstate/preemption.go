package gangstate

import v1 "k8s.io/api/core/v1"

// PreemptionHolder is what a plugin that preempts for whole gangs (GangPreemption) tells the
// other plugins about a preemption while it runs: its victims terminate, or kube-scheduler's
// cache still counts them. A nil function answers no.
type PreemptionHolder struct {
	// Running reports whether a preemption for the gang is under way. Gang's waiting members
	// then keep their nodes past the gang's schedule timeout: rejecting them would hand the
	// nodes they hold to pods of lower priority, and the gang would have to evict those too.
	Running func(key Key) bool
	// Nomination reports the node a running preemption nominated the pod on. Another plugin
	// that writes status.nominatedNodeName (NetworkTopologyAware's plans, from their own
	// writer) must then leave the field alone: its write may land after the preemption's, and
	// kube-scheduler drops a nomination whose field an update clears.
	Nomination func(pod *v1.Pod) (node string, held bool)
}

// AddPreemptionHolder registers a holder (one per profile that runs GangPreemption: the
// registry is shared by the profiles). Register before the informers start.
func (t *Tracker) AddPreemptionHolder(h PreemptionHolder) {
	t.reg.Lock()
	defer t.reg.Unlock()
	t.preemptionHolders = append(t.preemptionHolders, h)
}

// holders returns the registered holders. They take their own locks, so they are asked
// outside the registry's: a caller may hold its own lock, never the registry's.
func (t *Tracker) holders() []PreemptionHolder {
	t.reg.RLock()
	defer t.reg.RUnlock()
	return t.preemptionHolders
}

// Preempting asks the registered holders whether a preemption for the gang is under way.
func (t *Tracker) Preempting(key Key) bool {
	return preempting(t.holders(), key)
}

// PreemptingLocked is Preempting with the gangs' lock held (a holder takes only its own).
func (t *Tracker) PreemptingLocked(key Key) bool {
	return preempting(t.preemptionHolders, key)
}

func preempting(holders []PreemptionHolder, key Key) bool {
	for _, h := range holders {
		if h.Running != nil && h.Running(key) {
			return true
		}
	}
	return false
}

// NominationHeld asks the registered holders whether a running preemption holds the pod's
// nomination, and on which node.
func (t *Tracker) NominationHeld(pod *v1.Pod) (node string, held bool) {
	for _, h := range t.holders() {
		if h.Nomination == nil {
			continue
		}
		if node, held := h.Nomination(pod); held {
			return node, true
		}
	}
	return "", false
}

// OnPreemptionEnd registers f to be called (outside the registry's lock) when a preemption
// for a gang ends: its victims are gone from the scheduler's cache, or it was given up.
// Register before the informers start.
func (t *Tracker) OnPreemptionEnd(f func(Key)) {
	t.reg.Lock()
	defer t.reg.Unlock()
	t.preemptionEnders = append(t.preemptionEnders, f)
}

// PreemptionEnded tells the listeners that the gang's preemption ended. The caller must hold
// none of its locks that a listener's Preempting call could need.
func (t *Tracker) PreemptionEnded(key Key) {
	t.reg.RLock()
	enders := t.preemptionEnders
	t.reg.RUnlock()
	for _, f := range enders {
		f(key)
	}
}
