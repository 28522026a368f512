package podgroup

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// A gang whose placement failed is retried through one of its members, its scout, while the
// others are held out of kube-scheduler's queue by the GangRetryGate plugin's PreEnqueue; a
// blocked gang (see Blocker) likewise through its blocker.
// kube-scheduler evaluates every pod of its unschedulable pool against every cluster event
// (PriorityQueue.isPodWorthRequeuing); a held member is skipped there at the cost of one
// comparison, because GangRetryGate registers no event. A 1,000-pod gang that cannot fit so
// costs the queue one pod per event, not 1,000. When the scout's plan succeeds (or the gang's
// failure is forgotten), the hold ends and the held members are activated.

// EnableRetryGate records that the profile runs GangRetryGate: only then may a member of a
// failed gang be sent through PreEnqueue to be held (without the gate it would come straight
// back and loop).
func (r *Registry) EnableRetryGate(profile string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.retryGates == nil {
		r.retryGates = sets.New[string]()
	}
	r.retryGates.Insert(profile)
}

// RetryGateEnabled reports whether the profile runs GangRetryGate.
func (r *Registry) RetryGateEnabled(profile string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.retryGates.Has(profile)
}

// HoldForRetry starts holding the gang's pending members behind scout, the member whose
// placement attempt just failed: from now on RetryGate holds back every other member.
func (r *Registry) HoldForRetry(key Key, scout types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if g := r.groups[key]; g != nil {
		g.retryHeld, g.scout = true, scout
	}
}

// ReleaseRetry ends the hold on the gang; it reports whether there was one (then its held
// members must be activated, since no cluster event will requeue them).
func (r *Registry) ReleaseRetry(key Key) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.groups[key]
	return g != nil && g.releaseRetryLocked()
}

// releaseRetryLocked ends the group's hold; it reports whether there was one. r.mu must be
// held.
func (g *group) releaseRetryLocked() bool {
	if !g.retryHeld {
		return false
	}
	g.retryHeld, g.scout = false, ""
	g.unplaced = nil
	return true
}

// MarkAttempted records that the member is in a scheduling cycle.
func (r *Registry) MarkAttempted(pod *v1.Pod) {
	key, ok := KeyOf(pod)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if g := r.groups[key]; g != nil && g.members[pod.UID] != nil {
		g.attempted.Insert(pod.UID)
	}
}

// RetryGate decides whether a member stays out of the queue: it returns the name of the
// member retried for the gang and true when the pod is a pending member of a held gang other
// than its scout, or of a blocked gang other than its blocker (see Blocker). A member of a
// held gang whose scout is gone (deleted, or bound elsewhere) becomes the scout. A member
// that never went through a scheduling cycle (created after the hold began) is not held:
// kube-scheduler writes no condition for a pod that PreEnqueue keeps out, so it would show
// no reason at all. Its one cycle reuses the gang's failure and writes it.
func (r *Registry) RetryGate(pod *v1.Pod) (retried string, held bool) {
	key, ok := KeyOf(pod)
	if !ok {
		return "", false
	}
	r.mu.RLock()
	g := r.groups[key]
	if g == nil || (!g.retryHeld && g.blocker == nil) {
		r.mu.RUnlock()
		return "", false
	}
	r.mu.RUnlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if g = r.groups[key]; g == nil || !g.attempted.Has(pod.UID) {
		return "", false
	}
	switch b := g.blocker; {
	case b != nil && b.UID == pod.UID:
		// The blocker is never held, not even behind a scout: each would wait for the other.
		return "", false
	case b != nil && g.pendingLocked(b.UID):
		retried = b.Name
	case !g.retryHeld || g.scout == pod.UID:
		return "", false
	case g.pendingLocked(g.scout):
		retried = g.members[g.scout].Name
	default:
		g.scout = pod.UID
		return "", false
	}
	if g.requeued == pod.UID {
		// A held member never runs the attempt that would end its requeue claim.
		g.requeued = ""
	}
	return retried, true
}

// Held reports, without changing anything, whether RetryGate would hold the pod back: a
// hint must not requeue such a member for its gang, the retried member stands for it.
func (r *Registry) Held(pod *v1.Pod) bool {
	key, ok := KeyOf(pod)
	if !ok {
		return false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	g := r.groups[key]
	if g == nil || !g.attempted.Has(pod.UID) {
		return false
	}
	if b := g.blocker; b != nil {
		if b.UID == pod.UID {
			return false
		}
		if g.pendingLocked(b.UID) {
			return true
		}
	}
	return g.retryHeld && g.scout != pod.UID && g.pendingLocked(g.scout)
}

// SendToRetryGate activates a member that is being scheduled when RetryGate would hold it
// back and the profile runs the gate: the activation takes effect when its failed attempt
// returns it to the queue, which then runs PreEnqueue and keeps it out of the unschedulable
// pool's per-event evaluation. It reports whether it did.
func (r *Registry) SendToRetryGate(logger klog.Logger, handle fwk.Handle, pod *v1.Pod) bool {
	// The member is in a cycle, whatever plugin asks: the cycle writes its condition.
	r.MarkAttempted(pod)
	if !r.Held(pod) || !r.RetryGateEnabled(handle.ProfileName()) {
		return false
	}
	Activate(logger, handle, pod)
	return true
}

// RetryMember returns the member to activate to retry the gang: its scout while it is held,
// else its first pending member by name (nil: none pending).
func (r *Registry) RetryMember(key Key) *v1.Pod {
	r.mu.RLock()
	g := r.groups[key]
	if g != nil && g.retryHeld && g.pendingLocked(g.scout) {
		scout := g.members[g.scout]
		r.mu.RUnlock()
		return scout
	}
	r.mu.RUnlock()
	if pending := r.PendingMembers(key); len(pending) > 0 {
		return pending[0]
	}
	return nil
}

// pendingLocked reports whether uid is a member neither bound nor reserved. r.mu must be held.
func (g *group) pendingLocked(uid types.UID) bool {
	_, reserved := g.assumed[uid]
	return g.members[uid] != nil && !g.bound.Has(uid) && !reserved
}

// scoutLostLocked reports whether uid was the scout of a held gang and is no longer pending:
// a held member must then become the scout. r.mu must be held.
func (g *group) scoutLostLocked(uid types.UID) bool {
	return g.retryHeld && g.scout == uid && !g.pendingLocked(uid)
}
