package gangstate

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
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
func (t *Tracker) EnableRetryGate(profile string) {
	t.reg.Lock()
	defer t.reg.Unlock()
	if t.retryGates == nil {
		t.retryGates = sets.New[string]()
	}
	t.retryGates.Insert(profile)
}

// RetryGateEnabled reports whether the profile runs GangRetryGate.
func (t *Tracker) RetryGateEnabled(profile string) bool {
	t.reg.RLock()
	defer t.reg.RUnlock()
	return t.retryGates.Has(profile)
}

// HoldForRetry starts holding the gang's pending members behind scout, the member whose
// placement attempt just failed: from now on RetryGate holds back every other member.
func (t *Tracker) HoldForRetry(key Key, scout types.UID) {
	t.reg.Lock()
	defer t.reg.Unlock()
	if s, _ := t.gangLocked(key); s != nil {
		t.step(key, HeldForRetry, func() { s.retryHeld, s.scout = true, scout })
	}
}

// ReleaseRetry ends the hold on the gang; it reports whether there was one (then its held
// members must be activated, since no cluster event will requeue them).
func (t *Tracker) ReleaseRetry(key Key) bool {
	t.reg.Lock()
	defer t.reg.Unlock()
	s, _ := t.peekLocked(key)
	released := false
	if s != nil {
		t.step(key, RetryReleased, func() { released = s.releaseRetryLocked() })
	}
	return released
}

// releaseRetryLocked ends the gang's hold; it reports whether there was one.
func (s *Gang) releaseRetryLocked() bool {
	if !s.retryHeld {
		return false
	}
	s.retryHeld, s.scout = false, ""
	s.unplaced = nil
	return true
}

// MarkAttempted records that the member is in a scheduling cycle.
func (t *Tracker) MarkAttempted(pod *v1.Pod) {
	if _, ok := podgroup.KeyOf(pod); !ok {
		return
	}
	t.reg.Lock()
	defer t.reg.Unlock()
	t.markAttemptedLocked(pod)
}

func (t *Tracker) markAttemptedLocked(pod *v1.Pod) {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return
	}
	if s, d := t.gangLocked(key); s != nil && d.MemberLocked(pod.UID) != nil {
		s.attempted.Insert(pod.UID)
	}
}

// RetryGate decides whether a member stays out of the queue: it returns the name of the
// member retried for the gang and true when the pod is a pending member of a held gang other
// than its scout, or of a blocked gang other than its blocker (see Blocker). A member of a
// held gang whose scout is gone (deleted, or bound elsewhere) becomes the scout. A member
// that never went through a scheduling cycle (created after the hold began) is not held:
// kube-scheduler writes no condition for a pod that PreEnqueue keeps out, so it would show
// no reason at all. Its one cycle reuses the gang's failure and writes it.
func (t *Tracker) RetryGate(pod *v1.Pod) (retried string, held bool) {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return "", false
	}
	t.reg.RLock()
	s, _ := t.peekLocked(key)
	if s == nil || (!s.retryHeld && s.blocker == nil) {
		t.reg.RUnlock()
		return "", false
	}
	t.reg.RUnlock()
	t.reg.Lock()
	defer t.reg.Unlock()
	s, d := t.peekLocked(key)
	if s == nil || !s.attempted.Has(pod.UID) {
		return "", false
	}
	switch b := s.blocker; {
	case b != nil && b.UID == pod.UID:
		// The blocker is never held, not even behind a scout: each would wait for the other.
		return "", false
	case b != nil && d.PendingLocked(b.UID):
		retried = b.Name
	case !s.retryHeld || s.scout == pod.UID:
		return "", false
	case d.PendingLocked(s.scout):
		retried = d.MemberLocked(s.scout).Name
	default:
		s.scout = pod.UID
		return "", false
	}
	if s.requeued == pod.UID {
		// A held member never runs the attempt that would end its requeue claim.
		s.requeued = ""
	}
	return retried, true
}

// Held reports, without changing anything, whether RetryGate would hold the pod back: a
// hint must not requeue such a member for its gang, the retried member stands for it.
func (t *Tracker) Held(pod *v1.Pod) bool {
	t.reg.RLock()
	defer t.reg.RUnlock()
	return t.heldLocked(pod)
}

func (t *Tracker) heldLocked(pod *v1.Pod) bool {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return false
	}
	s, d := t.peekLocked(key)
	if s == nil || !s.attempted.Has(pod.UID) {
		return false
	}
	if b := s.blocker; b != nil {
		if b.UID == pod.UID {
			return false
		}
		if d.PendingLocked(b.UID) {
			return true
		}
	}
	return s.retryHeld && s.scout != pod.UID && d.PendingLocked(s.scout)
}

// SendToRetryGate activates a member that is being scheduled when RetryGate would hold it
// back and the profile runs the gate: the activation takes effect when its failed attempt
// returns it to the queue, which then runs PreEnqueue and keeps it out of the unschedulable
// pool's per-event evaluation. It reports whether it did.
func (t *Tracker) SendToRetryGate(logger klog.Logger, handle fwk.Handle, pod *v1.Pod) bool {
	t.reg.Lock()
	activate := t.toRetryGateLocked(handle.ProfileName(), pod)
	t.reg.Unlock()
	return Activate(logger, handle, activate...) > 0
}

// toRetryGateLocked is SendToRetryGate under the lock: it returns the pod to activate, if
// any.
func (t *Tracker) toRetryGateLocked(profile string, pod *v1.Pod) []*v1.Pod {
	// The member is in a cycle, whatever plugin asks: the cycle writes its condition.
	t.markAttemptedLocked(pod)
	if !t.heldLocked(pod) || !t.retryGates.Has(profile) {
		return nil
	}
	return []*v1.Pod{pod}
}

// RetryMember returns the member to activate to retry the gang: its scout while it is held,
// else its first pending member by name (nil: none pending).
func (t *Tracker) RetryMember(key Key) *v1.Pod {
	t.reg.RLock()
	s, d := t.peekLocked(key)
	if s != nil && s.retryHeld && d.PendingLocked(s.scout) {
		scout := d.MemberLocked(s.scout)
		t.reg.RUnlock()
		return scout
	}
	t.reg.RUnlock()
	if pending := t.reg.PendingMembers(key); len(pending) > 0 {
		return pending[0]
	}
	return nil
}

// scoutLostLocked reports whether uid was the scout of a held gang and is no longer pending:
// a held member must then become the scout.
func (s *Gang) scoutLostLocked(d *podgroup.Group, uid types.UID) bool {
	return s.retryHeld && s.scout == uid && !d.PendingLocked(uid)
}
