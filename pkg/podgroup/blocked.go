package podgroup

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

// SetBlocked records that a member of the gang fits no node, and with it its pending
// siblings of the same shape when it has no volume claims (a claim of its own, a zonal
// volume say, may be what keeps it out). The gang is blocked by it only when the job cannot
// do without the members known to fit nowhere: fewer than minMember would remain, or fewer
// complete sub-groups than a policy's minSubGroups. blocked says whether the gang is blocked
// by b now; reported is false when it already was, for the same reason (nothing new to
// report).
func (r *Registry) SetBlocked(key Key, b Blocker) (blocked, reported bool) {
	r.mu.Lock()
	g := r.groups[key]
	if g == nil || g.members[b.UID] == nil {
		r.mu.Unlock()
		return false, false
	}
	if g.blocker != nil && *g.blocker == b {
		r.mu.Unlock()
		return true, false
	}
	g.markFitNowhereLocked(g.members[b.UID])
	if g.canDoWithoutLocked(g.fitNowhere) {
		// A blocker a node change cleared that fails again alone: the members held for it
		// wait for nothing now (nor for a blocker the job no longer needs).
		freed := g.formerBlocker == b.UID || g.blocker != nil
		g.formerBlocker, g.blocker = "", nil
		r.mu.Unlock()
		if freed {
			r.notify(key, false)
		}
		return false, false
	}
	g.blocker, g.formerBlocker = &b, ""
	r.mu.Unlock()
	return true, true
}

// markFitNowhereLocked adds pod, and its pending siblings of the same shape unless it has
// claims, to the members that fit no node; later members of that shape join at SetPod. The
// pass over the members runs once per shape (fitNowhereShapes). r.mu must be held.
func (g *group) markFitNowhereLocked(pod *v1.Pod) {
	if g.fitNowhere == nil {
		g.fitNowhere = sets.New[types.UID]()
	}
	g.fitNowhere.Insert(pod.UID)
	if hasClaims(pod) {
		return
	}
	sig := g.signatureLocked(pod)
	if g.fitNowhereShapes.Has(sig) {
		return
	}
	if g.fitNowhereShapes == nil {
		g.fitNowhereShapes = sets.New[string]()
	}
	g.fitNowhereShapes.Insert(sig)
	for uid, m := range g.members {
		if g.pendingLocked(uid) && !g.fitNowhere.Has(uid) && !hasClaims(m) && g.signatureLocked(m) == sig {
			g.fitNowhere.Insert(uid)
		}
	}
}

// shapeFitsLocked forgets that pod's shape fits nowhere: one of its members reserved a node.
// r.mu must be held.
func (g *group) shapeFitsLocked(pod *v1.Pod) {
	g.fitNowhere.Delete(pod.UID)
	if hasClaims(pod) || g.fitNowhereShapes.Len() == 0 {
		return
	}
	sig := g.signatureLocked(pod)
	if !g.fitNowhereShapes.Has(sig) {
		return
	}
	g.fitNowhereShapes.Delete(sig)
	for uid := range g.fitNowhere {
		if m := g.members[uid]; m != nil && !hasClaims(m) && g.signatureLocked(m) == sig {
			g.fitNowhere.Delete(uid)
		}
	}
}

// newMemberFitsNowhereLocked marks a new pending member whose shape is known to fit no node.
// r.mu must be held.
func (g *group) newMemberFitsNowhereLocked(pod *v1.Pod) {
	if g.fitNowhereShapes.Len() > 0 && pod.Spec.NodeName == "" && !hasClaims(pod) && g.fitNowhereShapes.Has(g.signatureLocked(pod)) {
		g.fitNowhere.Insert(pod.UID)
	}
}

// memberSignature is a member's shape signature and the object it was computed from.
type memberSignature struct {
	pod *v1.Pod
	sig string
}

// signatureLocked is signatureOf(pod), computed once per member object: an update brings a
// new object and so a new signature. r.mu must be held (for writing).
func (g *group) signatureLocked(pod *v1.Pod) string {
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
// r.mu must be held.
func (g *group) recheckBlockLocked() bool {
	if g.blocker == nil || !g.canDoWithoutLocked(g.fitNowhere) {
		return false
	}
	g.blocker = nil
	return true
}

// canDoWithoutLocked reports whether the job can still complete without the members out:
// minMember of the others, and for each sub-group policy minSubGroups sub-groups that keep
// subGroupSize members. O(sub-groups + out). r.mu must be held.
func (g *group) canDoWithoutLocked(out sets.Set[types.UID]) bool {
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

// unblockLocked clears a gang's blocker and what it knows of members that fit nowhere; it
// returns whether there was a blocker.
func (g *group) unblockLocked() bool {
	was := g.blocker != nil
	g.blocker, g.fitNowhere, g.fitNowhereShapes = nil, nil, nil
	return was
}

// blockerChangedLocked reports whether an update of the blocker can make it fit somewhere.
func (g *group) blockerChangedLocked(old, pod *Member) bool {
	return g.blocker != nil && g.blocker.UID == pod.Pod.UID && specOrLabelsChanged(old.Pod, pod.Pod)
}

// specOrLabelsChanged reports an update of a pod that can make it fit where it did not.
func specOrLabelsChanged(old, pod *v1.Pod) bool {
	return !equality.Semantic.DeepEqual(old.Spec, pod.Spec) || !equality.Semantic.DeepEqual(old.Labels, pod.Labels)
}

// unblockAllLocked clears every gang's blocker: a node was added or changed in a way that can
// make a blocker fit. The members held for it stay held until it reserves or goes (then they
// are activated: formerBlocker) or fails again.
// r.mu must be held.
func (r *Registry) unblockAllLocked() {
	for _, g := range r.groups {
		if g.blocker != nil {
			g.formerBlocker = g.blocker.UID
		}
		g.blocker, g.fitNowhere, g.fitNowhereShapes = nil, nil, nil
	}
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
