package podgroup

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// State is the gangs' scheduling state (pkg/gangstate) as the registry sees it: the registry
// tells it of every change of a group's data while it holds its write lock, so that the state
// moves with the data it is about, and drops a group's state with the group. Each call returns
// what to do once the lock is released.
type State interface {
	// Before: the registry is about to change the group's data (under its write lock).
	Before(key Key)
	// PodGroupRevised: the PodGroup appeared, or its spec or constraint annotations changed
	// (a new revision).
	PodGroupRevised(key Key, g *Group) Outcome
	// PodGroupDeleted: the PodGroup is gone; its members stay.
	PodGroupDeleted(key Key, g *Group) Outcome
	// MemberSet: a member was added or updated (change.Old is nil for a new one).
	MemberSet(key Key, g *Group, change MemberChange) Outcome
	// MemberDeleted: a member was deleted or finished.
	MemberDeleted(key Key, g *Group, pod *v1.Pod) Outcome
	// MemberReserved: this scheduler reserved a node for the member.
	MemberReserved(key Key, g *Group, pod *v1.Pod) Outcome
	// NodesChanged: a node was added, or changed as NodeCapacityChanged counts.
	NodesChanged() Outcome
	// Forget: the group has neither a PodGroup nor members any more.
	Forget(key Key)
}

// Outcome is what the state asks of the registry after a change, once its lock is released:
// to tell the group's OnGroupChange listeners (its held-back members may go now), and to run
// After (activations, listeners of its own).
type Outcome struct {
	Notify bool
	After  func()
}

// Run does what the outcome asks, by itself: After (Notify is the registry's to do, see
// withNotify). Call it with no lock held.
func (o Outcome) Run() {
	if o.After != nil {
		o.After()
	}
}

func (o Outcome) run() { o.Run() }

// withNotify folds the notification of the group's listeners into the outcome's After, for an
// outcome handed to a caller that holds the lock (ReserveLocked).
func (r *Registry) withNotify(key Key, o Outcome) Outcome {
	if !o.Notify {
		return o
	}
	after := o.After
	return Outcome{After: func() {
		if after != nil {
			after()
		}
		r.Notify(key, false)
	}}
}

// before tells the state that the group's data is about to change.
func (r *Registry) before(key Key) {
	if r.state != nil {
		r.state.Before(key)
	}
}

// SetState makes s the state the registry tells of its changes. Call it once, before the
// informers start.
func (r *Registry) SetState(s State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state = s
}

// Lock, Unlock, RLock and RUnlock take the registry's lock, which guards every gang's data and
// its scheduling state (pkg/gangstate) together.
func (r *Registry) Lock()    { r.mu.Lock() }
func (r *Registry) Unlock()  { r.mu.Unlock() }
func (r *Registry) RLock()   { r.mu.RLock() }
func (r *Registry) RUnlock() { r.mu.RUnlock() }

// GroupLocked returns the group's data (nil when the registry does not know it). The
// registry's lock must be held while the group is read.
func (r *Registry) GroupLocked(key Key) *Group { return r.groups[key] }

// EachGroupLocked calls f for every group. The registry's lock must be held.
func (r *Registry) EachGroupLocked(f func(Key, *Group)) {
	for key, g := range r.groups {
		f(key, g)
	}
}

// The methods below read a group under the registry's lock.

// InfoLocked returns the group's Info.
func (g *Group) InfoLocked() Info { return g.infoLocked() }

// PodGroupLocked returns the group's PodGroup as the informer last delivered it (nil when
// it has none).
func (g *Group) PodGroupLocked() *schedulingv1alpha1.PodGroup { return g.podGroup }

// MinMemberLocked returns the PodGroup's minMember (at least 1), or 0 without a PodGroup.
func (g *Group) MinMemberLocked() int { return g.minMember() }

// MemberLocked returns the member with that UID, or nil.
func (g *Group) MemberLocked(uid types.UID) *v1.Pod { return g.members[uid] }

// MembersLocked returns how many members the group has.
func (g *Group) MembersLocked() int { return len(g.members) }

// PendingLocked reports whether uid is a member neither bound nor reserved.
func (g *Group) PendingLocked(uid types.UID) bool {
	_, reserved := g.assumed[uid]
	return g.members[uid] != nil && !g.bound.Has(uid) && !reserved
}

// BoundLocked reports whether the member is seen bound to a node.
func (g *Group) BoundLocked(uid types.UID) bool { return g.bound.Has(uid) }

// EachPendingLocked calls f for every pending member (neither bound nor reserved).
func (g *Group) EachPendingLocked(f func(types.UID, *v1.Pod)) {
	for uid, p := range g.members {
		if g.PendingLocked(uid) {
			f(uid, p)
		}
	}
}

// SignatureLocked is the member's shape signature (what the Filter plugins see of it),
// computed once per member object. The registry's write lock must be held.
func (g *Group) SignatureLocked(pod *v1.Pod) string {
	if m, ok := g.signatures[pod.UID]; ok && m.pod == pod {
		return m.sig
	}
	sig := signatureOf(pod)
	if g.members[pod.UID] == pod {
		// Only the registry's own object is remembered: a scheduling cycle's copy would
		// replace it for nothing.
		if g.signatures == nil {
			g.signatures = map[types.UID]memberSignature{}
		}
		g.signatures[pod.UID] = memberSignature{pod: pod, sig: sig}
	}
	return sig
}

// memberSignature is a member's shape signature and the object it was computed from.
type memberSignature struct {
	pod *v1.Pod
	sig string
}

// CanDoWithoutLocked reports whether the job can still complete without the members out:
// minMember of the others, and for each sub-group policy minSubGroups sub-groups that keep
// subGroupSize members. O(sub-groups + out).
func (g *Group) CanDoWithoutLocked(out sets.Set[types.UID]) bool {
	if len(g.members)-out.Len() < max(g.minMember(), 1) {
		return false
	}
	if len(g.subGroups) == 0 {
		return true
	}
	lost := map[string]int{}
	for uid := range out {
		if sub, ok := g.memberSub[uid]; ok {
			lost[sub.ID]++
		}
	}
	complete := map[string]int{}
	for id, c := range g.subCounts {
		if c.Members-lost[id] >= g.subGroupSize(c.Policy) {
			complete[c.Policy]++
		}
	}
	for _, p := range g.subGroups {
		if complete[p.Name] < int(p.MinSubGroups) {
			return false
		}
	}
	return true
}
