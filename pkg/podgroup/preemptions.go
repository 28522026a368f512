package podgroup

// PreemptionHolder reports whether a preemption for the gang is under way: pods evicted for
// it still terminate, or kube-scheduler's cache still counts them (GangPreemption). The
// gang's members waiting in Permit then keep their nodes past the gang's schedule timeout:
// rejecting them would hand the nodes they hold to pods of lower priority, and the gang
// would have to evict those too.
type PreemptionHolder func(key Key) bool

// AddPreemptionHolder registers a holder (one per profile that runs GangPreemption).
// Register before the informers start.
func (r *Registry) AddPreemptionHolder(h PreemptionHolder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.preemptionHolders = append(r.preemptionHolders, h)
}

// Preempting asks the registered holders whether a preemption for the gang is under way.
// The holders take their own locks: a caller may hold its own, never the registry's.
func (r *Registry) Preempting(key Key) bool {
	r.mu.RLock()
	holders := r.preemptionHolders
	r.mu.RUnlock()
	for _, h := range holders {
		if h(key) {
			return true
		}
	}
	return false
}

// OnPreemptionEnd registers f to be called (outside the registry's lock) when a preemption
// for a gang ends: its victims are gone from the scheduler's cache, or it was given up.
// Register before the informers start.
func (r *Registry) OnPreemptionEnd(f func(Key)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.preemptionEnders = append(r.preemptionEnders, f)
}

// PreemptionEnded tells the listeners that the gang's preemption ended. The caller must hold
// none of its locks that a listener's Preempting call could need.
func (r *Registry) PreemptionEnded(key Key) {
	r.mu.RLock()
	enders := r.preemptionEnders
	r.mu.RUnlock()
	for _, f := range enders {
		f(key)
	}
}
