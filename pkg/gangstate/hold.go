package gangstate

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// HoldPolicy says when a gang that cannot be placed holds a domain (GangArgs.hold).
type HoldPolicy struct {
	// Wait is how old a PodGroup must be before its gang holds (0: holds are off, unless a
	// PodGroup's hold-after annotation turns them on for its gang).
	Wait time.Duration
	// Timeout ends a hold that has not let its gang bind; the gang may hold again after Wait.
	Timeout time.Duration
	// MaxNodesPercent bounds the share of the cluster's nodes held together.
	MaxNodesPercent int32
}

// Why a hold ended: the values of the hypernode_holds_ended_total metric's reason label.
const (
	// HoldBound: the gang bound minMember members.
	HoldBound = "Bound"
	// HoldDeleted: the PodGroup was deleted.
	HoldDeleted = "Deleted"
	// HoldTimedOut: the hold did not let its gang bind within the policy's timeout.
	HoldTimedOut = "TimedOut"
	// HoldImpossible: no domain can host the gang even once every pod of its priority or
	// lower is gone.
	HoldImpossible = "Impossible"
	// HoldDisplaced: a gang that comes first in queue order took nodes of the hold, or needed
	// the share of the cluster it took.
	HoldDisplaced = "Displaced"
	// HoldMoved: the gang holds another domain now (pods of higher priority took room of the
	// old one, or another drains sooner).
	HoldMoved = "Moved"
	// HoldDisabled: the PodGroup's hold-after annotation turned holds off for the gang, or
	// holds were turned off.
	HoldDisabled = "Disabled"
	// HoldAbandoned: no member of the gang waits to be placed any more (a hold restored for a gang
	// whose members are gone).
	HoldAbandoned = "Abandoned"
	// HoldGated: Gang's PreEnqueue holds the gang's members back (its PodGroup became
	// invalid, or lost members below minMember): the gang cannot use the room.
	HoldGated = "Gated"
)

// HoldEndReasons lists the reasons a hold ends, for the metric's label values.
var HoldEndReasons = []string{HoldBound, HoldDeleted, HoldTimedOut, HoldImpossible, HoldDisplaced, HoldMoved, HoldDisabled, HoldAbandoned, HoldGated}

// Hold is a network domain held for a gang that waits for it to drain: the pods that come
// after the gang in queue order do not take the room the gang needs there. It is immutable
// once taken; a change takes a new one.
type Hold struct {
	Key Key
	// Domain is the HyperNode held, at Tier; "" for a gang without a hard constraint, which
	// holds nodes of the cluster.
	Domain string
	Tier   int
	// Need is the room the gang needs on each node held: the requests of the members it
	// places there. A nil list is the whole node: a hold restored from its record, until its
	// gang is evaluated again.
	Need map[string]v1.ResourceList
	// Precedence is the gang's place in queue order: the hold keeps the pods after it away.
	Precedence podgroup.Precedence
	// Since is when the gang began holding (kept across a change of the nodes held, and
	// restored from the record).
	Since time.Time
	// FreeNodes counts the nodes held that have room for their members now; InTheWay names
	// the pods that must still finish (at most a few; InTheWayCount counts them all).
	FreeNodes     int
	InTheWay      []string
	InTheWayCount int
	// Restored says the hold comes from its record, not evaluated by this process yet.
	Restored bool
}

// Place says which domain the hold is on: "spine-1 (tier 2)", or "12 nodes of the cluster".
func (h *Hold) Place() string {
	if h.Domain != "" {
		return fmt.Sprintf("%s (tier %d)", h.Domain, h.Tier)
	}
	return fmt.Sprintf("%d nodes of the cluster", len(h.Need))
}

// Message says what the hold waits for, in the gang's members' words.
func (h *Hold) Message() string {
	if h.Restored {
		return fmt.Sprintf("holding %s for this gang since %s (restored; its progress is counted at the gang's next attempt)",
			h.Place(), h.Since.UTC().Format(time.RFC3339))
	}
	msg := fmt.Sprintf("holding %s for this gang: %d/%d nodes free", h.Place(), h.FreeNodes, len(h.Need))
	if h.InTheWayCount > 0 {
		msg += fmt.Sprintf(", waiting for %d pods to finish: %s", h.InTheWayCount, strings.Join(h.InTheWay, ", "))
		if more := h.InTheWayCount - len(h.InTheWay); more > 0 {
			msg += fmt.Sprintf(", +%d more", more)
		}
	}
	return msg
}

// Nodes are the nodes held, sorted.
func (h *Hold) Nodes() []string {
	out := make([]string, 0, len(h.Need))
	for n := range h.Need {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Record is what the PodGroup's hold annotation records of the hold.
func (h *Hold) Record() *podgroup.HoldRecord {
	return &podgroup.HoldRecord{Domain: h.Domain, Tier: h.Tier, Nodes: h.Nodes(), Priority: h.Precedence.Priority(), Since: h.Since.UTC().Truncate(time.Second)}
}

// sharesNodes reports whether the holds hold a node in common.
func (h *Hold) sharesNodes(o *Hold) bool {
	a, b := h.Need, o.Need
	if len(a) > len(b) {
		a, b = b, a
	}
	for n := range a {
		if _, ok := b[n]; ok {
			return true
		}
	}
	return false
}

// HoldEnd is a hold that ended, and why.
type HoldEnd struct {
	Hold   *Hold
	Reason string
}

// SetHoldPolicy sets when gangs hold domains. Every profile's Gang sets it: two profiles that
// disagree fail the start instead of one overriding the other (the gang state serves every
// profile).
func (t *Tracker) SetHoldPolicy(p HoldPolicy) error {
	t.reg.Lock()
	defer t.reg.Unlock()
	if t.holdPolicySet && t.holdPolicy != p {
		return fmt.Errorf("two profiles set different hold args (%+v and %+v): the gang state serves every profile, so they must agree", t.holdPolicy, p)
	}
	t.holdPolicy, t.holdPolicySet = p, true
	return nil
}

// HoldPolicy returns when gangs hold domains.
func (t *Tracker) HoldPolicy() HoldPolicy {
	t.reg.RLock()
	defer t.reg.RUnlock()
	return t.holdPolicy
}

// HoldWait is how old the gang's PodGroup must be before the gang holds a domain, and whether
// it holds at all (its hold-after annotation, else the policy).
func (t *Tracker) HoldWait(info podgroup.Info) (time.Duration, bool) {
	if info.HoldAfter.Set {
		return info.HoldAfter.Wait, !info.HoldAfter.Never
	}
	t.reg.RLock()
	defer t.reg.RUnlock()
	return t.holdPolicy.Wait, t.holdPolicy.Wait > 0
}

// OnHoldEnd registers f to be told of every hold that ends (outside the registry's lock).
func (t *Tracker) OnHoldEnd(f func(HoldEnd)) {
	t.reg.Lock()
	defer t.reg.Unlock()
	t.holdEnders = append(t.holdEnders, f)
}

// Hold returns the gang's hold (nil: none).
func (t *Tracker) Hold(key Key) *Hold {
	t.reg.RLock()
	defer t.reg.RUnlock()
	if s := t.gangs[key]; s != nil {
		return s.hold
	}
	return nil
}

// HoldCooldown is until when the gang may not hold again (a hold of it timed out).
func (t *Tracker) HoldCooldown(key Key) time.Time {
	t.reg.RLock()
	defer t.reg.RUnlock()
	if s := t.gangs[key]; s != nil {
		return s.holdCooldown
	}
	return time.Time{}
}

// TakeHold makes h the gang's hold, replacing the one it had. Holds of gangs that come after
// it in queue order and share a node with it end (HoldDisplaced), and so do the latest ones
// while the holds take more than limit nodes together. It refuses, with the reason, a hold
// that shares a node with the hold of a gang that comes first (taken since the gang chose), or
// for which the gangs before it leave no room under the limit, unless no hold's gang comes
// before it (the first gang in queue order always holds). limit < 0: no limit.
func (t *Tracker) TakeHold(logger klog.Logger, h *Hold, limit int) (bool, string) {
	t.reg.Lock()
	s, d := t.gangLocked(h.Key)
	if s == nil || d == nil {
		t.reg.Unlock()
		return false, "the gang is gone"
	}
	earlier, later := t.splitHoldsLocked(h)
	for _, o := range earlier {
		if o.sharesNodes(h) {
			t.reg.Unlock()
			return false, fmt.Sprintf("gang %s, which comes first in queue order, holds nodes of %s now", o.Key, h.Place())
		}
	}
	if n := heldNodes(earlier, []*Hold{h}); limit >= 0 && n > limit && len(earlier) > 0 {
		t.reg.Unlock()
		return false, fmt.Sprintf("with the holds of the gangs before it, holds would take %d nodes, more than the %d that gangs may hold together (maxNodesPercent)", n, limit)
	}
	var ends []HoldEnd
	kept := append(append([]*Hold(nil), earlier...), h)
	// Latest first: a later hold that shares a node gives way, and so does the latest while
	// the holds take more than the limit.
	for i := len(later) - 1; i >= 0; i-- {
		o := later[i]
		if o.sharesNodes(h) || (limit >= 0 && heldNodes(kept, later[:i+1]) > limit) {
			ends = append(ends, HoldEnd{Hold: o, Reason: HoldDisplaced})
			t.dropHoldLocked(o.Key)
			continue
		}
		kept = append(kept, o)
	}
	old := s.hold
	if old != nil && old.Domain == h.Domain && (h.Domain != "" || old.sharesNodes(h)) {
		h.Since = old.Since // the same domain, still draining
	} else if old != nil {
		ends = append(ends, HoldEnd{Hold: old, Reason: HoldMoved})
	}
	t.step(h.Key, HoldTaken, func() { s.hold = h })
	t.indexHoldsLocked()
	t.reg.Unlock()
	t.holdsEnded(ends)
	if old == nil || old.Since != h.Since {
		logger.V(2).Info("Gang holds a domain", "podGroup", h.Key, "domain", h.Place(), "nodes", len(h.Need), "inTheWay", h.InTheWayCount)
	}
	return true, ""
}

// splitHoldsLocked returns the other gangs' holds that come before h's gang in queue order,
// and those after it, each in queue order.
func (t *Tracker) splitHoldsLocked(h *Hold) (earlier, later []*Hold) {
	for _, o := range t.holdsLocked() {
		switch {
		case o.Key == h.Key:
		case o.Precedence.Before(h.Precedence):
			earlier = append(earlier, o)
		default:
			later = append(later, o)
		}
	}
	return earlier, later
}

// heldNodes counts the nodes the holds of the lists hold together.
func heldNodes(lists ...[]*Hold) int {
	nodes := sets.New[string]()
	for _, holds := range lists {
		for _, h := range holds {
			for n := range h.Need {
				nodes.Insert(n)
			}
		}
	}
	return nodes.Len()
}

// ReleaseHold ends the gang's hold, for reason; it reports whether it had one.
func (t *Tracker) ReleaseHold(key Key, reason string) bool {
	t.reg.Lock()
	end := t.releaseHoldLocked(key, reason)
	t.reg.Unlock()
	if end == nil {
		return false
	}
	t.holdsEnded([]HoldEnd{*end})
	return true
}

// releaseHoldLocked ends the gang's hold (nil when it has none); tell the enders with
// holdsEnded once the lock is released. The registry's write lock must be held.
func (t *Tracker) releaseHoldLocked(key Key, reason string) *HoldEnd {
	s := t.gangs[key]
	if s == nil || s.hold == nil {
		return nil
	}
	h := s.hold
	if reason == HoldTimedOut {
		s.holdCooldown = t.now().Add(t.holdPolicy.Wait)
	}
	t.dropHoldLocked(key)
	return &HoldEnd{Hold: h, Reason: reason}
}

// dropHoldLocked clears the gang's hold and re-indexes the holds.
func (t *Tracker) dropHoldLocked(key Key) {
	s := t.gangs[key]
	t.step(key, HoldReleased, func() { s.hold = nil })
	t.indexHoldsLocked()
}

// holdsEnded tells the enders of the holds that ended. No lock may be held.
func (t *Tracker) holdsEnded(ends []HoldEnd) {
	if len(ends) == 0 {
		return
	}
	t.reg.RLock()
	enders := t.holdEnders
	t.reg.RUnlock()
	for _, e := range ends {
		for _, f := range enders {
			f(e)
		}
	}
}

// afterHoldEnd is the outcome After that tells the enders of end (nil: none).
func (t *Tracker) afterHoldEnd(end *HoldEnd, after func()) func() {
	if end == nil {
		return after
	}
	return func() {
		if after != nil {
			after()
		}
		t.holdsEnded([]HoldEnd{*end})
	}
}

// StaleHolds returns the holds to end at now, with the reason: those older than the policy's
// timeout, those of gangs with no member waiting, pending or reserved (a hold restored for a
// gang whose members are gone: nothing would end it otherwise), and those of gangs whose
// members PreEnqueue holds back.
func (t *Tracker) StaleHolds(now time.Time) []HoldEnd {
	t.reg.RLock()
	defer t.reg.RUnlock()
	return t.staleHoldsLocked(now)
}

// EndStaleHolds ends the holds StaleHolds returns, each only while it is the gang's hold (one
// taken since, by a move, stays), and tells the enders. It returns the holds ended.
func (t *Tracker) EndStaleHolds(now time.Time) []HoldEnd {
	t.reg.Lock()
	var ended []HoldEnd
	for _, e := range t.staleHoldsLocked(now) {
		if s := t.gangs[e.Hold.Key]; s == nil || s.hold != e.Hold {
			continue
		}
		if end := t.releaseHoldLocked(e.Hold.Key, e.Reason); end != nil {
			ended = append(ended, *end)
		}
	}
	t.reg.Unlock()
	t.holdsEnded(ended)
	return ended
}

func (t *Tracker) staleHoldsLocked(now time.Time) []HoldEnd {
	var out []HoldEnd
	for _, h := range t.holdsLocked() {
		// Members reserved and not bound yet are on their way: not abandoned.
		waiting, gated := false, false
		if d := t.reg.GroupLocked(h.Key); d != nil {
			info := d.InfoLocked()
			waiting = info.Members > info.Bound
			gated = gatedLocked(d) != ""
		}
		switch {
		case !waiting:
			out = append(out, HoldEnd{Hold: h, Reason: HoldAbandoned})
		case gated:
			out = append(out, HoldEnd{Hold: h, Reason: HoldGated})
		case t.holdPolicy.Timeout > 0 && now.Sub(h.Since) > t.holdPolicy.Timeout:
			out = append(out, HoldEnd{Hold: h, Reason: HoldTimedOut})
		}
	}
	return out
}

// holdsLocked lists every hold. The registry's lock must be held.
func (t *Tracker) holdsLocked() []*Hold {
	if ix := t.holdIndex.Load(); ix != nil {
		return append([]*Hold(nil), ix.holds...)
	}
	return nil
}
