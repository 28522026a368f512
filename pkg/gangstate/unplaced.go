package gangstate

import (
	"maps"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A gang without a network topology constraint has no plan to remember its failure by: it is
// placed member by member, and when a member finds no room its round is rejected. The
// rejected members' reservations come back to kube-scheduler's queue as pod deletions,
// NodeResourcesFit requeues the failed member for them, it reserves the room they freed, the
// next member fails, and so on: on an idle scheduler, hundreds of cycles a second, each with
// its preemption simulation. So the failure is remembered here, as NetworkTopologyAware
// remembers a failed plan: the gang is held behind its failed member (the scout, retry.go),
// and Gang's PreFilter lets it try again only when the nodes offer more than when it failed:
// the free amount of a resource the member requests, summed over the nodes with the gang's
// own reservations given back, grew (a pod left, a node came, another gang released a
// reservation it held then); or a node changed as NodeCapacityChanged counts (labels,
// taints, allocatable, schedulability, declared features); or UnplacedMaxAge passed. Both
// are read from the cycle's snapshot, the state the failure was judged on, not from events:
// it does not matter which plugin's hint requeued the scout, nor in which order
// kube-scheduler's cache and this registry saw a change (the registry may count a node
// update the failed cycle's snapshot did not have yet); and room another gang took after the
// failure and released again is no more room, so two failed gangs do not wake each other in
// turn. The registry's own node events only wake the scout.

// UnplacedMaxAge is how long a remembered failure holds without more room, as kube-scheduler
// retries unschedulable pods after 5 minutes: some changes reach no count (a volume, a DRA
// ResourceSlice, a node whose other pods left while ours grew).
const UnplacedMaxAge = 5 * time.Minute

// Room is what the nodes of a cycle's snapshot offer a gang waiting for room: Free, the free
// amount of each resource a member requests, summed over the nodes (CPU in millicores, other
// resources in their units), and Nodes, the sum of the nodes' NodeFingerprint.
type Room struct {
	Free  map[v1.ResourceName]int64
	Nodes uint64
}

// OffersMoreThan reports whether the nodes changed since before (they may take the members
// now) or some resource has more free.
func (r Room) OffersMoreThan(before Room) bool {
	if r.Nodes != before.Nodes {
		return true
	}
	for name, free := range r.Free {
		if free > before.Free[name] {
			return true
		}
	}
	return false
}

// Unplaced is a gang's last failure to place all its members.
type Unplaced struct {
	// Why is the failure in the words of Gang's PostFilter; At is when it happened, and Room
	// what the nodes offered then.
	Why  string
	At   time.Time
	Room Room
}

// MarkUnplaced remembers that the gang, placed member by member, could not place the members
// it needs with room free, and holds it behind scout, the member that failed.
// nodeChangesAtStart is NodeChanges when the failed attempt started: wake reports that a node
// changed since, so the caller activates the scout (in its cycle, it comes back for another
// try): its snapshot may not have had the change.
func (t *Tracker) MarkUnplaced(key Key, scout types.UID, why string, now time.Time, room Room, nodeChangesAtStart uint64) (wake bool) {
	t.reg.Lock()
	defer t.reg.Unlock()
	s, _ := t.gangLocked(key)
	if s == nil {
		return false
	}
	t.step(key, UnplacedFound, func() {
		s.retryHeld, s.scout = true, scout
		s.unplaced = &Unplaced{Why: why, At: now, Room: room}
	})
	t.unplaced.Insert(key)
	return t.nodeChanges != nodeChangesAtStart
}

// OnScoutWake registers f to be called (outside the registry's lock) with the scout of a gang
// waiting for room when a node changed, so that it is tried again whichever order
// kube-scheduler's queue and the registry saw the change in. Register before the informers
// start.
func (t *Tracker) OnScoutWake(f func(Key, *v1.Pod)) {
	t.reg.Lock()
	defer t.reg.Unlock()
	t.scoutWakers = append(t.scoutWakers, f)
}

// ScoutWakeInterval is the least time between two wake-ups of a gang's scout by node changes:
// an activated pod skips kube-scheduler's back-off (at most 10 s), and nodes that keep
// changing (a rollout that relabels every node, a flapping not-ready taint) must not run a
// whole round of the gang per change. kube-scheduler's own hints still requeue the scout,
// through the back-off.
const ScoutWakeInterval = 10 * time.Second

// wakeScoutsLocked counts a node change and returns what wakes the scout of each gang waiting
// for room, at most once per ScoutWakeInterval, once the lock is released. O(gangs waiting for
// room); node changes are rare. The registry's lock must be held for writing.
func (t *Tracker) wakeScoutsLocked() func() {
	type wake struct {
		key   Key
		scout *v1.Pod
	}
	var woken []wake
	t.nodeChanges++
	now := t.now()
	for key := range t.unplaced {
		s, d := t.peekLocked(key)
		if s == nil || s.unplaced == nil {
			t.unplaced.Delete(key)
			continue
		}
		if now.Sub(s.scoutWokenAt) < ScoutWakeInterval {
			continue
		}
		if scout := d.MemberLocked(s.scout); scout != nil && d.PendingLocked(s.scout) {
			s.scoutWokenAt = now
			woken = append(woken, wake{key, scout})
		}
	}
	if len(woken) == 0 {
		return nil
	}
	wakers := t.scoutWakers
	return func() {
		for _, w := range woken {
			for _, f := range wakers {
				f(w.key, w.scout)
			}
		}
	}
}

// RetryUnplaced decides whether the gang's scout may try to be placed, and with it every
// member: yes when no failure is remembered, or room (what the nodes offer now for the
// failure's resources, asked only then) offers more than at the failure, or the failure is
// older than UnplacedMaxAge. Then the failure is forgotten and the hold ends (the caller
// activates the held members), so that a job that can run without the scout (an elastic
// gang) is not held behind it. Any other member, and the scout otherwise, gets the failure:
// only the scout retries, so that a member of another shape in the queue does not restart
// the round the scout cannot complete. forgot says this call ended the hold.
func (t *Tracker) RetryUnplaced(key Key, uid types.UID, now time.Time, room func(names []v1.ResourceName) Room) (failure *Unplaced, retry, forgot bool) {
	t.reg.RLock()
	s, _ := t.peekLocked(key)
	if s == nil || s.unplaced == nil {
		t.reg.RUnlock()
		return nil, true, false
	}
	u, scout := s.unplaced, s.scout
	t.reg.RUnlock()
	if uid != scout {
		return u, false, false
	}
	if now.Sub(u.At) < UnplacedMaxAge && !room(slices.Sorted(maps.Keys(u.Room.Free))).OffersMoreThan(u.Room) {
		return u, false, false
	}
	t.reg.Lock()
	defer t.reg.Unlock()
	if s, _ := t.peekLocked(key); s != nil && s.unplaced == u {
		t.step(key, UnplacedRetried, func() { forgot = s.releaseRetryLocked() })
	}
	return nil, true, forgot
}

// NodeChanges counts the node changes the registry saw (NodesChanged), so that one during a
// failed attempt wakes its scout (MarkUnplaced).
func (t *Tracker) NodeChanges() uint64 {
	t.reg.RLock()
	defer t.reg.RUnlock()
	return t.nodeChanges
}
