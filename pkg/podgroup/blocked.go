package podgroup

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
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

// EventGangBlocked is the reason of the PodGroup Event that reports a blocker.
const EventGangBlocked = "GangBlocked"

// Message says why a blocked gang's members wait.
func (b *Blocker) Message(key Key) string {
	return fmt.Sprintf("gang %s is blocked: its member %s fits no node (%s); the gang is retried when that member or the nodes change", key, b.Name, b.Reason)
}

// SetBlocked records that a member of the gang fits no node. It returns false when the gang
// was already blocked by the same member for the same reason (nothing new to report).
func (r *Registry) SetBlocked(key Key, b Blocker) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.groups[key]
	if g == nil || g.members[b.UID] == nil {
		return false
	}
	if g.blocker != nil && *g.blocker == b {
		return false
	}
	g.blocker, g.formerBlocker = &b, ""
	return true
}

// unblockLocked clears a gang's blocker; it returns whether there was one.
func (g *group) unblockLocked() bool {
	was := g.blocker != nil
	g.blocker = nil
	return was
}

// blockerChangedLocked reports whether an update of a member can make it fit somewhere.
func (g *group) blockerChangedLocked(old, pod *Member) bool {
	return g.blocker != nil && g.blocker.UID == pod.Pod.UID &&
		(!equality.Semantic.DeepEqual(old.Pod.Spec, pod.Pod.Spec) || !equality.Semantic.DeepEqual(old.Pod.Labels, pod.Pod.Labels))
}

// unblockAllLocked clears every gang's blocker: a node was added or changed in a way that can
// make a blocker fit. The members held for it stay held until it reserves (its Permit
// activates them) or fails again; if it goes instead, they are activated (formerBlocker).
// r.mu must be held.
func (r *Registry) unblockAllLocked() {
	for _, g := range r.groups {
		if g.blocker != nil {
			g.formerBlocker, g.blocker = g.blocker.UID, nil
		}
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
