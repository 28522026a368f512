package podgroup

import (
	"time"

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
