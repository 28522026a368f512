package gangstate

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
)

// Plan is a topology gang's current plan (NetworkTopologyAware): the domain, each pending
// member's leaf and node, and the slots it promises them. It is replaced, never modified,
// except for the bookkeeping of reservations (Promised, Reserved, PlacedByLeaf) and the
// relocation of a member, under the gangs' lock. PreFilter reads a member's leaf and node
// without it: relocations run in PostFilter, on the same scheduling goroutine.
type Plan struct {
	// LastUsed is when a member last used the plan (its TTL counts from it).
	LastUsed time.Time
	Domain   string
	Tier     int
	PodLeaf  map[string]string
	// PodNode is each planned member's node: the one it is nominated on, and the only one
	// PreFilter lets it try (its siblings' nominations hold the leaf's other slots, and
	// kube-scheduler copies every node that holds nominations for each Filter run: the
	// leaf's 32 nodes cost about half of the scheduler's CPU in a restart with a backlog).
	// For members of several shapes it is the node the packing chose.
	PodNode map[string]string
	// LeafInfos are the planned leaves as the tree described them: the plan holds while
	// every one of them is unchanged (the tree shares unchanged HyperNodes between
	// snapshots, so pointer equality says "unchanged").
	LeafInfos map[string]*hypernode.HyperNodeInfo
	LeafNodes map[string]sets.Set[string]
	// Promised counts, per leaf, the planned members that have not reserved yet; Reserved
	// are the members that did (so that a reservation is counted once).
	Promised map[string]int
	Reserved sets.Set[string]
	// PlacedByLeaf counts the gang's bound and reserved members per leaf, for Score.
	PlacedByLeaf map[string]int
	// Deferred are the members of sub-groups that did not fit next to the others, and an
	// elastic gang's members beyond those that fit; they wait until the plan is dropped
	// (capacity freed, a member failed) or every planned member has its place.
	Deferred sets.Set[string]
	// Nominated are the planned members nominated on their nodes that have not reserved yet;
	// dropping the plan withdraws them: a plan's promises never outlive it.
	Nominated map[string]*v1.Pod
	// Relocated are the members PostFilter moved, by name, with their new node, until they
	// are nominated there again.
	Relocated map[string]string
	// WaitsForRoom: the plan places nobody, every pending member is left out (planned around
	// the placed ones, there was no room). It answers the left-out members while nothing
	// that can make room in RoomArea (the HyperNode the job may grow in) happened since
	// RoomEpoch (read before planning), the tree and the PodGroup are the same, and it is
	// young enough.
	WaitsForRoom bool
	RoomArea     string
	RoomEpoch    uint64
	Made         time.Time
	Generation   uint64
	Revision     int
	// TreeWoken says a newer tree has retried the gang since this plan.
	TreeWoken bool
	// AfterRefusal says the plan was made at once after the gang's previous plan was refused
	// at a member's planned place (DropRefusedPlanLocked): if this one is refused too, the
	// gang waits for its hints and back-off, so that a refusal never loops.
	AfterRefusal bool
}

// Pending returns the promised slots that are still open.
func (p *Plan) Pending() int {
	n := 0
	for _, c := range p.Promised {
		n += c
	}
	return n
}

// Places reports whether the plan places pending members (rather than leaving every one
// out, waiting for room).
func (p *Plan) Places() bool { return p != nil && len(p.PodLeaf) > 0 }

// PromisedLeaves returns the leaves where the plan still promises slots (nil without a plan).
func (p *Plan) PromisedLeaves() []string {
	if p == nil {
		return nil
	}
	var out []string
	for leaf, n := range p.Promised {
		if n > 0 {
			out = append(out, leaf)
		}
	}
	return out
}

// PlanFailure is a topology gang's last failed plan. The gang's members reuse it instead of
// planning again until something that can change the answer happens: the tree or the
// PodGroup changed, or a node was added or changed, or capacity was freed in a HyperNode that
// could host the gang, or promised slots were released (these mark it Stale), or it is old.
// Even then a new plan waits out a back-off that doubles with each failure in a row.
type PlanFailure struct {
	Status   *fwk.Status
	Tree     uint64
	Revision int
	Stale    bool
	Made     time.Time
	// Failures counts the failed plans in a row; no new plan is made before RetryAt.
	Failures int
	RetryAt  time.Time
	// Possible are the HyperNodes (the virtual root for the whole cluster) that could host
	// the gang if they were empty: capacity freed anywhere else cannot help it.
	Possible sets.Set[string]
	// Wake activates a member when the back-off ends, armed when a change arrives during it.
	Wake *time.Timer
	// TreeWoken says a change of the tree has retried the gang since this failure.
	TreeWoken bool
}

// StopWake stops the failure's wake-up timer, if armed.
func (f *PlanFailure) StopWake() {
	if f != nil && f.Wake != nil {
		f.Wake.Stop()
	}
}

// Lock and Unlock take the one lock of the gangs' data and state (the registry's), for a
// plugin that reads and changes gangs' state in several steps. Never call out while holding
// it: not Activate (the queue runs GangRetryGate's PreEnqueue, which takes it), not an Event,
// the API or the nominator, and no method of the tracker or the registry that is not named
// ...Locked.
func (t *Tracker) Lock()   { t.reg.Lock() }
func (t *Tracker) Unlock() { t.reg.Unlock() }

// PlanLocked returns the gang's plan (nil: none). The lock must be held.
func (t *Tracker) PlanLocked(key Key) *Plan {
	if s := t.gangs[key]; s != nil {
		return s.plan
	}
	return nil
}

// SetPlanLocked makes plan the gang's plan, forgets its failed plan and refusal, and returns
// the plan it replaces (nil: none). A plan with deferred members keeps the gang among the
// deferring ones. The lock must be held; without data for the gang, nothing is kept.
func (t *Tracker) SetPlanLocked(key Key, plan *Plan) (old *Plan) {
	s, _ := t.gangLocked(key)
	if s == nil {
		return nil
	}
	t.step(key, PlanMade, func() {
		old = s.plan
		s.plan = plan
		plan.AfterRefusal, s.planRefused = s.planRefused, false
		s.forgetPlanFailureLocked()
		s.refused = false
	})
	if len(plan.PodLeaf) > 0 {
		s.preempted = nil
	}
	if plan.Deferred.Len() > 0 {
		t.deferring.Insert(key)
	} else {
		t.deferring.Delete(key)
	}
	return old
}

// DropPlanLocked forgets the gang's plan and returns it (nil: none). The lock must be held.
func (t *Tracker) DropPlanLocked(key Key) *Plan {
	s := t.gangs[key]
	if s == nil {
		return nil
	}
	old := s.plan
	t.step(key, PlanDropped, func() { s.plan = nil })
	return old
}

// DropRefusedPlanLocked forgets the gang's plan, which a member found no room in at its
// planned place, and reports whether the gang plans again at once: the refusal is in the
// state the next plan reads (the allocated devices, the pods bound since), so planning at
// once serves it; a plan made at once after a refusal is not retried at once again. The
// lock must be held.
func (t *Tracker) DropRefusedPlanLocked(key Key) (old *Plan, again bool) {
	s := t.gangs[key]
	if s == nil || s.plan == nil {
		return nil, false
	}
	old, again = s.plan, !s.plan.AfterRefusal
	t.step(key, PlanDropped, func() { s.plan, s.planRefused = nil, again })
	return old, again
}

// HasPodGroupLocked reports whether the gang's PodGroup exists. The lock must be held.
func (t *Tracker) HasPodGroupLocked(key Key) bool {
	d := t.reg.GroupLocked(key)
	return d != nil && d.InfoLocked().PodGroup != nil
}

// EachPlanLocked calls f for every gang's plan. The lock must be held.
func (t *Tracker) EachPlanLocked(f func(Key, *Plan)) {
	for key, s := range t.gangs {
		if s.plan != nil {
			f(key, s.plan)
		}
	}
}

// DeferringLocked returns the gangs whose plan left members out for lack of room: a release
// of promised slots retries them, since no cluster event announces it. The lock must be held.
func (t *Tracker) DeferringLocked() sets.Set[Key] { return t.deferring }

// PlanFailureLocked returns the gang's remembered failed plan (nil: none). The lock must be
// held.
func (t *Tracker) PlanFailureLocked(key Key) *PlanFailure {
	if s := t.gangs[key]; s != nil {
		return s.planFailure
	}
	return nil
}

// RecordPlanFailureLocked remembers the gang's failed plan, made for scout: from now on the
// gang is retried through scout alone, its other members are held (retry.go). It returns the
// failure it replaces (nil: none). The lock must be held.
func (t *Tracker) RecordPlanFailureLocked(key Key, scout *v1.Pod, f *PlanFailure) (old *PlanFailure) {
	s, _ := t.gangLocked(key)
	if s == nil {
		return nil
	}
	old = s.planFailure
	old.StopWake()
	t.step(key, PlanFailed, func() {
		s.planFailure = f
		s.planRefused = false
		s.retryHeld, s.scout = true, scout.UID
	})
	t.failuresRecorded++
	return old
}

// ForgetPlanFailureLocked drops the gang's failed plan (it planned, or it is gone). The lock
// must be held.
func (t *Tracker) ForgetPlanFailureLocked(key Key) {
	if s := t.gangs[key]; s != nil {
		t.step(key, PlanFailureForgotten, s.forgetPlanFailureLocked)
	}
}

func (s *Gang) forgetPlanFailureLocked() {
	s.planFailure.StopWake()
	s.planFailure = nil
}

// EachPlanFailureLocked calls f for every gang's failed plan. The lock must be held.
func (t *Tracker) EachPlanFailureLocked(f func(Key, *PlanFailure)) {
	for key, s := range t.gangs {
		if s.planFailure != nil {
			f(key, s.planFailure)
		}
	}
}

// FailuresRecordedLocked counts the failed plans recorded so far: a failure once stale stays
// stale until it is replaced, so a pass that marked every failure an event can help needs no
// second pass while the count holds. The lock must be held.
func (t *Tracker) FailuresRecordedLocked() uint64 { return t.failuresRecorded }

// RefuseLocked remembers that the gang's constraint could not be served by the tree of the
// given generation (a tier name no HyperNode carries, an ambiguous one): a change of the tree
// retries it. The lock must be held.
func (t *Tracker) RefuseLocked(key Key, generation uint64) {
	if s, _ := t.gangLocked(key); s != nil {
		t.step(key, ConstraintRefused, func() { s.refused, s.refusedOn = true, generation })
	}
}

// ForgetRefusalLocked drops the gang's refusal. The lock must be held.
func (t *Tracker) ForgetRefusalLocked(key Key) {
	if s := t.gangs[key]; s != nil {
		t.step(key, RefusalForgotten, func() { s.refused = false })
	}
}

// EachRefusedLocked calls f for every refused gang with the tree generation it was refused
// on. The lock must be held.
func (t *Tracker) EachRefusedLocked(f func(Key, uint64)) {
	for key, s := range t.gangs {
		if s.refused {
			f(key, s.refusedOn)
		}
	}
}

// ForgetPlanningLocked drops everything the planner keeps for a gang whose PodGroup was
// deleted and returns its plan (nil: none). The lock must be held.
func (t *Tracker) ForgetPlanningLocked(key Key) *Plan {
	t.deferring.Delete(key)
	s := t.gangs[key]
	if s == nil {
		return nil
	}
	old := s.plan
	t.step(key, PlanningForgotten, func() {
		s.plan = nil
		s.forgetPlanFailureLocked()
		s.refused = false
	})
	return old
}

// StepLocked runs a plugin's change of the gang's state as the event ev, and checks the phase
// it moves the gang to against the table: for changes made on a facet the plugin reads and
// writes itself (a plan's promises kept, a round starting to wait). The lock must be held.
func (t *Tracker) StepLocked(key Key, ev Event, change func()) { t.step(key, ev, change) }
