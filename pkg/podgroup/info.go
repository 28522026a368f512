package podgroup

import schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

// Info is what the plugins need to know about a group at one moment.
type Info struct {
	// PodGroup is nil when the object does not exist (yet). It must not be modified.
	PodGroup *schedulingv1alpha1.PodGroup
	// Revision changes whenever what scheduling reads from the PodGroup changes.
	Revision int
	// Members is the number of existing, non-terminal member pods; Bound the number of them
	// bound to a node.
	Members, Bound int
	// Scheduled is the number of members bound or reserved by this scheduler.
	Scheduled int
	// AwaitingClaims is the number of unbound members whose ResourceClaims from templates
	// the resource claim controller has not created yet (claims.go).
	AwaitingClaims int
	// Topology is the PodGroup's network topology constraint (nil: none). TopologyErr says
	// why the annotation is unusable. TopologyDefault: Topology is the scheduler's default,
	// the PodGroup saying nothing of topology (SetDefaultTopology).
	Topology        *NetworkTopology
	TopologyErr     error
	TopologyDefault bool
	// SubGroupPolicies are the PodGroup's sub-group policies (nil: none); SubGroupErr says
	// why the annotation is unusable.
	SubGroupPolicies []SubGroupPolicy
	SubGroupErr      error
	// HoldAfter is the PodGroup's hold-after override; HoldErr says why the annotation is
	// unusable. Hold is the scheduler's record of the domain it holds for the gang (nil:
	// none); HoldRecordErr says why the record is unreadable.
	HoldAfter     HoldAfter
	HoldErr       error
	Hold          *HoldRecord
	HoldRecordErr error
	// MinCount is a native pod group's gang minCount (NativeGang); 0 for the others.
	MinCount int
}

// MinMember returns the PodGroup's minMember (at least 1), a native pod group's minCount, or
// 0 without either.
func (i Info) MinMember() int {
	if i.PodGroup == nil {
		return i.MinCount
	}
	return minMemberOf(i.PodGroup)
}

// Policy returns the group's sub-group policy of that name.
func (i Info) Policy(name string) (SubGroupPolicy, bool) {
	for _, p := range i.SubGroupPolicies {
		if p.Name == name {
			return p, true
		}
	}
	return SubGroupPolicy{}, false
}
