package podgroup

import v1 "k8s.io/api/core/v1"

// Why Gang's PreEnqueue holds a gang's members back, in the order it checks. They are the
// values of the hypernode_gangs_gated metric's reason label, and the Event reasons where
// there is an Event.
const (
	GatedPodGroupMissing       = "PodGroupMissing"
	GatedInvalidSubGroupPolicy = "InvalidSubGroupPolicy"
	GatedInvalidSubGroupMember = "InvalidSubGroupMember"
	GatedWaitingForMembers     = "WaitingForMembers"
)

// GateReason is why Gang's PreEnqueue holds pod, a member of the group info describes, back
// ("" when it lets it in): the one rule that PreEnqueue, Gang's hints and GatedGroups share.
func GateReason(info Info, pod *v1.Pod) string {
	switch {
	case info.PodGroup == nil:
		return GatedPodGroupMissing
	case info.SubGroupErr != nil:
		return GatedInvalidSubGroupPolicy
	case SubGroupMembershipProblem(info.SubGroupPolicies, pod) != "":
		return GatedInvalidSubGroupMember
	case info.Members < info.MinMember():
		return GatedWaitingForMembers
	}
	return ""
}

// GatedGroups counts the groups that have pending members (neither bound nor reserved) which
// Gang's PreEnqueue holds back, by the first reason that holds one of them back. Every reason
// is in the result, zero or not. It costs O(pending members) and is meant for a metrics
// scrape, not for the scheduling path.
func (r *Registry) GatedGroups() map[string]int {
	out := map[string]int{GatedPodGroupMissing: 0, GatedInvalidSubGroupPolicy: 0, GatedInvalidSubGroupMember: 0, GatedWaitingForMembers: 0}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, g := range r.groups {
		if reason := g.gatedLocked(); reason != "" {
			out[reason]++
		}
	}
	return out
}

// gatedLocked returns why PreEnqueue holds back the group's pending members ("" if it does
// not, or if none is pending). r.mu must be held.
func (g *group) gatedLocked() string {
	var pending []*v1.Pod
	for uid, p := range g.members {
		if _, reserved := g.assumed[uid]; !g.bound.Has(uid) && !reserved {
			pending = append(pending, p)
		}
	}
	if len(pending) == 0 {
		return ""
	}
	info := g.infoLocked()
	// A member's own problem comes before the count, which is the same for every member.
	reason := ""
	for _, p := range pending {
		if reason = GateReason(info, p); reason != "" && reason != GatedWaitingForMembers {
			return reason
		}
	}
	return reason
}
