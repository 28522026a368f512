// Package podgroup keeps the PodGroups (scheduler-plugins scheduling.x-k8s.io/v1alpha1) of a
// scheduler process and their members, shared by the Gang and NetworkTopologyAware plugins.
//
// A pod is a member of the PodGroup named by its label scheduling.x-k8s.io/pod-group, in its
// own namespace. The registry counts, per group, the members that exist (not terminated, not
// terminating), the members bound to a node (seen through the informer) and the members this
// scheduler has reserved but not yet bound, so that every question the plugins ask is O(1).
package podgroup

import (
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// EventResource is the kube-scheduler event resource of scheduler-plugins PodGroups
// (resource.version.group), which kube-scheduler watches through a dynamic informer.
const EventResource fwk.EventResource = "podgroups.v1alpha1.scheduling.x-k8s.io"

// Key identifies a PodGroup: its namespace and name.
type Key = types.NamespacedName

// KeyOf returns the PodGroup a pod is a member of.
func KeyOf(pod *v1.Pod) (Key, bool) {
	name, ok := pod.Labels[schedulingv1alpha1.PodGroupLabel]
	if !ok || name == "" {
		return Key{}, false
	}
	return Key{Namespace: pod.Namespace, Name: name}, true
}

// Registry is the process-wide view of PodGroups and their members. It is safe for
// concurrent use. Its lock also guards every gang's scheduling state (pkg/gangstate, told
// of each data change through State while the lock is held): a gang's data and its state
// change together, under one lock.
type Registry struct {
	mu     sync.RWMutex
	groups map[Key]*Group
	// defaultTopology is the constraint of PodGroups that say nothing of topology, once
	// defaultSet (SetDefaultTopology).
	defaultTopology *NetworkTopology
	defaultSet      bool
	// nodeAllocatable and clusterAllocatable let the minResources check run in O(1).
	nodeAllocatable    map[string]v1.ResourceList
	clusterAllocatable v1.ResourceList
	// shortOfCluster are the groups last found to need more minResources than the cluster
	// can allocate (MinResourcesShortfall).
	shortOfCluster sets.Set[Key]
	// forgetting counts the PodGroup deletions whose plugins are being told: the group is
	// not forgotten before they have released what its state holds.
	forgetting map[Key]int
	// state is told of every data change under mu (nil: nobody keeps state).
	state State

	synced    []cache.InformerSynced
	listeners []func(Key, bool)
	// forgetters are called when a PodGroup is deleted, so that what plugins keep per gang
	// does not outlive it.
	forgetters []func(Key)
}

// Group is one PodGroup's data: the object, its parsed constraints, its members and their
// placement. Its methods must be called with the registry's lock held (pkg/gangstate reads
// it so).
type Group struct {
	podGroup *schedulingv1alpha1.PodGroup
	topology *NetworkTopology
	// topologyErr is why the PodGroup's constraint annotation is unusable.
	topologyErr error
	// topologyDefault: topology is the scheduler's default (SetDefaultTopology).
	topologyDefault bool
	members         map[types.UID]*v1.Pod
	bound           sets.Set[types.UID]
	// assumed maps the members this scheduler reserved (not yet seen bound) to their node.
	assumed map[types.UID]string

	// subGroups are the PodGroup's sub-group policies; subGroupErr says why they are unusable.
	subGroups   []SubGroupPolicy
	subGroupErr error
	// holdAfter, holdErr, hold and holdRecordErr are the PodGroup's parsed hold annotations.
	holdAfter     HoldAfter
	holdErr       error
	hold          *HoldRecord
	holdRecordErr error
	// revision counts the changes of what scheduling reads from the PodGroup (its spec and
	// constraint annotations), so a remembered decision can tell it is out of date.
	revision int
	// signatures memoises each member's shape signature (signatureOf, a JSON encoding) for the
	// object it was computed from: marking or clearing a shape compares every member's, under
	// the registry's lock.
	signatures map[types.UID]memberSignature
	// provisional are the members known only from their Reserve (see Reserve); nil until
	// there is one.
	provisional sets.Set[types.UID]
	// memberSub maps the members in a sub-group to it; subCounts counts each sub-group's
	// members and scheduled (bound or reserved) members, kept up to date on every change.
	memberSub map[types.UID]SubGroup
	subCounts map[string]*SubGroupState
	// incompleteScheduled sums the scheduled members of the sub-groups below their
	// subGroupSize (they cannot bind yet), completeByPolicy counts each policy's complete
	// sub-groups: Permit reads them for every member, in O(policies) (subgroup_counts.go).
	incompleteScheduled int
	completeByPolicy    map[string]int
	// awaitingClaims are the unbound members whose ResourceClaims from templates do not
	// exist yet (claims.go); nil until there is one.
	awaitingClaims sets.Set[types.UID]
}

// minMember is Info.MinMember for g. r.mu must be held.
func (g *Group) minMember() int { return minMemberOf(g.podGroup) }

func minMemberOf(pg *schedulingv1alpha1.PodGroup) int {
	if pg == nil {
		return 0
	}
	return max(int(pg.Spec.MinMember), 1)
}

// New returns an empty registry.
func New() *Registry {
	return &Registry{
		groups:             map[Key]*Group{},
		nodeAllocatable:    map[string]v1.ResourceList{},
		clusterAllocatable: v1.ResourceList{},
		shortOfCluster:     sets.New[Key](),
	}
}

func (r *Registry) groupLocked(key Key) *Group {
	g := r.groups[key]
	if g == nil {
		g = &Group{members: map[types.UID]*v1.Pod{}, bound: sets.New[types.UID](), assumed: map[types.UID]string{},
			memberSub: map[types.UID]SubGroup{}, subCounts: map[string]*SubGroupState{}, completeByPolicy: map[string]int{}}
		r.groups[key] = g
	}
	return g
}

// forgetIfEmptyLocked drops a group that has neither an object nor members, and its state.
func (r *Registry) forgetIfEmptyLocked(key Key) {
	if g := r.groups[key]; g != nil && g.podGroup == nil && len(g.members) == 0 && len(g.assumed) == 0 && r.forgetting[key] == 0 {
		delete(r.groups, key)
		if r.state != nil {
			r.state.Forget(key)
		}
	}
}

// OnGroupChange registers f to be called (outside the registry's lock) when a group may have
// just become ready: its PodGroup appeared or changed what scheduling reads (podGroupChanged),
// or a new member brought the member count to minMember, or its blocker went away, or the
// scout of its held retry went away (retry.go). Register before the informers start.
func (r *Registry) OnGroupChange(f func(key Key, podGroupChanged bool)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.listeners = append(r.listeners, f)
}

// OnGroupDelete registers f to be called (outside the registry's lock) when a PodGroup is
// deleted. Register before the informers start.
func (r *Registry) OnGroupDelete(f func(Key)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgetters = append(r.forgetters, f)
}

func (r *Registry) Notify(key Key, podGroupChanged bool) {
	r.mu.RLock()
	listeners := r.listeners
	r.mu.RUnlock()
	for _, f := range listeners {
		f(key, podGroupChanged)
	}
}

// Info returns the current state of a group.
func (r *Registry) Info(key Key) Info {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.InfoLocked(key)
}

// InfoLocked is Info with the registry's lock held.
func (r *Registry) InfoLocked(key Key) Info {
	g := r.groups[key]
	if g == nil {
		return Info{}
	}
	return g.infoLocked()
}

// Created returns when the group's PodGroup was created; ok is false while it is unknown.
// O(1): the queue's sort order calls it.
func (r *Registry) Created(key Key) (created time.Time, ok bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if g := r.groups[key]; g != nil && g.podGroup != nil {
		return g.podGroup.CreationTimestamp.Time, true
	}
	return time.Time{}, false
}

func (g *Group) infoLocked() Info {
	// bound and assumed are disjoint: a member leaves assumed when it is seen bound.
	return Info{PodGroup: g.podGroup, Revision: g.revision, Members: len(g.members), Bound: g.bound.Len(), Scheduled: g.bound.Len() + len(g.assumed),
		AwaitingClaims: g.awaitingClaims.Len(),
		Topology:       g.topology, TopologyErr: g.topologyErr, TopologyDefault: g.topologyDefault,
		SubGroupPolicies: g.subGroups, SubGroupErr: g.subGroupErr,
		HoldAfter: g.holdAfter, HoldErr: g.holdErr, Hold: g.hold, HoldRecordErr: g.holdRecordErr}
}

// SubGroups returns the state of every sub-group of a group. O(sub-groups).
func (r *Registry) SubGroups(key Key) []SubGroupState {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.SubGroupsLocked(key)
}

// SubGroupsLocked is SubGroups with the registry's lock held.
func (r *Registry) SubGroupsLocked(key Key) []SubGroupState {
	g := r.groups[key]
	if g == nil {
		return nil
	}
	states := make([]SubGroupState, 0, len(g.subCounts))
	for _, c := range g.subCounts {
		states = append(states, *c)
	}
	return states
}

// MemberView is a group as one of its members sees it, from one read of the registry: the
// member counts, the sub-group counts and the progress toward binding must agree.
type MemberView struct {
	Info Info
	// States is the state of each of the group's sub-groups.
	States []SubGroupState
	// Sub is the member's sub-group (InSub false: the job's default group).
	Sub   SubGroup
	InSub bool
	// Progress is the group's progress toward binding, as Progress returns it for the member.
	Progress SubGroupProgress
}

// MemberView returns the group key as pod sees it. A pod the registry has not seen yet is
// counted as a pending member (kube-scheduler's queue and the registry receive pod events
// through different handlers), as Gang.Including counts it. O(sub-groups).
func (r *Registry) MemberView(key Key, pod *v1.Pod) MemberView {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.MemberViewLocked(key, pod)
}

// MemberViewLocked is MemberView with the registry's lock held.
func (r *Registry) MemberViewLocked(key Key, pod *v1.Pod) MemberView {
	g := r.groups[key]
	if g == nil {
		return MemberView{}
	}
	v := MemberView{Info: g.infoLocked(), Progress: g.progressLocked(pod)}
	v.Sub, v.InSub = v.Progress.Sub, v.Progress.InSub
	for _, c := range g.subCounts {
		v.States = append(v.States, *c)
	}
	if _, known := g.members[pod.UID]; !known {
		v.Info.Members++
		if v.InSub {
			v.States = countedIn(v.States, v.Sub, false)
		}
	}
	return v
}

// SubGroupProgress is how far a job is toward binding, by its sub-groups.
type SubGroupProgress struct {
	// Bindable counts the scheduled (bound or reserved) members that can bind: those of
	// complete sub-groups (subGroupSize scheduled) and of the job's default group.
	Bindable int
	// CompleteByPolicy counts each policy's complete sub-groups.
	CompleteByPolicy map[string]int
	// Sub is pod's sub-group (InSub false: the job's default group); SubComplete says
	// whether it is complete.
	Sub         SubGroup
	InSub       bool
	SubComplete bool
}

// Progress returns how far a group is toward binding, and where pod stands, in
// O(policies): what Permit asks for every member (SubGroups is O(sub-groups)).
func (r *Registry) Progress(key Key, pod *v1.Pod) SubGroupProgress {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.ProgressLocked(key, pod)
}

// ProgressLocked is Progress with the registry's lock held.
func (r *Registry) ProgressLocked(key Key, pod *v1.Pod) SubGroupProgress {
	g := r.groups[key]
	if g == nil {
		return SubGroupProgress{}
	}
	return g.progressLocked(pod)
}

// progressLocked is Progress for g; pod may be nil. r.mu must be held.
func (g *Group) progressLocked(pod *v1.Pod) SubGroupProgress {
	out := SubGroupProgress{Bindable: g.bound.Len() + len(g.assumed) - g.incompleteScheduled,
		CompleteByPolicy: make(map[string]int, len(g.completeByPolicy))}
	for policy, n := range g.completeByPolicy {
		out.CompleteByPolicy[policy] = n
	}
	if pod != nil {
		out.Sub, out.InSub = g.memberSub[pod.UID]
		if !out.InSub {
			out.Sub, out.InSub = SubGroupOf(g.subGroups, pod)
		}
		if c := g.subCounts[out.Sub.ID]; out.InSub && c != nil {
			out.SubComplete = c.Scheduled >= g.subGroupSize(c.Policy)
		}
	}
	return out
}

// PendingMembers returns the members that are neither bound nor reserved, by name.
func (r *Registry) PendingMembers(key Key) []*v1.Pod {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.PendingMembersLocked(key)
}

// PendingMembersLocked is PendingMembers with the registry's lock held.
func (r *Registry) PendingMembersLocked(key Key) []*v1.Pod {
	g := r.groups[key]
	if g == nil {
		return nil
	}
	var out []*v1.Pod
	for uid, p := range g.members {
		if _, reserved := g.assumed[uid]; !g.bound.Has(uid) && !reserved {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// SetPodGroup adds or updates a PodGroup.
func (r *Registry) SetPodGroup(pg *schedulingv1alpha1.PodGroup) {
	key := Key{Namespace: pg.Namespace, Name: pg.Name}
	// Parsed outside the write lock (queue sort reads the registry on every comparison); the
	// default is set once, at start-up, and a PodGroup parsed across that moment is parsed again.
	r.mu.RLock()
	def := r.defaultTopology
	r.mu.RUnlock()
	parsed := infoOf(pg, def)
	r.mu.Lock()
	if r.defaultTopology != def {
		parsed = infoOf(pg, r.defaultTopology)
	}
	r.before(key)
	g := r.groupLocked(key)
	// A change of minMember, minResources or the constraints can make a held-back group ready
	// (or a refused one placeable: PreFilter reads minResources from here).
	changed := g.podGroup == nil || g.podGroup.Spec.MinMember != pg.Spec.MinMember ||
		!equality.Semantic.DeepEqual(g.podGroup.Spec.MinResources, pg.Spec.MinResources) ||
		g.podGroup.Annotations[SubGroupPolicyAnnotation] != pg.Annotations[SubGroupPolicyAnnotation] ||
		g.podGroup.Annotations[NetworkTopologyAnnotation] != pg.Annotations[NetworkTopologyAnnotation]
	revised := g.podGroup == nil || SchedulingChanged(g.podGroup, pg)
	if revised {
		g.revision++
	}
	// The policies' validity depends on the job's constraint too: rebuild on either change.
	policiesChanged := changed || revised
	g.podGroup, g.topology, g.topologyErr, g.topologyDefault = pg, parsed.Topology, parsed.TopologyErr, parsed.TopologyDefault
	g.subGroups, g.subGroupErr = parsed.SubGroupPolicies, parsed.SubGroupErr
	g.holdAfter, g.holdErr, g.hold, g.holdRecordErr = parsed.HoldAfter, parsed.HoldErr, parsed.Hold, parsed.HoldRecordErr
	if policiesChanged {
		g.rebuildSubGroupsLocked()
	}
	var out Outcome
	if revised && r.state != nil {
		// A new revision ends what the state remembered under the old spec.
		out = r.state.PodGroupRevised(key, g)
	}
	r.mu.Unlock()
	out.run()
	if changed || out.Notify {
		r.Notify(key, true)
	}
}

// DeletePodGroup removes a PodGroup; its members stay known (they wait for a new one).
func (r *Registry) DeletePodGroup(namespace, name string) {
	key := Key{Namespace: namespace, Name: name}
	r.mu.Lock()
	r.shortOfCluster.Delete(key)
	r.before(key)
	// Not forgotten before the plugins are told (a member's deletion or unreservation
	// between here and then would drop the state they release).
	if r.forgetting == nil {
		r.forgetting = map[Key]int{}
	}
	r.forgetting[key]++
	var out Outcome
	if g := r.groups[key]; g != nil {
		g.podGroup, g.topology, g.topologyErr, g.topologyDefault = nil, nil, nil, false
		g.subGroups, g.subGroupErr = nil, nil
		g.holdAfter, g.holdErr, g.hold, g.holdRecordErr = HoldAfter{}, nil, nil, nil
		g.rebuildSubGroupsLocked()
		if r.state != nil {
			out = r.state.PodGroupDeleted(key, g)
		}
	}
	forgetters := r.forgetters
	r.mu.Unlock()
	out.run()
	for _, f := range forgetters {
		f(key)
	}
	// Forgotten after the plugins were told: what they release (a plan's nominations) is
	// read from the gang's state.
	r.mu.Lock()
	if r.forgetting[key]--; r.forgetting[key] <= 0 {
		delete(r.forgetting, key)
	}
	r.forgetIfEmptyLocked(key)
	r.mu.Unlock()
}

// Len returns how many groups the registry knows (with a PodGroup or members).
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.groups)
}

// MemberChange is a pod event of a member as the registry applied it.
type MemberChange struct {
	// Old is the member's previous object (nil when it is new); Pod the current one.
	Old, Pod *v1.Pod
	// Relabelled: its labels changed (it may be in another sub-group now).
	Relabelled bool
}

// SetPod records a pod's current state; pods that are not members are ignored.
func (r *Registry) SetPod(old, pod *v1.Pod) {
	if old != nil {
		if oldKey, ok := KeyOf(old); ok {
			if newKey, ok := KeyOf(pod); !ok || newKey != oldKey {
				r.DeletePod(old)
			}
		}
	}
	key, ok := KeyOf(pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		r.DeletePod(pod)
		return
	}
	r.mu.Lock()
	r.before(key)
	g := r.groupLocked(key)
	g.provisional.Delete(pod.UID) // its event confirms a member known from its Reserve
	previous, known := g.members[pod.UID]
	change := MemberChange{Pod: pod, Relabelled: known && !labels.Equals(previous.Labels, pod.Labels)}
	if known {
		change.Old = previous
	}
	if change.Relabelled {
		// Its sub-group may have changed: take it out, and back in below.
		g.unassignSubGroupLocked(pod.UID)
	}
	done := g.track(pod.UID)
	g.members[pod.UID] = pod
	if pod.Spec.NodeName != "" {
		g.bound.Insert(pod.UID)
		delete(g.assumed, pod.UID)
	}
	done()
	claimsNamed := g.trackClaims(pod.UID, pod)
	if !known || change.Relabelled {
		g.assignSubGroupLocked(pod.UID, pod)
	}
	reachedMinMember := !known && len(g.members) == g.minMember()
	var out Outcome
	if r.state != nil {
		out = r.state.MemberSet(key, g, change)
	}
	r.mu.Unlock()
	out.run()
	if reachedMinMember || claimsNamed || out.Notify {
		r.Notify(key, false)
	}
}

// DeletePod forgets a member.
func (r *Registry) DeletePod(pod *v1.Pod) {
	key, ok := KeyOf(pod)
	if !ok {
		return
	}
	r.mu.Lock()
	r.before(key)
	var out Outcome
	claimsNamed := false
	if g := r.groups[key]; g != nil {
		done := g.track(pod.UID)
		delete(g.members, pod.UID)
		delete(g.signatures, pod.UID)
		g.provisional.Delete(pod.UID)
		g.bound.Delete(pod.UID)
		delete(g.assumed, pod.UID)
		done()
		delete(g.memberSub, pod.UID)
		// The others no longer wait for this one's claims.
		claimsNamed = g.trackClaims(pod.UID, nil) && len(g.members) > 0
		if r.state != nil {
			out = r.state.MemberDeleted(key, g, pod)
		}
		r.forgetIfEmptyLocked(key)
	}
	r.mu.Unlock()
	out.run()
	if out.Notify || claimsNamed {
		// The other members were held back for this one: let them try without it.
		r.Notify(key, false)
	}
}
