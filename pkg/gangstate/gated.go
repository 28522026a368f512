package gangstate

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// Why Gang's PreEnqueue holds a gang's members back, in the order it checks. They are the
// values of the hypernode_gangs_gated metric's reason label, and the Event reasons where
// there is an Event.
const (
	// GatedInTwoPodGroups: the pod also names a native scheduling.k8s.io pod group
	// (spec.schedulingGroup); kube-scheduler's own pod-group cycle would take it too.
	GatedInTwoPodGroups        = "InTwoPodGroups"
	GatedPodGroupMissing       = "PodGroupMissing"
	GatedInvalidSubGroupPolicy = "InvalidSubGroupPolicy"
	GatedInvalidSubGroupMember = "InvalidSubGroupMember"
	GatedInvalidHoldAnnotation = "InvalidHoldAnnotation"
	GatedWaitingForMembers     = "WaitingForMembers"
	// GatedWaitingForClaims: a pending member's ResourceClaim from a template does not exist
	// yet; the gang cannot be planned without it (podgroup.Info.AwaitingClaims).
	GatedWaitingForClaims = "WaitingForResourceClaims"
)

// GateReason is why Gang's PreEnqueue holds pod, a member of the group info describes, back
// ("" when it lets it in): the one rule that PreEnqueue, Gang's hints and GatedGroups share.
func GateReason(info podgroup.Info, pod *v1.Pod) string {
	switch {
	case pod.Spec.SchedulingGroup != nil:
		return GatedInTwoPodGroups
	case info.PodGroup == nil:
		return GatedPodGroupMissing
	case info.SubGroupErr != nil:
		return GatedInvalidSubGroupPolicy
	case podgroup.SubGroupMembershipProblem(info.SubGroupPolicies, pod) != "":
		return GatedInvalidSubGroupMember
	case info.HoldErr != nil:
		// Never ignored: the gang would not hold when its owner asked it to (or hold when
		// asked not to).
		return GatedInvalidHoldAnnotation
	case info.Members < info.MinMember():
		return GatedWaitingForMembers
	case info.AwaitingClaims > 0:
		return GatedWaitingForClaims
	}
	return ""
}

// GatedGroups counts the groups that have pending members (neither bound nor reserved) which
// Gang's PreEnqueue holds back, by the first reason that holds one of them back. Every reason
// is in the result, zero or not. It costs O(pending members) and is meant for a metrics
// scrape, not for the scheduling path.
func (t *Tracker) GatedGroups() map[string]int {
	out := map[string]int{GatedInTwoPodGroups: 0, GatedPodGroupMissing: 0, GatedInvalidSubGroupPolicy: 0, GatedInvalidSubGroupMember: 0, GatedInvalidHoldAnnotation: 0, GatedWaitingForMembers: 0, GatedWaitingForClaims: 0}
	t.reg.RLock()
	defer t.reg.RUnlock()
	t.reg.EachGroupLocked(func(_ Key, d *podgroup.Group) {
		if reason := gatedLocked(d); reason != "" {
			out[reason]++
		}
	})
	return out
}

// gatedLocked returns why PreEnqueue holds back the group's pending members ("" if it does
// not, or if none is pending). The registry's lock must be held.
func gatedLocked(d *podgroup.Group) string {
	var pending []*v1.Pod
	d.EachPendingLocked(func(_ types.UID, p *v1.Pod) { pending = append(pending, p) })
	if len(pending) == 0 {
		return ""
	}
	info := d.InfoLocked()
	// A member's own problem comes before the counts, which are the same for every member.
	reason := ""
	for _, p := range pending {
		if reason = GateReason(info, p); reason != "" && reason != GatedWaitingForMembers && reason != GatedWaitingForClaims {
			return reason
		}
	}
	return reason
}
