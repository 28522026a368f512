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
	Annotation string
	// Policy is the sub-group policy at fault, "" for the job's constraint.
	Policy string
	Err    error
}

func (e *ConstraintError) Error() string {
	if e.Policy != "" {
		return fmt.Sprintf("annotation %s: policy %q: %v", e.Annotation, e.Policy, e.Err)
	}
	return fmt.Sprintf("annotation %s: %v", e.Annotation, e.Err)
}

func (e *ConstraintError) Unwrap() error { return e.Err }

// GangRequest returns the planning problem of a gang's pending members in tree: the job's
// constraint and resolved tier, the members in rank order, the placed members' nodes and
// the sub-groups. The caller adds the node capacities and the strategy. The
// gang's annotations must have parsed (Info.TopologyErr and Info.SubGroupErr nil).
func GangRequest(tree *hypernode.Snapshot, gang podgroup.Gang) (Request, error) {
	job := JobTopology(gang.Info)
	maxTier, err := MaxTier(tree, job)
	if err != nil {
		return Request{}, &ConstraintError{Annotation: podgroup.NetworkTopologyAnnotation, Err: err}
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

// RetryWithoutSubGroups continues after Make(req) failed with err for a job with
// sub-groups: it leaves out the last sub-group (its pending members wait for room) and plans
// again, while the pending and placed members left still reach minMember and the policies'
// minSubGroups allow it. It returns the plan, the request it was made from, and the members
// left out; with no plan, the last request tried and the first error (it explains the whole
// job).
func RetryWithoutSubGroups(req Request, err error, info podgroup.Info, states []podgroup.SubGroupState) (*Plan, Request, []string, error) {
	var dropped []string
	perPolicy := map[string]int{}
	for err != nil && len(req.SubGroups) > 0 {
		last := req.SubGroups[len(req.SubGroups)-1]
		if len(req.Pending)-len(last.Pending)+len(req.Placed) < info.MinMember() || len(last.Pending) == 0 ||
			!podgroup.CanDropSubGroup(info, states, perPolicy, last.Policy) {
			break
		}
		perPolicy[last.Policy]++
		drop := sets.New(last.Pending...)
		kept := make([]string, 0, len(req.Pending)-len(last.Pending))
		for _, n := range req.Pending {
			if !drop.Has(n) {
				kept = append(kept, n)
			}
		}
		req.Pending, req.SubGroups = kept, req.SubGroups[:len(req.SubGroups)-1]
		dropped = append(dropped, last.Pending...)
		if plan, retryErr := Make(req); retryErr == nil {
			return plan, req, dropped, nil
		}
	}
	return nil, req, dropped, err
}
