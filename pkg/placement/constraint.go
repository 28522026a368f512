package placement

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// This file is the one home of a gang's constraint as the tree resolves it: the scheduler's
// plugin and `kubectl hypernode explain` both build their planning requests here, so the two
// can never disagree.

// JobTopology is the gang's own constraint. A gang without one (a plain gang, or one whose
// only constraints are its sub-groups') may span the whole cluster.
func JobTopology(info podgroup.Info) *podgroup.NetworkTopology {
	if info.Topology != nil {
		return info.Topology
	}
	return &podgroup.NetworkTopology{Mode: podgroup.ModeSoft}
}

// MaxTier resolves the highest tier a constraint allows: its tier, its tier name through
// the tree's tierName map, or, without either (soft only), the whole cluster.
func MaxTier(tree *hypernode.Snapshot, nt *podgroup.NetworkTopology) (int, error) {
	switch {
	case nt.HighestTierAllowed != nil:
		return *nt.HighestTierAllowed, nil
	case nt.HighestTierName != "":
		return tree.TierByName(nt.HighestTierName)
	}
	return tree.RootTier(), nil
}

// ConstraintError says that one of a PodGroup's constraint annotations cannot be resolved in
// the current tree (an unknown or ambiguous tier name, a sub-group allowed above its job).
type ConstraintError struct {
	// Annotation holds the constraint; "" for the scheduler's default constraint.
	Annotation string
	// Policy is the sub-group policy at fault, "" for the job's constraint.
	Policy string
	Err    error
}

// defaultConstraintSource names the scheduler's default constraint in messages.
const defaultConstraintSource = "the scheduler's defaultNetworkTopology (NetworkTopologyAware args)"

func (e *ConstraintError) Error() string {
	switch {
	case e.Annotation == "":
		return fmt.Sprintf("%s: %v", defaultConstraintSource, e.Err)
	case e.Policy != "":
		return fmt.Sprintf("annotation %s: policy %q: %v", e.Annotation, e.Policy, e.Err)
	}
	return fmt.Sprintf("annotation %s: %v", e.Annotation, e.Err)
}

func (e *ConstraintError) Unwrap() error { return e.Err }

// JobConstraintError is err, the job's constraint failing to resolve, named by where the
// constraint came from: the PodGroup's annotation or the scheduler's default.
func JobConstraintError(info podgroup.Info, err error) *ConstraintError {
	if info.TopologyDefault {
		return &ConstraintError{Err: err}
	}
	return &ConstraintError{Annotation: podgroup.NetworkTopologyAnnotation, Err: err}
}

// GangRequest returns the planning problem of a gang's pending members in tree: the job's
// constraint and resolved tier, the members in rank order, the placed members' nodes and
// the sub-groups. The caller adds the node capacities and the strategy. The
// gang's annotations must have parsed (Info.TopologyErr and Info.SubGroupErr nil).
func GangRequest(tree *hypernode.Snapshot, gang podgroup.Gang) (Request, error) {
	job := JobTopology(gang.Info)
	maxTier, err := MaxTier(tree, job)
	if err != nil {
		return Request{}, JobConstraintError(gang.Info, err)
	}
	subGroups, err := subGroupRequests(tree, gang, job, maxTier)
	if err != nil {
		return Request{}, err
	}
	constraint := job.String()
	if len(subGroups) > 0 {
		constraint = "job " + constraint
	}
	pending := make([]string, len(gang.Pending))
	for i, m := range gang.Pending {
		pending[i] = m.Pod.Name
	}
	return Request{
		Tree:       tree,
		Constraint: constraint,
		MaxTier:    maxTier,
		Soft:       job.Mode == podgroup.ModeSoft,
		Pending:    pending,
		Placed:     gang.PlacedNodes(),
		SubGroups:  subGroups,
	}, nil
}

// subGroupRequests splits the pending members by sub-group, in planning order (see
// docs/design.md, "Sub-groups"), each with its resolved constraint and its placed members'
// nodes. A sub-group without a tier of its own may use anything inside the job's domain.
func subGroupRequests(tree *hypernode.Snapshot, gang podgroup.Gang, job *podgroup.NetworkTopology, jobMaxTier int) ([]SubGroup, error) {
	policies := gang.Info.SubGroupPolicies
	if len(policies) == 0 {
		return nil, nil
	}
	byPolicy := make(map[string]podgroup.SubGroupPolicy, len(policies))
	for _, sp := range policies {
		byPolicy[sp.Name] = sp
	}
	byID := map[string]*SubGroup{}
	var order []podgroup.SubGroup
	for _, m := range gang.Pending {
		if !m.InSubGroup {
			continue
		}
		sg := byID[m.SubGroup.ID]
		if sg == nil {
			nt := byPolicy[m.SubGroup.Policy].NetworkTopology
			if nt == nil {
				nt = job
			}
			maxTier := jobMaxTier
			if nt.HighestTierAllowed != nil || nt.HighestTierName != "" {
				tier, err := MaxTier(tree, nt)
				if err == nil && tier > jobMaxTier {
					err = fmt.Errorf("its tier %d is above the job's %d", tier, jobMaxTier)
				}
				if err != nil {
					return nil, &ConstraintError{Annotation: podgroup.SubGroupPolicyAnnotation, Policy: m.SubGroup.Policy, Err: err}
				}
				maxTier = tier
			}
			sg = &SubGroup{ID: m.SubGroup.ID, Policy: m.SubGroup.Policy, Constraint: nt.String(),
				MaxTier: maxTier, Soft: nt.Mode == podgroup.ModeSoft}
			byID[m.SubGroup.ID] = sg
			order = append(order, m.SubGroup)
		}
		sg.Pending = append(sg.Pending, m.Pod.Name)
	}
	for _, m := range gang.Placed {
		if sg := byID[m.SubGroup.ID]; m.InSubGroup && sg != nil {
			sg.Placed = append(sg.Placed, m.Node)
		}
	}
	podgroup.SortSubGroups(order)
	out := make([]SubGroup, 0, len(order))
	for _, sub := range order {
		out = append(out, *byID[sub.ID])
	}
	return out, nil
}

// LowestCommon returns the lowest HyperNode of tree that holds every one of nodes: the
// virtual root when one of them is in no usable leaf, "" when nodes is empty.
func LowestCommon(tree *hypernode.Snapshot, nodes []string) string {
	lca := ""
	for _, n := range nodes {
		leaf, ok := tree.LeafOf(n)
		if !ok {
			return hypernode.VirtualRootName
		}
		if lca == "" {
			lca = leaf
			continue
		}
		l, ok := tree.LCA(lca, leaf)
		if !ok {
			return hypernode.VirtualRootName
		}
		lca = l
	}
	return lca
}

// SpansCluster reports whether a job may be placed across the whole cluster: a soft
// constraint (a preference up to the cluster), or a hard one at or above the root's tier.
func SpansCluster(tree *hypernode.Snapshot, soft bool, maxTier int) bool {
	return soft || maxTier >= tree.RootTier()
}

// RetryWithoutSubGroups continues after Make(req) failed with err for a job with
// sub-groups: it leaves out sub-groups from the last (their pending members wait for room)
// while the pending and placed members left still reach minMember and the policies'
// minSubGroups allow it, and plans with as few left out as fit. It returns the plan, the
// request it was made from, and the members left out; with no plan, the request with the
// most left out and the first error (it explains the whole job).
//
// For members of one shape, fitting is monotone in the sub-groups kept: the planner places
// them one after another in order, so the first k get the same homes whether or not more
// follow, and fewer leave more room for the members in no sub-group. So the count is
// bisected: about log2 of the droppable sub-groups plans, not one plan per sub-group (a
// 5,000-pod job of 625 sub-groups would otherwise plan hundreds of times in one scheduling
// cycle). The packer of several shapes is not monotone (its shape order and LeastWaste
// scores depend on how many members of each shape are left): it is bisected too, which may
// leave out more sub-groups than needed (they wait and are planned again), and when leaving
// out the most does not fit, the sub-groups are left out one at a time, so that a plan one
// at a time would find is never missed.
func RetryWithoutSubGroups(req Request, err error, info podgroup.Info, states []podgroup.SubGroupState) (*Plan, Request, []string, error) {
	droppable := 0
	perPolicy := map[string]int{}
	left := len(req.Pending) + len(req.Placed)
	for i := len(req.SubGroups) - 1; i >= 0; i-- {
		sg := req.SubGroups[i]
		// Left out, a sub-group below its size keeps its placed members from binding too.
		lost := len(sg.Pending)
		if policy, _ := info.Policy(sg.Policy); len(sg.Placed) < int(policy.SubGroupSize) {
			lost += len(sg.Placed)
		}
		if left-lost < info.MinMember() || len(sg.Pending) == 0 ||
			!podgroup.CanDropSubGroup(info, states, perPolicy, sg.Policy) {
			break
		}
		perPolicy[sg.Policy]++
		left -= lost
		droppable++
	}
	if droppable == 0 {
		return nil, req, nil, err
	}
	most, dropped := withoutLastSubGroups(req, droppable)
	plan, retryErr := Make(most)
	if retryErr != nil {
		if len(req.Shapes) > 1 {
			for n := 1; n < droppable; n++ {
				fewer, fewerDropped := withoutLastSubGroups(req, n)
				if p, e := Make(fewer); e == nil {
					return p, fewer, fewerDropped, nil
				}
			}
		}
		return nil, most, dropped, err
	}
	best, bestDropped := most, dropped
	// Invariant: leaving out hi sub-groups fits; leaving out fewer than lo does not.
	lo, hi := 1, droppable
	for lo < hi {
		mid := (lo + hi) / 2
		trial, trialDropped := withoutLastSubGroups(req, mid)
		if p, e := Make(trial); e == nil {
			plan, best, bestDropped, hi = p, trial, trialDropped, mid
		} else {
			lo = mid + 1
		}
	}
	return plan, best, bestDropped, nil
}

// withoutLastSubGroups returns req without its last n sub-groups and their pending members,
// and those members (the last sub-group's first).
func withoutLastSubGroups(req Request, n int) (Request, []string) {
	kept := req.SubGroups[:len(req.SubGroups)-n]
	var dropped []string
	for i := len(req.SubGroups) - 1; i >= len(kept); i-- {
		dropped = append(dropped, req.SubGroups[i].Pending...)
	}
	drop := sets.New(dropped...)
	pending := make([]string, 0, len(req.Pending)-len(dropped))
	for _, name := range req.Pending {
		if !drop.Has(name) {
			pending = append(pending, name)
		}
	}
	req.Pending, req.SubGroups = pending, kept
	return req, dropped
}
