package gangstate

import (
	"context"
	"sort"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// Preemption is one gang preemption (GangPreemption) while it is under way: its victims
// terminate (Waiting), then, once every one was seen deleted, the scheduler's cache may
// still hold some (Draining, Cached). A gang has at most one: a new one ends the one before.
type Preemption struct {
	// Domain is the HyperNode the victims were chosen in (another word when the whole
	// cluster was the domain).
	Domain  string
	Victims []*v1.Pod
	// Members are the nominated members, and Nodes their nodes by pod UID.
	Members []*v1.Pod
	Nodes   map[types.UID]string
	// Waiting are the victims not seen deleted yet; Deadline ends the wait when they outlive
	// their grace period: Limit after the decision, and again after the evictions were sent.
	Waiting  sets.Set[types.UID]
	Deadline *time.Timer
	Limit    time.Duration
	// Draining says every victim was seen deleted; Cached are those the scheduler's cache may
	// still hold (a snapshot without one, or its deletion event, takes it out), and
	// DrainDeadline ends the drain if the cache never seems to drop a victim.
	Draining      bool
	Cached        sets.Set[types.UID]
	DrainDeadline *time.Timer
	// Resumed says the preemption was rebuilt after a restart from the members' nominations:
	// its victims are the pods terminating after a preemption on those nodes, whoever
	// preempted.
	Resumed bool
	// StopEvicting stops sending the preemption's evictions when it ends first.
	StopEvicting context.CancelFunc
}

// PreemptedRoomFor bounds how long the planner prefers the room a gang's ended preemption
// made (View.Preempted): long enough for the plans after the drain, not so long that a gang
// placed nowhere since steers its plans by an old decision.
const PreemptedRoomFor = 2 * time.Minute

// PreemptedRoom is the room a gang's ended preemption made: the domain its victims were
// chosen in and the nodes it nominated the members on (sorted).
type PreemptedRoom struct {
	Domain string
	Nodes  []string
}

// roomOf is the room the preemption made.
func roomOf(p *Preemption) *PreemptedRoom {
	nodes := sets.New[string]()
	for _, n := range p.Nodes {
		nodes.Insert(n)
	}
	return &PreemptedRoom{Domain: p.Domain, Nodes: sets.List(nodes)}
}

// preemptionCounts counts the gangs whose preemption is under way, so that a pod of a gang
// without one asks without the lock.
type preemptionCounts struct{ underWay atomic.Int32 }

// PreemptionsUnderWay reports whether any gang's preemption is under way. No lock.
func (t *Tracker) PreemptionsUnderWay() bool { return t.preemptions.underWay.Load() > 0 }

// PreemptionLocked returns the gang's preemption while it is under way: its victims
// terminate, or (draining) they were seen deleted but the scheduler's cache may still hold
// some. The lock must be held.
func (t *Tracker) PreemptionLocked(key Key) (p *Preemption, draining bool) {
	s := t.gangs[key]
	if s == nil || s.preemption == nil {
		return nil, false
	}
	p = s.preemption
	if p.Draining {
		return p, true
	}
	if p.Waiting.Len() > 0 {
		return p, false
	}
	return nil, false
}

// WaitingPreemptionLocked returns the gang's preemption while its victims terminate (nil:
// none, or it drains). The lock must be held.
func (t *Tracker) WaitingPreemptionLocked(key Key) *Preemption {
	if s := t.gangs[key]; s != nil && s.preemption != nil && !s.preemption.Draining {
		return s.preemption
	}
	return nil
}

// StartPreemptionLocked makes p the gang's preemption, ending the one before (which it
// returns), and counts its victims as waited for. The caller arms p's Deadline before it
// releases the lock. The lock must be held.
func (t *Tracker) StartPreemptionLocked(key Key, p *Preemption) (old *Preemption) {
	s, _ := t.gangLocked(key)
	if s == nil {
		return nil
	}
	old = s.preemption
	t.step(key, PreemptionStarted, func() {
		if old != nil {
			t.endPreemptionLocked(key, s, old)
		}
		s.preemption = p
	})
	t.preemptions.underWay.Add(1)
	p.Waiting = sets.New[types.UID]()
	for _, v := range p.Victims {
		p.Waiting.Insert(v.UID)
		if t.victimOf[v.UID] == nil {
			t.victimOf[v.UID] = sets.New[Key]()
		}
		t.victimOf[v.UID].Insert(key)
	}
	return old
}

// EndPreemptionLocked ends the gang's preemption p if it is still the gang's: its deadlines
// stop, its evictions stop being sent, and its victims are no longer waited for. It reports
// whether it ended it. The lock must be held.
func (t *Tracker) EndPreemptionLocked(key Key, p *Preemption) bool {
	s := t.gangs[key]
	if p == nil || s == nil || s.preemption != p {
		return false
	}
	t.step(key, PreemptionEnded, func() { t.endPreemptionLocked(key, s, p) })
	return true
}

func (t *Tracker) endPreemptionLocked(key Key, s *Gang, p *Preemption) {
	s.preemption = nil
	// The room it made is the gang's to use: the next plan tries it first, or the evictions
	// would be wasted when room frees elsewhere meanwhile.
	s.preempted, s.preemptedUntil = roomOf(p), t.now().Add(PreemptedRoomFor)
	// The failed plan that led to the preemption no longer describes the cluster, and its
	// back-off must not answer the members while the room is open: their failed cycles would
	// drop their nominations, and pods of lower priority would take the room.
	s.forgetPlanFailureLocked()
	t.preemptions.underWay.Add(-1)
	if p.Deadline != nil {
		p.Deadline.Stop()
	}
	if p.DrainDeadline != nil {
		p.DrainDeadline.Stop()
	}
	if p.StopEvicting != nil {
		p.StopEvicting()
	}
	t.forgetVictimsLocked(key, p)
}

func (t *Tracker) forgetVictimsLocked(key Key, p *Preemption) {
	for _, v := range p.Victims {
		if keys := t.victimOf[v.UID]; keys != nil {
			keys.Delete(key)
			if keys.Len() == 0 {
				delete(t.victimOf, v.UID)
			}
		}
	}
}

// VictimGoneLocked counts down every preemption that waited for the deleted pod (two gangs'
// preemptions may share a victim, chosen from snapshots taken before one saw the other's
// eviction) and makes each one with no victim left drain: until proved otherwise, the
// scheduler's cache may hold each of its victims. It returns those gangs; the caller arms
// their DrainDeadline before it releases the lock. The lock must be held.
func (t *Tracker) VictimGoneLocked(uid types.UID) map[Key]*Preemption {
	keys := t.victimOf[uid]
	delete(t.victimOf, uid)
	var drained map[Key]*Preemption
	for key := range keys {
		s := t.gangs[key]
		if s == nil || s.preemption == nil || s.preemption.Draining || !s.preemption.Waiting.Has(uid) {
			continue
		}
		p := s.preemption
		p.Waiting.Delete(uid)
		if p.Waiting.Len() > 0 {
			continue
		}
		if p.Deadline != nil {
			p.Deadline.Stop()
		}
		if p.StopEvicting != nil {
			p.StopEvicting()
		}
		t.forgetVictimsLocked(key, p)
		p.Draining = true
		p.Cached = sets.New[types.UID]()
		for _, v := range p.Victims {
			p.Cached.Insert(v.UID)
		}
		if drained == nil {
			drained = map[Key]*Preemption{}
		}
		drained[key] = p
	}
	return drained
}

// StopDrainingLocked ends the gang's preemption if it drains (its victims left the scheduler's
// cache, or the drain's time limit passed); it reports whether it did. The lock must be held.
func (t *Tracker) StopDrainingLocked(key Key) bool {
	s := t.gangs[key]
	if s == nil || s.preemption == nil || !s.preemption.Draining {
		return false
	}
	t.step(key, PreemptionEnded, func() { t.endPreemptionLocked(key, s, s.preemption) })
	return true
}

// MarkResumedLocked records that GangPreemption looked for a preemption of the gang to resume
// after a restart, and reports whether it had before (once per gang and process). The lock
// must be held.
func (t *Tracker) MarkResumedLocked(key Key) (before bool) {
	s, _ := t.gangLocked(key)
	if s == nil {
		return true
	}
	before, s.resumed = s.resumed, true
	return before
}

// ForgetPreemptionLocked ends the gang's preemption (its PodGroup was deleted) and forgets
// that it was looked at for resuming; it returns the preemption it ended (nil: none). The
// lock must be held.
func (t *Tracker) ForgetPreemptionLocked(key Key) *Preemption {
	s := t.gangs[key]
	if s == nil {
		return nil
	}
	s.resumed = false
	p := s.preemption
	if p == nil {
		return nil
	}
	t.step(key, PreemptionEnded, func() { t.endPreemptionLocked(key, s, p) })
	s.preempted = nil
	return p
}

// Preempting reports whether a preemption for the gang is under way. Gang's waiting members
// then keep their nodes past the gang's schedule timeout: rejecting them would hand the nodes
// they hold to pods of lower priority, and the gang would have to evict those too.
func (t *Tracker) Preempting(key Key) bool {
	t.reg.RLock()
	defer t.reg.RUnlock()
	return t.PreemptingLocked(key)
}

// PreemptingLocked is Preempting with the lock held.
func (t *Tracker) PreemptingLocked(key Key) bool {
	p, _ := t.PreemptionLocked(key)
	return p != nil
}

// NominationHeld reports the node a preemption under way nominated the pod on. Another plugin
// that writes status.nominatedNodeName (NetworkTopologyAware's plans, from their own writer)
// must then leave the field alone: its write may land after the preemption's, and
// kube-scheduler drops a nomination whose field an update clears.
func (t *Tracker) NominationHeld(pod *v1.Pod) (node string, held bool) {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return "", false
	}
	t.reg.RLock()
	defer t.reg.RUnlock()
	p, _ := t.PreemptionLocked(key)
	if p == nil {
		return "", false
	}
	node = p.Nodes[pod.UID]
	return node, node != ""
}

// OnPreemptionEnd registers f to be called (outside the lock) when a preemption for a gang
// ends: its victims are gone from the scheduler's cache, or it was given up. Register before
// the informers start.
func (t *Tracker) OnPreemptionEnd(f func(Key)) {
	t.reg.Lock()
	defer t.reg.Unlock()
	t.preemptionEnders = append(t.preemptionEnders, f)
}

// PreemptionEnded tells the listeners that the gang's preemption ended. Call it without the
// lock.
func (t *Tracker) PreemptionEnded(key Key) {
	t.reg.RLock()
	enders := t.preemptionEnders
	t.reg.RUnlock()
	for _, f := range enders {
		f(key)
	}
}

// PreemptionsLeft lists the gangs whose preemption waits for its victims and those whose
// preemption drains, by key, and counts the victims waited for: what a test checks is left
// when nothing should be.
func (t *Tracker) PreemptionsLeft() (waiting, draining []Key, victims int) {
	t.reg.RLock()
	defer t.reg.RUnlock()
	for key, s := range t.gangs {
		switch p := s.preemption; {
		case p == nil:
		case p.Draining:
			draining = append(draining, key)
		default:
			waiting = append(waiting, key)
		}
	}
	sortKeys(waiting)
	sortKeys(draining)
	return waiting, draining, len(t.victimOf)
}

func sortKeys(keys []Key) {
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
}
