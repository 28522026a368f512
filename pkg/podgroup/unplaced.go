package podgroup

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A gang without a network topology constraint has no plan to remember its failure by: it is
// placed member by member, and when a member finds no room its round is rejected. The
// rejected members' reservations come back as pod deletions, kube-scheduler's
// NodeResourcesFit requeues the failed member for them, it reserves the room they freed, the
// next member fails, and so on: on an idle scheduler, hundreds of cycles a second, each with
// its preemption simulation. So the failure is remembered here, as NetworkTopologyAware
// remembers a failed plan: the gang is held behind its failed member (the scout, retry.go),
// whose retries Gang's PreFilter refuses until a cluster event that can make room claims a
// retry (ClaimRequeue: Gang's hints, which leave out the gang's own pods) or UnplacedMaxAge
// passes.

// UnplacedMaxAge is how long a remembered failure refuses the gang without an event, as
// kube-scheduler retries unschedulable pods after 5 minutes: some changes that make room
// reach no hint (a running pod resized down, a DRA ResourceSlice).
const UnplacedMaxAge = 5 * time.Minute

// Unplaced is a gang's last failure to place all its members.
type Unplaced struct {
	// Why is the failure in the words of Gang's PostFilter; At is when it happened.
	Why string
	At  time.Time
}

// MarkUnplaced remembers that the gang, placed member by member, could not place the members
// it needs, and holds it behind scout, the member that failed.
func (r *Registry) MarkUnplaced(key Key, scout types.UID, why string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if g := r.groups[key]; g != nil {
		g.retryHeld, g.scout = true, scout
		g.unplaced, g.retryClaimed = &Unplaced{Why: why, At: now}, false
		r.unplaced.Insert(key)
	}
}

// OnScoutWake registers f to be called (outside the registry's lock) with the scout of a gang
// waiting for room when something that can make room happened, so that it is tried again
// whichever plugin's hint did or did not requeue it. Register before the informers start.
func (r *Registry) OnScoutWake(f func(Key, *v1.Pod)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scoutWakers = append(r.scoutWakers, f)
}

// roomMayBeFreed is told of every change that can make room: an assigned pod deleted or
// finished, a node added or changed. Each gang waiting for room, but the one the pod belongs
// to (its own released members are what must not retry it), may retry now, and its scout
// is woken. The registry sees every pod and node event, so no event is lost to the order in
// which kube-scheduler's queue requeued the scout (by another plugin's hint, before Gang's
// PreFilter refused it and Gang's hints took over). O(1) when no gang waits for room.
func (r *Registry) roomMayBeFreed(except *Key) {
	r.mu.RLock()
	none := r.unplaced.Len() == 0
	r.mu.RUnlock()
	if none {
		return
	}
	type wake struct {
		key   Key
		scout *v1.Pod
	}
	var woken []wake
	r.mu.Lock()
	for key := range r.unplaced {
		g := r.groups[key]
		if g == nil || g.unplaced == nil {
			r.unplaced.Delete(key)
			continue
		}
		if (except != nil && *except == key) || g.retryClaimed {
			continue
		}
		g.retryClaimed = true
		if scout := g.members[g.scout]; scout != nil && g.pendingLocked(g.scout) {
			woken = append(woken, wake{key, scout})
		}
	}
	wakers := r.scoutWakers
	r.mu.Unlock()
	for _, w := range woken {
		for _, f := range wakers {
			f(w.key, w.scout)
		}
	}
}

// RetryUnplaced decides whether a member of the gang may try to be placed: yes when no
// failure is remembered, or when a cluster event claimed a retry since, or the failure is
// older than UnplacedMaxAge; then the failure is forgotten (the hold stays until a member
// reserves: ReleaseUnplaced). Otherwise it returns the failure.
func (r *Registry) RetryUnplaced(key Key, now time.Time) (*Unplaced, bool) {
	r.mu.RLock()
	g := r.groups[key]
	if g == nil || g.unplaced == nil {
		r.mu.RUnlock()
		return nil, true
	}
	u, claimed := g.unplaced, g.retryClaimed
	r.mu.RUnlock()
	if !claimed && now.Sub(u.At) < UnplacedMaxAge {
		return u, false
	}
	r.mu.Lock()
	if g := r.groups[key]; g != nil && g.unplaced == u {
		g.unplaced, g.retryClaimed = nil, false
	}
	r.mu.Unlock()
	return nil, true
}

// ReleaseUnplaced ends the hold of a gang placed member by member, now that one of its members
// reserved a node; it reports whether there was one (then the held members must be
// activated). Only for such gangs: the hold of a gang NetworkTopologyAware plans is its
// plan's to end.
func (r *Registry) ReleaseUnplaced(key Key) bool {
	r.mu.RLock()
	g := r.groups[key]
	held := g != nil && g.retryHeld
	r.mu.RUnlock()
	if !held {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	g = r.groups[key]
	return g != nil && g.releaseRetryLocked()
}

// terminal pods hold no resources.
func terminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// keyOrNil is the pod's gang, nil for a pod of none.
func keyOrNil(pod *v1.Pod) *Key {
	if key, ok := KeyOf(pod); ok {
		return &key
	}
	return nil
}
