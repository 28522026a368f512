package podgroup

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Reserve records that this scheduler reserved a node for a member. It is idempotent.
func (r *Registry) Reserve(pod *v1.Pod, nodeName string) {
	r.mu.Lock()
	out := r.ReserveLocked(pod, nodeName)
	r.mu.Unlock()
	out.Run()
}

// ReserveLocked is Reserve with the registry's write lock held; the caller runs the outcome
// once it released the lock.
func (r *Registry) ReserveLocked(pod *v1.Pod, nodeName string) Outcome {
	key, ok := KeyOf(pod)
	if !ok {
		return Outcome{}
	}
	r.before(key)
	g := r.groupLocked(key)
	notify := false
	if _, known := g.members[pod.UID]; !known && pod.DeletionTimestamp == nil {
		// Reserved before this registry saw the pod (kube-scheduler's queue and the
		// registry get pod events through different handlers): a member from now on, so
		// that its sub-group counts it, until its pod event confirms it or Unreserve (which
		// follows for a pod already deleted: its binding fails) takes it out.
		if g.provisional == nil {
			g.provisional = sets.New[types.UID]()
		}
		g.provisional.Insert(pod.UID)
		g.members[pod.UID] = pod
		g.assumed[pod.UID] = nodeName
		g.assignSubGroupLocked(pod.UID, pod)
		// Its event will find it known: the members held back below minMember hear it now.
		notify = len(g.members) == g.minMember()
	} else if !g.bound.Has(pod.UID) {
		done := g.track(pod.UID)
		g.assumed[pod.UID] = nodeName
		done()
	}
	var out Outcome
	if r.state != nil {
		out = r.state.MemberReserved(key, g, pod)
	}
	out.Notify = out.Notify || notify
	return r.withNotify(key, out)
}

// PlacedMember is a member that is bound or reserved, with its node.
type PlacedMember struct {
	Pod  *v1.Pod
	Node string
}

// PlacedMembers returns the members that are bound or reserved, with their nodes.
func (r *Registry) PlacedMembers(key Key) []PlacedMember {
	r.mu.RLock()
	defer r.mu.RUnlock()
	g := r.groups[key]
	if g == nil {
		return nil
	}
	var out []PlacedMember
	for uid, p := range g.members {
		if g.bound.Has(uid) {
			out = append(out, PlacedMember{Pod: p, Node: p.Spec.NodeName})
		} else if node, ok := g.assumed[uid]; ok {
			out = append(out, PlacedMember{Pod: p, Node: node})
		}
	}
	return out
}

// Unreserve undoes Reserve. It is idempotent.
func (r *Registry) Unreserve(pod *v1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.UnreserveLocked(pod)
}

// UnreserveLocked is Unreserve with the registry's write lock held.
func (r *Registry) UnreserveLocked(pod *v1.Pod) {
	key, ok := KeyOf(pod)
	if !ok {
		return
	}
	if g := r.groups[key]; g != nil {
		if g.provisional.Has(pod.UID) {
			// Known only from its Reserve: no pod event vouches for it.
			g.unassignSubGroupLocked(pod.UID)
			g.provisional.Delete(pod.UID)
			delete(g.members, pod.UID)
			delete(g.signatures, pod.UID)
		}
		done := g.track(pod.UID)
		delete(g.assumed, pod.UID)
		done()
		r.forgetIfEmptyLocked(key)
	}
}
