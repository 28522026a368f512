package inspect

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// Gang states of an Explanation.
const (
	StatusPlaced          = "Placed"          // every member is bound
	StatusPartiallyPlaced = "PartiallyPlaced" // some members are bound, some pending
	StatusPending         = "Pending"         // no member is bound
	StatusNoMembers       = "NoMembers"       // the PodGroup has no live member pod
)

// How many candidates per tier, pods per condition message and Events an explanation keeps.
const (
	candidatesShown = 3
	podsNamed       = 3
	eventsShown     = 10
)

// Explanation says what a gang needs and where it is or why it is not placed.
type Explanation struct {
	PodGroup string `json:"podGroup"`
	// Resource is the resource of the capacity figures (the gang's own request of it, and
	// of cpu and memory, is in Request).
	Resource string `json:"resource"`
	Status   string `json:"status"`
	// Phase is the PodGroup's status.phase, as its controller last wrote it.
	Phase     string       `json:"phase,omitempty"`
	MinMember int32        `json:"minMember"`
	Members   MemberCounts `json:"members"`
	// Request is what one member requests, taken from RequestFrom (the first pending member
	// by rank, else the first member): the shape the scheduler plans the gang with.
	Request         []ResourceAmount  `json:"request,omitempty"`
	RequestFrom     string            `json:"requestFrom,omitempty"`
	NetworkTopology *ConstraintReport `json:"networkTopology,omitempty"`
	SubGroups       *SubGroupsReport  `json:"subGroups,omitempty"`
	// Placement is where the bound members are (nil when none is).
	Placement *PlacementReport `json:"placement,omitempty"`
	// Search is the analysis of where the pending members could go (nil when none is pending).
	Search    *SearchReport   `json:"search,omitempty"`
	Scheduler SchedulerReport `json:"scheduler"`
	Warnings  []string        `json:"warnings,omitempty"`
}

// MemberCounts counts the member pods of a gang.
type MemberCounts struct {
	// Seen are the live members (not finished, not being deleted); Bound and Pending split them.
	Seen    int `json:"seen"`
	Bound   int `json:"bound"`
	Pending int `json:"pending"`
	// Finished members (Succeeded or Failed) and Terminating ones are not in Seen.
	Finished    int `json:"finished,omitempty"`
	Terminating int `json:"terminating,omitempty"`
}

// ResourceAmount is an amount of one resource.
type ResourceAmount struct {
	Resource string            `json:"resource"`
	Amount   resource.Quantity `json:"amount"`
}

// ConstraintReport is the gang's network-topology annotation, parsed as the scheduler does.
type ConstraintReport struct {
	Annotation string                    `json:"annotation"`
	Parsed     *podgroup.NetworkTopology `json:"parsed,omitempty"`
	// Description is the scheduler's wording, e.g. "hard topology (tier<=2)".
	Description string `json:"description,omitempty"`
	// MaxTier is the highest tier the gang may span, resolved against the tree.
	MaxTier int    `json:"maxTier,omitempty"`
	Error   string `json:"error,omitempty"`
}

// SubGroupsReport is the gang's sub-group policy annotation and its sub-groups.
type SubGroupsReport struct {
	Annotation string                 `json:"annotation"`
	Error      string                 `json:"error,omitempty"`
	Policies   []SubGroupPolicyReport `json:"policies,omitempty"`
	Groups     []SubGroupReport       `json:"groups,omitempty"`
	// Ungrouped counts the live members in no sub-group (the job's default group).
	Ungrouped int `json:"ungrouped"`
}

// SubGroupPolicyReport is one parsed policy.
type SubGroupPolicyReport struct {
	Name         string `json:"name"`
	SubGroupSize int32  `json:"subGroupSize"`
	MinSubGroups int32  `json:"minSubGroups"`
	// Constraint is the policy's own constraint ("" when it has none and follows the job's).
	Constraint string `json:"constraint,omitempty"`
}

// SubGroupReport is one sub-group and its live members.
type SubGroupReport struct {
	ID      string `json:"id"`
	Policy  string `json:"policy"`
	Size    int32  `json:"size"`
	Members int    `json:"members"`
	Bound   int    `json:"bound"`
	Pending int    `json:"pending"`
}

// PlacementReport is where the bound members are.
type PlacementReport struct {
	// Domain is the lowest HyperNode holding every bound member (the virtual root when they
	// span the cluster or sit on nodes in no usable HyperNode), Tier and TierName its tier.
	Domain   string       `json:"domain"`
	Tier     int          `json:"tier"`
	TierName string       `json:"tierName,omitempty"`
	Pods     int          `json:"pods"`
	Nodes    int          `json:"nodes"`
	Tree     PlacedDomain `json:"tree"`
}

// PlacedDomain is a HyperNode of a placement with the bound members below it.
type PlacedDomain struct {
	Name     string         `json:"name"`
	Tier     int            `json:"tier,omitempty"`
	TierName string         `json:"tierName,omitempty"`
	Children []PlacedDomain `json:"children,omitempty"`
	Nodes    []PlacedNode   `json:"nodes,omitempty"`
}

// PlacedNode is a node and the gang's pods bound to it.
type PlacedNode struct {
	Node string   `json:"node"`
	Pods []string `json:"pods"`
}

// NotInHyperNode names the pseudo-domain of bound members on nodes in no usable HyperNode.
const NotInHyperNode = "(nodes in no usable HyperNode)"

// SearchReport is where the pending members could go now.
type SearchReport struct {
	// Demand is the number of pending members to place together.
	Demand int `json:"demand"`
	// MaxTier is the highest tier the gang may span (the whole cluster's tier when it has no
	// tier of its own); Soft is true when it is a preference.
	MaxTier int  `json:"maxTier"`
	Soft    bool `json:"soft,omitempty"`
	// PlacedIn is the lowest HyperNode of the bound members, which every candidate must
	// contain ("" when none is bound).
	PlacedIn string       `json:"placedIn,omitempty"`
	Tiers    []TierReport `json:"tiers"`
	// UnusableNodes are the nodes that can take no member, with the reason.
	UnusableNodes []NodeReason `json:"unusableNodes,omitempty"`
	// Verdict is the planner's answer on this data: where it would place the members, or
	// its refusal in the scheduler's words.
	Verdict string `json:"verdict"`
	// Fits is true when the planner finds a place on this data.
	Fits bool `json:"fits"`
}

// TierReport is the best candidates of one tier.
type TierReport struct {
	Tier     int    `json:"tier"`
	TierName string `json:"tierName,omitempty"`
	// Allowed is false for the tier shown above the constraint's, for context.
	Allowed    bool              `json:"allowed"`
	Candidates []CandidateReport `json:"candidates"`
	// More counts the candidates not listed.
	More int `json:"more,omitempty"`
}

// CandidateReport is one HyperNode and how many pending members it can hold.
type CandidateReport struct {
	Name  string `json:"name"`
	Holds int    `json:"holds"`
	Needs int    `json:"needs"`
	Fits  bool   `json:"fits"`
	// Reason says, in words, why it fails (or that it fits).
	Reason string `json:"reason"`
}

// NodeReason is a node and why it takes no member.
type NodeReason struct {
	Node   string `json:"node"`
	Reason string `json:"reason"`
}

// SchedulerReport is what the scheduler itself said last.
type SchedulerReport struct {
	// Conditions are the pending members' PodScheduled=False conditions, one per distinct
	// reason and message.
	Conditions []ConditionReport `json:"conditions,omitempty"`
	// Events are the latest Events on the PodGroup and its members, newest first, except
	// the members' Scheduled Events (the placement shows the same).
	Events []EventReport `json:"events,omitempty"`
}

// ConditionReport is a PodScheduled condition shared by some members.
type ConditionReport struct {
	Pods    []string `json:"pods"`
	Reason  string   `json:"reason"`
	Message string   `json:"message"`
}

// EventReport is one Event.
type EventReport struct {
	// Object is Kind/name of the object the Event is about.
	Object   string    `json:"object"`
	Type     string    `json:"type"`
	Reason   string    `json:"reason"`
	Message  string    `json:"message"`
	Count    int32     `json:"count,omitempty"`
	LastSeen time.Time `json:"lastSeen"`
	// Age is LastSeen relative to the time the cluster was read, e.g. "5m".
	Age string `json:"age"`
}

// member is a live member pod with its sub-group.
type member struct {
	pod      *v1.Pod
	subGroup podgroup.SubGroup
	inSub    bool
}

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
		err := fmt.Errorf("%w: %s/%s", ErrPodGroupNotFound, namespace, name)
		for _, w := range c.Warnings {
			err = fmt.Errorf("%w (%s)", err, w)
		}
		return Explanation{}, err
	}
	if res == "" {
		res = c.DefaultResource()
	}
	key := namespace + "/" + name
	e := Explanation{PodGroup: key, Resource: string(res), Phase: string(pg.Status.Phase),
		MinMember: pg.Spec.MinMember, Warnings: c.Warnings}

	// Constraints, parsed exactly as the scheduler's registry parses them.
	topology, topologyErr := podgroup.ParseNetworkTopology(pg.Annotations)
	if raw, ok := pg.Annotations[podgroup.NetworkTopologyAnnotation]; ok {
		e.NetworkTopology = &ConstraintReport{Annotation: raw, Parsed: topology}
		if topologyErr != nil {
			e.NetworkTopology.Error = topologyErr.Error()
		} else {
			e.NetworkTopology.Description = topology.String()
		}
	}
	policies, policyErr := podgroup.ParseSubGroupPolicies(pg.Annotations, topology)
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

	members := c.members(namespace, name, policies, &e.Members)
	var pending, bound []member
	for _, m := range members {
		if m.pod.Spec.NodeName != "" {
			bound = append(bound, m)
		} else {
			pending = append(pending, m)
		}
	}
	e.Members.Bound, e.Members.Pending = len(bound), len(pending)
	switch {
	case len(members) == 0:
		e.Status = StatusNoMembers
	case len(pending) == 0:
		e.Status = StatusPlaced
	case len(bound) > 0:
		e.Status = StatusPartiallyPlaced
	default:
		e.Status = StatusPending
	}
	if e.SubGroups != nil {
		e.SubGroups.Groups, e.SubGroups.Ungrouped = subGroupCounts(members, policies)
	}

	var shape *v1.Pod
	switch {
	case len(pending) > 0:
		shape = pending[0].pod
	case len(members) > 0:
		shape = members[0].pod
	}
	var shapeRequest v1.ResourceList
	if shape != nil {
		shapeRequest = podRequests(shape)
		e.RequestFrom = shape.Name
		for _, r := range shownResources(res) {
			if q, ok := shapeRequest[r]; ok {
				e.Request = append(e.Request, ResourceAmount{Resource: string(r), Amount: q})
			}
		}
	}

	if len(bound) > 0 {
		e.Placement = c.placementOf(bound)
	}
	if e.NetworkTopology != nil && topology != nil && topologyErr == nil {
		// Resolved for placed gangs too, so that scripts can compare it with placement.tier.
		if tier, err := c.resolveTier(topology); err == nil {
			e.NetworkTopology.MaxTier = tier
		}
	}
	if len(pending) > 0 && topologyErr == nil && policyErr == nil {
		search, err := c.search(shape, shapeRequest, topology, policies, pending, bound)
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
	e.Scheduler = c.schedulerView(namespace, name, members)
	return e, nil
}

// members returns the live members of a gang in rank order and counts the others.
func (c *Cluster) members(namespace, name string, policies []podgroup.SubGroupPolicy, counts *MemberCounts) []member {
	var out []member
	for _, p := range c.Pods {
		if p.Namespace != namespace || p.Labels[schedulingv1alpha1.PodGroupLabel] != name {
			continue
		}
		switch {
		case terminal(p):
			counts.Finished++
			continue
		case p.DeletionTimestamp != nil:
			counts.Terminating++
			continue
		}
		m := member{pod: p}
		m.subGroup, m.inSub = podgroup.SubGroupOf(policies, p)
		out = append(out, m)
	}
	counts.Seen = len(out)
	// The scheduler fills leaves in rank order: show members in that order too.
	sort.SliceStable(out, func(i, j int) bool {
		ri, iok := podgroup.Rank(out[i].pod)
		rj, jok := podgroup.Rank(out[j].pod)
		if iok != jok {
			return iok
		}
		if iok && ri != rj {
			return ri < rj
		}
		return out[i].pod.Name < out[j].pod.Name
	})
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
func subGroupCounts(members []member, policies []podgroup.SubGroupPolicy) ([]SubGroupReport, int) {
	sizes := map[string]int32{}
	for _, p := range policies {
		sizes[p.Name] = p.SubGroupSize
	}
	byID := map[string]*SubGroupReport{}
	var order []podgroup.SubGroup
	ungrouped := 0
	for _, m := range members {
		if !m.inSub {
			ungrouped++
			continue
		}
		r := byID[m.subGroup.ID]
		if r == nil {
			r = &SubGroupReport{ID: m.subGroup.ID, Policy: m.subGroup.Policy, Size: sizes[m.subGroup.Policy]}
			byID[m.subGroup.ID] = r
			order = append(order, m.subGroup)
		}
		r.Members++
		if m.pod.Spec.NodeName != "" {
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

// placementOf describes where the bound members are: HyperNode -> node -> pods, from their
// lowest common HyperNode down.
func (c *Cluster) placementOf(bound []member) *PlacementReport {
	podsByNode := map[string][]string{}
	for _, m := range bound {
		podsByNode[m.pod.Spec.NodeName] = append(podsByNode[m.pod.Spec.NodeName], m.pod.Name)
	}
	domain := c.lowestCommon(sortedNames(podsByNode))
	info, _ := c.snap.HyperNode(domain)
	r := &PlacementReport{Domain: domain, Tier: info.Tier, TierName: info.TierName, Pods: len(bound), Nodes: len(podsByNode)}

	// Build the tree top-down: every node hangs below the path from the domain to its leaf.
	root := &placedBuilder{domain: PlacedDomain{Name: domain, Tier: info.Tier, TierName: info.TierName}}
	for _, node := range sortedNames(podsByNode) {
		at := root
		if leaf, ok := c.snap.LeafOf(node); ok {
			path := []string{leaf}
			for _, a := range c.snap.Ancestors(leaf) {
				if a == domain {
					break
				}
				path = append(path, a)
			}
			if leaf == domain {
				path = nil
			}
			for i := len(path) - 1; i >= 0; i-- {
				hinfo, _ := c.snap.HyperNode(path[i])
				at = at.child(PlacedDomain{Name: path[i], Tier: hinfo.Tier, TierName: hinfo.TierName})
			}
		} else {
			at = at.child(PlacedDomain{Name: NotInHyperNode})
		}
		at.domain.Nodes = append(at.domain.Nodes, PlacedNode{Node: node, Pods: podsByNode[node]})
	}
	r.Tree = root.build()
	return r
}

// placedBuilder assembles a PlacedDomain tree.
type placedBuilder struct {
	domain   PlacedDomain
	children map[string]*placedBuilder
}

func (b *placedBuilder) child(d PlacedDomain) *placedBuilder {
	if b.children == nil {
		b.children = map[string]*placedBuilder{}
	}
	if c := b.children[d.Name]; c != nil {
		return c
	}
	c := &placedBuilder{domain: d}
	b.children[d.Name] = c
	return c
}

func (b *placedBuilder) build() PlacedDomain {
	out := b.domain
	for _, name := range sortedNames(b.children) {
		out.Children = append(out.Children, b.children[name].build())
	}
	return out
}

// lowestCommon returns the lowest HyperNode that holds every one of the nodes: the virtual
// root when one of them is in no usable leaf.
func (c *Cluster) lowestCommon(nodes []string) string {
	lca := ""
	for _, n := range nodes {
		leaf, ok := c.snap.LeafOf(n)
		if !ok {
			return hypernode.VirtualRootName
		}
		if lca == "" {
			lca = leaf
			continue
		}
		if l, ok := c.snap.LCA(lca, leaf); ok {
			lca = l
		} else {
			return hypernode.VirtualRootName
		}
	}
	if lca == "" {
		return hypernode.VirtualRootName
	}
	return lca
}

// searchInput is the gang as the capacity check sees it: one member's shape, its request
// and node affinity, and how many members are pending.
type searchInput struct {
	shape    *v1.Pod
	request  v1.ResourceList
	demand   int
	affinity nodeaffinity.RequiredNodeAffinity
}

// search builds the SearchReport of the pending members.
func (c *Cluster) search(shape *v1.Pod, request v1.ResourceList, topology *podgroup.NetworkTopology,
	policies []podgroup.SubGroupPolicy, pending, bound []member) (*SearchReport, error) {
	in := searchInput{shape: shape, request: request, demand: len(pending), affinity: nodeaffinity.GetRequiredNodeAffinity(shape)}
	// A gang whose only constraints are its sub-groups' may span the whole cluster; so may
	// a plain gang (the scheduler does not place it by topology, but the question "where
	// would it fit" has the same answer).
	job := topology
	if job == nil {
		job = &podgroup.NetworkTopology{Mode: podgroup.ModeSoft}
	}
	maxTier, err := c.resolveTier(job)
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %v", podgroup.NetworkTopologyAnnotation, err)
	}
	constraint := job.String()
	subGroups, err := c.subGroupRequests(policies, topology, maxTier, pending, bound)
	if err != nil {
		return nil, err
	}
	if len(subGroups) > 0 {
		constraint = "job " + constraint
	}

	report := &SearchReport{Demand: in.demand, MaxTier: maxTier, Soft: job.Mode == podgroup.ModeSoft}
	nodes := map[string]placement.Node{}
	unusable := map[string]string{}
	for _, n := range c.Nodes {
		holds, why := c.nodeCapacity(n.Name, in)
		if why != "" {
			unusable[n.Name] = why
			report.UnusableNodes = append(report.UnusableNodes, NodeReason{Node: n.Name, Reason: why})
		}
		nodes[n.Name] = placement.Node{Capacity: holds}
	}
	sort.Slice(report.UnusableNodes, func(i, j int) bool { return report.UnusableNodes[i].Node < report.UnusableNodes[j].Node })
	var placedNodes []string
	for _, m := range bound {
		placedNodes = append(placedNodes, m.pod.Spec.NodeName)
	}
	pendingNames := make([]string, len(pending))
	for i, m := range pending {
		pendingNames[i] = m.pod.Name
	}
	req := placement.Request{
		Tree:       c.snap,
		Constraint: constraint,
		MaxTier:    maxTier,
		Soft:       job.Mode == podgroup.ModeSoft,
		Pending:    pendingNames,
		Placed:     placedNodes,
		Nodes:      nodes,
		Strategy:   placement.BinPack,
		SubGroups:  subGroups,
	}
	capacity := placement.Capacities(req)
	if len(bound) > 0 {
		report.PlacedIn = c.lowestCommon(placedNodes)
	}
	plan, planErr := placement.Make(req)
	if planErr != nil {
		var unsat *placement.Unsatisfiable
		if !errors.As(planErr, &unsat) {
			return nil, planErr
		}
		report.Verdict = unsat.Message
	} else {
		report.Fits = true
		domainInfo, _ := c.snap.HyperNode(plan.Domain)
		report.Verdict = fmt.Sprintf("it fits now: the planner would place the %d pending %s in %s (tier %d)",
			in.demand, plural(in.demand, "pod", "pods"), plan.Domain, domainInfo.Tier)
	}

	// Tiers: the real tiers and the whole cluster, up to the allowed tier and one above.
	tiers := append(append([]int(nil), c.snap.Tiers()...), c.snap.RootTier())
	for _, tier := range tiers {
		allowed := tier <= maxTier || req.Soft
		tr := TierReport{Tier: tier, Allowed: allowed}
		names := c.snap.Candidates(tier)
		if tier == c.snap.RootTier() {
			names = []string{hypernode.VirtualRootName}
		}
		var cands []CandidateReport
		for _, name := range names {
			info, _ := c.snap.HyperNode(name)
			if tr.TierName == "" {
				tr.TierName = info.TierName
			}
			cand := c.candidate(name, capacity[name], in, unusable, report.PlacedIn, allowed, tier > maxTier, plan)
			if cand.Fits && allowed && plan == nil && len(subGroups) > 0 {
				cand.Reason = "has room for the job, not for its sub-groups (see the planner below)"
			}
			cands = append(cands, cand)
		}
		sort.SliceStable(cands, func(i, j int) bool {
			if cands[i].Holds != cands[j].Holds {
				return cands[i].Holds > cands[j].Holds
			}
			return cands[i].Name < cands[j].Name
		})
		if len(cands) > candidatesShown {
			tr.More = len(cands) - candidatesShown
			cands = cands[:candidatesShown]
		}
		tr.Candidates = cands
		report.Tiers = append(report.Tiers, tr)
		if tier > maxTier {
			break // one tier above the allowed one, for context
		}
	}
	return report, nil
}

// resolveTier returns the highest tier a constraint allows, as the scheduler resolves it.
func (c *Cluster) resolveTier(nt *podgroup.NetworkTopology) (int, error) {
	switch {
	case nt.HighestTierAllowed != nil:
		return *nt.HighestTierAllowed, nil
	case nt.HighestTierName != "":
		return c.snap.TierByName(nt.HighestTierName)
	}
	return c.snap.RootTier(), nil
}

// subGroupRequests splits the pending members by sub-group in the scheduler's order, with
// each sub-group's resolved constraint and bound members.
func (c *Cluster) subGroupRequests(policies []podgroup.SubGroupPolicy, topology *podgroup.NetworkTopology, jobMaxTier int, pending, bound []member) ([]placement.SubGroup, error) {
	if len(policies) == 0 {
		return nil, nil
	}
	byPolicy := map[string]podgroup.SubGroupPolicy{}
	for _, p := range policies {
		byPolicy[p.Name] = p
	}
	job := topology
	if job == nil {
		job = &podgroup.NetworkTopology{Mode: podgroup.ModeSoft}
	}
	byID := map[string]*placement.SubGroup{}
	var order []podgroup.SubGroup
	for _, m := range pending {
		if !m.inSub {
			continue
		}
		sg := byID[m.subGroup.ID]
		if sg == nil {
			nt := byPolicy[m.subGroup.Policy].NetworkTopology
			if nt == nil {
				nt = job
			}
			maxTier := jobMaxTier
			if nt.HighestTierAllowed != nil || nt.HighestTierName != "" {
				t, err := c.resolveTier(nt)
				if err == nil && t > jobMaxTier {
					err = fmt.Errorf("its tier %d is above the job's %d", t, jobMaxTier)
				}
				if err != nil {
					return nil, fmt.Errorf("annotation %s: policy %q: %v", podgroup.SubGroupPolicyAnnotation, m.subGroup.Policy, err)
				}
				maxTier = t
			}
			sg = &placement.SubGroup{ID: m.subGroup.ID, Policy: m.subGroup.Policy, Constraint: nt.String(),
				MaxTier: maxTier, Soft: nt.Mode == podgroup.ModeSoft}
			byID[m.subGroup.ID] = sg
			order = append(order, m.subGroup)
		}
		sg.Pending = append(sg.Pending, m.pod.Name)
	}
	for _, m := range bound {
		if sg := byID[m.subGroup.ID]; m.inSub && sg != nil {
			sg.Placed = append(sg.Placed, m.pod.Spec.NodeName)
		}
	}
	podgroup.SortSubGroups(order)
	out := make([]placement.SubGroup, 0, len(order))
	for _, sg := range order {
		out = append(out, *byID[sg.ID])
	}
	return out, nil
}

// nodeCapacity returns how many members fit on a node by their requests, capped at the
// demand, or 0 and why none fits for reasons other than room.
func (c *Cluster) nodeCapacity(name string, in searchInput) (int, string) {
	n := c.nodes[name]
	if n.unusable != "" {
		return 0, n.unusable
	}
	noNewPods := func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	}
	if taint, found := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.node.Spec.Taints, in.shape.Spec.Tolerations, noNewPods, true); found {
		return 0, fmt.Sprintf("taint %s not tolerated", taint.ToString())
	}
	if ok, _ := in.affinity.Match(n.node); !ok {
		return 0, "does not match the pods' node selector or affinity"
	}
	holds := in.demand
	for r, q := range in.request {
		if q.Sign() <= 0 {
			continue
		}
		free := n.free(r)
		holds = min(holds, int(free.MilliValue()/q.MilliValue()))
	}
	return holds, ""
}

// candidate reports one HyperNode (or the whole cluster) of a tier.
func (c *Cluster) candidate(name string, holds int, in searchInput, unusable map[string]string, placedIn string,
	allowed, aboveAllowed bool, plan *placement.Plan) CandidateReport {
	r := CandidateReport{Name: name, Holds: min(holds, in.demand), Needs: in.demand}
	if placedIn != "" {
		if lca, ok := c.snap.LCA(name, placedIn); !ok || lca != name {
			r.Reason = fmt.Sprintf("does not contain the bound members (they span %s)", placedIn)
			return r
		}
	}
	if holds >= in.demand {
		r.Fits = true
		switch {
		case !allowed:
			r.Reason = "has room, but its tier is above the allowed one"
		case plan != nil && plan.Domain == name:
			r.Reason = "has room: the planner picks it"
		case aboveAllowed:
			r.Reason = "has room (soft: used only if no allowed tier has)"
		default:
			r.Reason = "has room"
		}
		return r
	}
	r.Reason = c.shortfall(name, holds, in, unusable)
	return r
}

// shortfall says why a HyperNode holds fewer members than needed: its unusable nodes, and
// the resource that runs out first, noting when free capacity is split over nodes so that
// less fits than its sum suggests.
func (c *Cluster) shortfall(name string, holds int, in searchInput, unusable map[string]string) string {
	var nodes []string
	if name == hypernode.VirtualRootName {
		for _, n := range c.Nodes {
			nodes = append(nodes, n.Name)
		}
	} else {
		nodes = c.snap.Nodes(name)
	}
	whyCount := map[string]int{}
	var usable []string
	for _, n := range nodes {
		if why := unusable[n]; why != "" {
			whyCount[why]++
		} else {
			usable = append(usable, n)
		}
	}
	var parts []string
	if len(usable) == 0 {
		if len(nodes) == 0 {
			return "it has no nodes"
		}
		parts = append(parts, "no usable node")
	} else {
		// The resource that runs out first, by its free sum over the usable nodes.
		var limit v1.ResourceName
		var limitFree resource.Quantity
		bySum := -1
		for _, r := range sortedResources(in.request) {
			q := in.request[r]
			if q.Sign() <= 0 {
				continue
			}
			free := resource.NewQuantity(0, q.Format)
			for _, n := range usable {
				free.Add(c.nodes[n].free(r))
			}
			if fit := int(free.MilliValue() / q.MilliValue()); bySum < 0 || fit < bySum {
				limit, limitFree, bySum = r, *free, fit
			}
		}
		if limit != "" {
			per := in.request[limit]
			what := fmt.Sprintf("free %s %s, %s per pod", limit, limitFree.String(), per.String())
			if limit == v1.ResourcePods {
				what = fmt.Sprintf("room for %s more pods by the nodes' pod limit", limitFree.String())
			}
			if bySum > holds {
				what += fmt.Sprintf(", split over nodes so that only %d fit", holds)
			}
			parts = append(parts, what)
		}
	}
	for _, why := range sortedNames(whyCount) {
		parts = append(parts, fmt.Sprintf("%d %s: %s", whyCount[why], plural(whyCount[why], "node", "nodes"), why))
	}
	return strings.Join(parts, "; ")
}

// sortedResources orders a request's resources by name.
func sortedResources(l v1.ResourceList) []v1.ResourceName {
	out := make([]v1.ResourceName, 0, len(l))
	for r := range l {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// schedulerView collects the pending members' PodScheduled conditions and the latest Events
// on the PodGroup and its members.
func (c *Cluster) schedulerView(namespace, name string, members []member) SchedulerReport {
	var out SchedulerReport
	type condKey struct{ reason, message string }
	byCond := map[condKey][]string{}
	var condOrder []condKey
	memberNames := sets.New[string]()
	for _, m := range members {
		memberNames.Insert(m.pod.Name)
		if m.pod.Spec.NodeName != "" {
			continue
		}
		for _, cond := range m.pod.Status.Conditions {
			if cond.Type != v1.PodScheduled || cond.Status != v1.ConditionFalse {
				continue
			}
			k := condKey{cond.Reason, cond.Message}
			if _, seen := byCond[k]; !seen {
				condOrder = append(condOrder, k)
			}
			byCond[k] = append(byCond[k], m.pod.Name)
		}
	}
	for _, k := range condOrder {
		out.Conditions = append(out.Conditions, ConditionReport{Pods: byCond[k], Reason: k.reason, Message: k.message})
	}

	for _, ev := range c.Events {
		obj := ev.InvolvedObject
		if obj.Namespace != namespace {
			continue
		}
		if !(obj.Kind == "PodGroup" && obj.Name == name) && !(obj.Kind == "Pod" && memberNames.Has(obj.Name)) {
			continue
		}
		if obj.Kind == "Pod" && ev.Reason == "Scheduled" {
			// One per bound member, and the placement tree already shows where each went.
			continue
		}
		count := ev.Count
		if ev.Series != nil {
			count = max(count, ev.Series.Count)
		}
		last := eventTime(ev)
		out.Events = append(out.Events, EventReport{Object: obj.Kind + "/" + obj.Name, Type: ev.Type, Reason: ev.Reason,
			Message: ev.Message, Count: count, LastSeen: last, Age: duration.HumanDuration(c.Now.Sub(last))})
	}
	sort.SliceStable(out.Events, func(i, j int) bool {
		if !out.Events[i].LastSeen.Equal(out.Events[j].LastSeen) {
			return out.Events[i].LastSeen.After(out.Events[j].LastSeen)
		}
		return out.Events[i].Object < out.Events[j].Object
	})
	if len(out.Events) > eventsShown {
		out.Events = out.Events[:eventsShown]
	}
	return out
}

// eventTime is when an Event was last seen, whichever API wrote it: core/v1 recorders set
// lastTimestamp, events.k8s.io/v1 recorders set eventTime and series.
func eventTime(e *v1.Event) time.Time {
	t := e.LastTimestamp.Time
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	if e.EventTime.After(t) {
		t = e.EventTime.Time
	}
	if t.IsZero() {
		t = e.FirstTimestamp.Time
	}
	if t.IsZero() {
		t = e.CreationTimestamp.Time
	}
	return t.UTC()
}
