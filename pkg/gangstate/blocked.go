package gangstate

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	pluginnames "k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// Blocker is a member that fits no node of the cluster (a node selector no node matches, a
// taint nobody tolerates...). While a gang has one, its other members are not scheduled: a
// round could never complete, and reserving them only to reject them again would loop. The
// blocker itself keeps being retried by kube-scheduler's own hints (node added or relabelled).
type Blocker struct {
	UID  types.UID
	Name string
	// Reason says why it fits no node, e.g. "8 node(s) didn't match Pod's node affinity".
	Reason string
}

// RefusedForGood reports whether a node's Filter status refuses a pod for a reason that only
// a change of the node or of the pod can lift: unresolvable, and not required pod affinity,
// which a pod that arrives meets (a sibling not placed yet, say). A member every node refuses
// so fits no node.
func RefusedForGood(st *fwk.Status) bool {
	return st.Code() == fwk.UnschedulableAndUnresolvable && st.Plugin() != pluginnames.InterPodAffinity
}

// EventGangBlocked is the reason of the PodGroup Event that reports a blocker.
const EventGangBlocked = "GangBlocked"

// Message says why a blocked gang's members wait.
func (b *Blocker) Message(key Key) string {
	return fmt.Sprintf("gang %s is blocked: its member %s fits no node (%s); the gang is retried when that member or the nodes change", key, b.Name, b.Reason)
}

// Blocker returns the gang's blocker, nil when it has none.
func (t *Tracker) Blocker(key Key) *Blocker {
	t.reg.RLock()
	defer t.reg.RUnlock()
	if s, _ := t.peekLocked(key); s != nil {
		return s.blocker
	}
	return nil
}

// SetBlocked records that a member of the gang fits no node, and with it its pending
// siblings of the same shape when it has no volume claims (a claim of its own, a zonal
// volume say, may be what keeps it out). The gang is blocked by it only when the job cannot
// do without the members known to fit nowhere: fewer than minMember would remain, or fewer
// complete sub-groups than a policy's minSubGroups. blocked says whether the gang is blocked
// by b now; reported is false when it already was, for the same reason (nothing new to
// report).
func (t *Tracker) SetBlocked(key Key, b Blocker) (blocked, reported bool) {
	t.reg.Lock()
	blocked, reported, freed := t.setBlockedLocked(key, b)
	t.reg.Unlock()
	if freed {
		t.reg.Notify(key, false)
	}
	return blocked, reported
}

// setBlockedLocked is SetBlocked under the lock; freed says the members held for a former
// blocker wait for nothing now (the caller notifies the gang's listeners).
func (t *Tracker) setBlockedLocked(key Key, b Blocker) (blocked, reported, freed bool) {
	s, d := t.gangLocked(key)
	if s == nil || d.MemberLocked(b.UID) == nil {
		return false, false, false
	}
	if s.blocker != nil && *s.blocker == b {
		return true, false, false
	}
	t.step(key, BlockerFound, func() {
		s.markFitNowhereLocked(d, d.MemberLocked(b.UID))
		if d.CanDoWithoutLocked(s.fitNowhere) {
			// A blocker a node change cleared that fails again alone: the members held for it
			// wait for nothing now (nor for a blocker the job no longer needs).
			freed = s.formerBlocker == b.UID || s.blocker != nil
			s.formerBlocker, s.blocker = "", nil
			return
		}
		s.blocker, s.formerBlocker = &b, ""
		blocked = true
	})
	return blocked, blocked, freed
}

// markFitNowhereLocked adds pod, and its pending siblings of the same shape unless it has
// claims, to the members that fit no node; later members of that shape join at MemberSet.
// The pass over the members runs once per shape (fitNowhereShapes).
func (s *Gang) markFitNowhereLocked(d *podgroup.Group, pod *v1.Pod) {
	if s.fitNowhere == nil {
		s.fitNowhere = sets.New[types.UID]()
	}
	s.fitNowhere.Insert(pod.UID)
	if hasClaims(pod) {
		return
	}
	sig := d.SignatureLocked(pod)
	if s.fitNowhereShapes.Has(sig) {
		return
	}
	if s.fitNowhereShapes == nil {
		s.fitNowhereShapes = sets.New[string]()
	}
	s.fitNowhereShapes.Insert(sig)
	d.EachPendingLocked(func(uid types.UID, m *v1.Pod) {
		if !s.fitNowhere.Has(uid) && !hasClaims(m) && d.SignatureLocked(m) == sig {
			s.fitNowhere.Insert(uid)
		}
	})
}

// shapeFitsLocked forgets that pod's shape fits nowhere: one of its members reserved a node.
func (s *Gang) shapeFitsLocked(d *podgroup.Group, pod *v1.Pod) {
	s.fitNowhere.Delete(pod.UID)
	if hasClaims(pod) || s.fitNowhereShapes.Len() == 0 {
		return
	}
	sig := d.SignatureLocked(pod)
	if !s.fitNowhereShapes.Has(sig) {
		return
	}
	s.fitNowhereShapes.Delete(sig)
	for uid := range s.fitNowhere {
		if m := d.MemberLocked(uid); m != nil && !hasClaims(m) && d.SignatureLocked(m) == sig {
			s.fitNowhere.Delete(uid)
		}
	}
}

// newMemberFitsNowhereLocked marks a new pending member whose shape is known to fit no node.
func (s *Gang) newMemberFitsNowhereLocked(d *podgroup.Group, pod *v1.Pod) {
	if s.fitNowhereShapes.Len() > 0 && pod.Spec.NodeName == "" && !hasClaims(pod) && s.fitNowhereShapes.Has(d.SignatureLocked(pod)) {
		s.fitNowhere.Insert(pod.UID)
	}
}

// hasClaims reports whether the pod has claims of its own: a persistent volume claim (its
// own or generated) or a DRA resource claim, which siblings of its shape do not share.
func hasClaims(pod *v1.Pod) bool {
	if len(pod.Spec.ResourceClaims) > 0 {
		return true
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return true
		}
	}
	return false
}

// recheckBlockLocked lifts the block when the job can do without the members known to fit
// nowhere after all (a member added, one that may fit again); it reports whether it did.
func (s *Gang) recheckBlockLocked(d *podgroup.Group) bool {
	if s.blocker == nil || !d.CanDoWithoutLocked(s.fitNowhere) {
		return false
	}
	s.blocker = nil
	return true
}

// unblockLocked clears a gang's blocker and what it knows of members that fit nowhere; it
// returns whether there was a blocker.
func (s *Gang) unblockLocked() bool {
	was := s.blocker != nil
	s.blocker, s.fitNowhere, s.fitNowhereShapes = nil, nil, nil
	return was
}

// blockerChangedLocked reports whether an update of the blocker can make it fit somewhere.
func (s *Gang) blockerChangedLocked(old, pod *v1.Pod) bool {
	return s.blocker != nil && s.blocker.UID == pod.UID && specOrLabelsChanged(old, pod)
}

// specOrLabelsChanged reports an update of a pod that can make it fit where it did not.
func specOrLabelsChanged(old, pod *v1.Pod) bool {
	return !equality.Semantic.DeepEqual(old.Spec, pod.Spec) || !equality.Semantic.DeepEqual(old.Labels, pod.Labels)
}

// SummarizeReasons lists Filter failure reasons with their counts, the most frequent first, at
// most shown of them, the way kube-scheduler words its own message: "3 Insufficient cpu, 1
// node(s) had untolerated taint(s)".
func SummarizeReasons(counts map[string]int, shown int) string {
	reasons := make([]string, 0, len(counts))
	for r := range counts {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if counts[reasons[i]] != counts[reasons[j]] {
			return counts[reasons[i]] > counts[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	parts := make([]string, 0, shown)
	for _, r := range reasons[:min(shown, len(reasons))] {
		parts = append(parts, fmt.Sprintf("%d %s", counts[r], r))
	}
	return strings.Join(parts, ", ")
}
