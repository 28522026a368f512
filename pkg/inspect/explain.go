package inspect

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// NotInHyperNode names the pseudo-domain of bound members on nodes in no usable HyperNode.
const NotInHyperNode = "(nodes in no usable HyperNode)"

// Explain explains the PodGroup namespace/name; capacity figures are given for res (the
// cluster's default resource when empty).
func (c *Cluster) Explain(namespace, name string, res v1.ResourceName) (Explanation, error) {
	var pg *schedulingv1alpha1.PodGroup
	for _, g := range c.PodGroups {
		if g.Namespace == namespace && g.Name == name {
			pg = g
		}
	}
	if pg == nil {
		if npg := c.nativePodGroup(namespace, name); npg != nil {
			return c.explainNative(npg, res), nil
		}
		err := fmt.Errorf("%w: %s/%s", ErrPodGroupNotFound, namespace, name)
		for _, w := range c.Warnings {
			err = fmt.Errorf("%w (%s)", err, w)
		}
		return Explanation{}, err
	}
	var counts MemberCounts
	members := c.members(namespace, name, labelMemberOf, &counts)
	e, gang := c.explainGang(pg, members, counts, res, heldBackNow)
	e.Scheduler = c.schedulerView(namespace, name, gang)
	return e, nil
}

// explainGang explains the gang of pg with these live members (counted in counts), without
// what the scheduler said of it; gate says why the scheduler holds its members back ("" when
// it does not). It returns the gang as the scheduler's registry reads it.
func (c *Cluster) explainGang(pg *schedulingv1alpha1.PodGroup, members []*v1.Pod, counts MemberCounts, res v1.ResourceName, gate func(string, podgroup.Gang) string) (Explanation, podgroup.Gang) {
	if res == "" {
		res = c.DefaultResource()
	}
	key := pg.Namespace + "/" + pg.Name
	e := Explanation{PodGroup: key, Resource: string(res), Phase: string(pg.Status.Phase),
		MinMember: pg.Spec.MinMember, Members: counts, Warnings: c.warningsFor(res)}

	// The gang and its constraints, read exactly as the scheduler's registry reads them.
	gang := podgroup.NewGang(pg, members, c.DefaultTopology)
	topology, topologyErr := gang.Info.Topology, gang.Info.TopologyErr
	if raw, ok := pg.Annotations[podgroup.NetworkTopologyAnnotation]; ok {
		e.NetworkTopology = &ConstraintReport{Annotation: raw, Parsed: topology}
		if topologyErr != nil {
			e.NetworkTopology.Error = topologyErr.Error()
		} else {
			e.NetworkTopology.Description = topology.String()
		}
	} else if gang.Info.TopologyDefault {
		e.NetworkTopology = &ConstraintReport{Parsed: topology, Default: true,
			Description: topology.String() + " (the scheduler's defaultNetworkTopology)"}
	}
	policies, policyErr := gang.Info.SubGroupPolicies, gang.Info.SubGroupErr
	if raw, ok := pg.Annotations[podgroup.SubGroupPolicyAnnotation]; ok {
		e.SubGroups = &SubGroupsReport{Annotation: raw}
		if policyErr != nil {
			e.SubGroups.Error = policyErr.Error()
		}
		for _, p := range policies {
			pr := SubGroupPolicyReport{Name: p.Name, SubGroupSize: p.SubGroupSize, MinSubGroups: p.MinSubGroups}
			if p.NetworkTopology != nil {
				pr.Constraint = p.NetworkTopology.String()
			}
			e.SubGroups.Policies = append(e.SubGroups.Policies, pr)
		}
	}

	pending, bound := gang.Pending, gang.Placed
	e.Members.Bound, e.Members.Pending = len(bound), len(pending)
	switch {
	case e.Members.Seen == 0:
		e.Status = StatusNoMembers
	case len(pending) == 0:
		e.Status = StatusPlaced
	case len(bound) > 0:
		e.Status = StatusPartiallyPlaced
	default:
		e.Status = StatusPending
	}
	if e.SubGroups != nil {
		e.SubGroups.Groups, e.SubGroups.Ungrouped = subGroupCounts(gang, policies)
	}

	var shape *v1.Pod
	switch {
	case len(pending) > 0:
		shape = pending[0].Pod
	case len(bound) > 0:
		shape = bound[0].Pod
	}
	var shapeRequest v1.ResourceList
	if shape != nil {
		shapeRequest = podRequests(shape)
		if w := c.draWarning(shapeRequest); w != "" {
			e.Warnings = append(slices.Clip(e.Warnings), w)
		}
		e.RequestFrom = shape.Name
		for _, r := range shownResources(res) {
			if q, ok := shapeRequest[r]; ok {
				e.Request = append(e.Request, ResourceAmount{Resource: string(r), Amount: q})
			}
		}
	}

	shapes := podgroup.ShapesOf(pending)
	if len(shapes) > 1 {
		for _, sh := range shapes {
			e.Shapes = append(e.Shapes, ShapeReport{Name: sh.Name, Pods: len(sh.Members), Example: sh.Rep.Name})
		}
	}
	if len(bound) > 0 {
		e.Placement = c.placementOf(bound)
	}
	if e.NetworkTopology != nil && topology != nil && topologyErr == nil {
		// Resolved for placed gangs too, so that scripts can compare it with placement.tier.
		if tier, err := placement.MaxTier(c.snap, topology); err == nil {
			e.NetworkTopology.MaxTier = tier
		}
	}
	if len(pending) > 0 && topologyErr == nil && policyErr == nil {
		search, err := c.search(shape, shapeRequest, gang, shapes, gate(key, gang))
		if err != nil {
			if e.NetworkTopology == nil {
				e.NetworkTopology = &ConstraintReport{}
			}
			e.NetworkTopology.Error = err.Error()
		} else {
			e.Search = search
			if e.NetworkTopology != nil {
				e.NetworkTopology.MaxTier = search.MaxTier
			}
		}
	}
	e.Hold = c.holdOf(key, pg.Annotations)
	if _, err := podgroup.ParseHoldRecord(pg.Annotations); err != nil {
		e.HoldError = err.Error()
	} else if gang.Info.HoldErr != nil {
		e.HoldError = gang.Info.HoldErr.Error()
	}
	return e, gang
}

// heldBack is why Gang's PreEnqueue keeps the gang's pending members out of scheduling, in
// its words ("" when it lets them in).
// By PreEnqueue's own rule (gangstate.GateReason): a member's sub-group problem before the
// member count. Explain asks only with the PodGroup present and its policies valid.
func heldBack(key string, gang podgroup.Gang) string {
	reason := ""
	for _, m := range gang.Pending {
		if reason = gangstate.GateReason(gang.Info, m.Pod); reason == gangstate.GatedInTwoPodGroups {
			return fmt.Sprintf("pod %s also names a native pod group (spec.schedulingGroup): the scheduler refuses a pod in two gangs", m.Pod.Name)
		}
		if reason == gangstate.GatedInvalidSubGroupMember {
			return fmt.Sprintf("PodGroup %s: member %s: %s", key, m.Pod.Name, podgroup.SubGroupMembershipProblem(gang.Info.SubGroupPolicies, m.Pod))
		}
	}
	if reason == gangstate.GatedInvalidHoldAnnotation {
		return fmt.Sprintf("PodGroup %s: %v", key, gang.Info.HoldErr)
	}
	if reason == gangstate.GatedWaitingForMembers {
		return fmt.Sprintf("waiting for PodGroup %s to have %d members (minMember); %d exist", key, gang.Info.MinMember(), gang.Info.Members)
	}
	if reason == gangstate.GatedWaitingForClaims {
		return fmt.Sprintf("waiting for the ResourceClaims of %d pending members of PodGroup %s to be created from their ResourceClaimTemplates", gang.Info.AwaitingClaims, key)
	}
	return ""
}

// heldBackNow is heldBack for a gang's live members, counting those whose claims from
// templates do not exist yet as the scheduler's registry does (a job's manifest, which plan
// reads, has no claims to wait for).
func heldBackNow(key string, gang podgroup.Gang) string {
	for _, m := range gang.Pending {
		if podgroup.AwaitsClaims(m.Pod) {
			gang.Info.AwaitingClaims++
		}
	}
	return heldBack(key, gang)
}

// members returns the live member pods of a gang (the pods for which groupOf names it) and
// counts them and the others.
func (c *Cluster) members(namespace, name string, groupOf func(*v1.Pod) string, counts *MemberCounts) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range c.Pods {
		if p.Namespace != namespace || groupOf(p) != name {
			continue
		}
		switch {
		case terminal(p):
			counts.Finished++
		case p.DeletionTimestamp != nil:
			counts.Terminating++
		default:
			out = append(out, p)
		}
	}
	counts.Seen = len(out)
	return out
}

// shownResources are the resources of a member's request worth showing: the chosen one,
// then cpu and memory.
func shownResources(res v1.ResourceName) []v1.ResourceName {
	out := []v1.ResourceName{res}
	for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		if r != res {
			out = append(out, r)
		}
	}
	return out
}

// subGroupCounts counts the members of each sub-group, in the scheduler's order.
func subGroupCounts(gang podgroup.Gang, policies []podgroup.SubGroupPolicy) ([]SubGroupReport, int) {
	sizes := map[string]int32{}
	for _, p := range policies {
		sizes[p.Name] = p.SubGroupSize
	}
	byID := map[string]*SubGroupReport{}
	var order []podgroup.SubGroup
	ungrouped := 0
	for _, m := range append(append([]podgroup.Member(nil), gang.Placed...), gang.Pending...) {
		if !m.InSubGroup {
			ungrouped++
			continue
		}
		r := byID[m.SubGroup.ID]
		if r == nil {
			r = &SubGroupReport{ID: m.SubGroup.ID, Policy: m.SubGroup.Policy, Size: sizes[m.SubGroup.Policy]}
			byID[m.SubGroup.ID] = r
			order = append(order, m.SubGroup)
		}
		r.Members++
		if m.Node != "" {
			r.Bound++
		} else {
			r.Pending++
		}
	}
	podgroup.SortSubGroups(order)
	out := make([]SubGroupReport, 0, len(order))
	for _, sg := range order {
		out = append(out, *byID[sg.ID])
	}
	return out, ungrouped
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
