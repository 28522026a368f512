package gangstate

import (
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// A hold outlives its process on the PodGroup (podgroup.HoldRecord): restored once when a
// process begins to schedule, and put right by the sweep when it is not the gang's hold.

// RestoreHolds continues the holds the PodGroups record, once per process, when it begins to
// schedule (a restart, or a new leader: a standby never schedules). The whole of each node a
// record names is held until the gang is evaluated again. A record is trusted no further than
// the scheduler wrote it: the priority is the gang's pending members' lowest (the record's only
// when none is known), a start in the future counts from now, and a gang that bound minMember
// members, is held back by PreEnqueue, or turns holds off does not hold (its record goes at the
// next sweep). Records are restored in queue order; one that shares a node with an earlier
// one is not. It returns how many were restored.
func (t *Tracker) RestoreHolds(now time.Time) int {
	type record struct {
		key  Key
		hold *Hold
	}
	t.reg.Lock()
	var records []record
	t.reg.EachGroupLocked(func(key Key, d *podgroup.Group) {
		if h := restorableLocked(key, d, now); h != nil {
			records = append(records, record{key, h})
		}
	})
	sort.Slice(records, func(i, j int) bool { return records[i].hold.Precedence.Before(records[j].hold.Precedence) })
	restored := 0
	for _, r := range records {
		s, _ := t.gangLocked(r.key)
		if s == nil || s.hold != nil || t.sharesHeldNodesLocked(r.hold) {
			continue
		}
		t.step(r.key, HoldTaken, func() { s.hold = r.hold })
		t.indexHoldsLocked()
		restored++
		klog.Background().V(2).Info("Gang hold restored from its PodGroup", "podGroup", r.key, "domain", r.hold.Place(), "since", r.hold.Since)
	}
	t.reg.Unlock()
	return restored
}

// restorableLocked is the hold the group's record describes, or nil when the gang may not
// hold. The registry's lock must be held.
func restorableLocked(key Key, d *podgroup.Group, now time.Time) *Hold {
	info := d.InfoLocked()
	r := info.Hold
	if r == nil || info.PodGroup == nil || info.Bound >= info.MinMember() || (info.HoldAfter.Set && info.HoldAfter.Never) || gatedLocked(d) != "" {
		return nil
	}
	priority, known := r.Priority, false
	d.EachPendingLocked(func(_ types.UID, p *v1.Pod) {
		if pp := corev1helpers.PodPriority(p); !known || pp < priority {
			priority, known = pp, true
		}
	})
	need := make(map[string]v1.ResourceList, len(r.Nodes))
	for _, n := range r.Nodes {
		need[n] = nil
	}
	since := r.Since
	if since.After(now) {
		since = now
	}
	return &Hold{Key: key, Domain: r.Domain, Tier: r.Tier, Need: need, Since: since, Restored: true,
		Precedence: podgroup.GangPrecedence(key, priority, info.PodGroup.CreationTimestamp.Time)}
}

// sharesHeldNodesLocked says whether h shares a node with a hold. The registry's lock must
// be held.
func (t *Tracker) sharesHeldNodesLocked(h *Hold) bool {
	for _, o := range t.holdsLocked() {
		if o.sharesNodes(h) {
			return true
		}
	}
	return false
}

// HoldRecordsOutOfStep returns the gangs whose PodGroup's hold record, as the informer last
// delivered it, is not their hold's: one this process did not write (a user's, or one left
// by an earlier leader for a gang that no longer holds), or a write not seen yet.
func (t *Tracker) HoldRecordsOutOfStep() []Key {
	t.reg.RLock()
	defer t.reg.RUnlock()
	var out []Key
	t.reg.EachGroupLocked(func(key Key, d *podgroup.Group) {
		pg := d.PodGroupLocked()
		if pg == nil {
			return
		}
		recorded, has := pg.Annotations[podgroup.HoldAnnotation]
		want := ""
		if s := t.gangs[key]; s != nil && s.hold != nil {
			want = s.hold.Record().Encode()
		}
		if has != (want != "") || recorded != want {
			out = append(out, key)
		}
	})
	return out
}
