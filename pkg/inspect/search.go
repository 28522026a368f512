package inspect

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	configv1 "github.com/hypernode-dev/hypernode-scheduler/apis/config/v1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// searchInput is the gang as the capacity check sees it: one member's shape, its request
// and node affinity, and how many members are pending.
type searchInput struct {
	shape    *v1.Pod
	request  v1.ResourceList
	demand   int
	affinity nodeaffinity.RequiredNodeAffinity
	// shapes describes the pending members' shapes when they differ ("" otherwise).
	shapes string
	// subGroups is true when the members form sub-groups.
	subGroups bool
	// devices is what the shape's own claims take (devices.DemandOfClaims): a node holds
	// no more members than its free devices of each class allow.
	devices devices.Demand
}

// planOutcome is the planner's answer on the search's data.
type planOutcome struct {
	// plan is nil when the planner places nothing; whole is true when it places every
	// pending member, planned counts those it places.
	plan    *placement.Plan
	whole   bool
	planned int
}

// binPackResources and binPackWeights are the scheduler's default bin-pack weights.
var binPackResources, binPackWeights = placement.Weights(configv1.DefaultBinPackCPUWeight,
	configv1.DefaultBinPackMemoryWeight, configv1.DefaultBinPackResources())

// binPackUsage returns a node's requested and allocatable binPackResources.
func (c *Cluster) binPackUsage(name string) (used, alloc []float64) {
	n := c.nodes[name]
	return placement.Amounts(n.requested, binPackResources), placement.Amounts(n.node.Status.Allocatable, binPackResources)
}

// search builds the SearchReport of the pending members, of the given shapes; held is why
// the scheduler keeps them out of scheduling ("" when it does not): then no candidate is
// picked and held is the verdict.
func (c *Cluster) search(shape *v1.Pod, request v1.ResourceList, gang podgroup.Gang, shapes []podgroup.Shape, held string) (*SearchReport, error) {
	in, notCounted := c.inputOf(shape, request, len(gang.Pending))
	// The scheduler's own request: a plain gang is not placed by topology, but the question
	// "where would it fit" has the answer of a soft gang.
	req, err := placement.GangRequest(c.snap, gang)
	if err != nil {
		return nil, err
	}
	maxTier := req.MaxTier
	in.subGroups = len(req.SubGroups) > 0

	report := &SearchReport{Demand: in.demand, MaxTier: maxTier, Soft: req.Soft, NotCounted: notCounted}
	nodes := map[string]placement.Node{}
	unusable := map[string]string{}
	for _, n := range c.Nodes {
		holds, why := c.nodeCapacity(n.Name, in)
		if why != "" {
			unusable[n.Name] = why
			report.UnusableNodes = append(report.UnusableNodes, NodeReason{Node: n.Name, Reason: why})
		}
		used, alloc := c.binPackUsage(n.Name)
		nodes[n.Name] = placement.Node{Capacity: holds, Used: used, Allocatable: alloc}
	}
	sort.Slice(report.UnusableNodes, func(i, j int) bool { return report.UnusableNodes[i].Node < report.UnusableNodes[j].Node })
	// The scheduler's default candidate scoring: BinPack with the default weights (a scheduler
	// configured otherwise may pick another candidate of the same tier).
	req.Nodes, req.Strategy, req.Weights = nodes, placement.BinPack, binPackWeights
	req.PodRequest = placement.Amounts(in.request, binPackResources)
	if len(shapes) > 1 {
		// Members of several shapes: planned shape by shape as the scheduler does, with
		// requests standing in for its Filter plugins.
		req.Shapes, req.Fit = c.shapeCapacities(shapes)
		in.shapes = describeShapes(shapes)
	}
	capacity := placement.Capacities(req)
	report.PlacedIn = placement.LowestCommon(c.snap, req.Placed)
	plan, planErr := placement.Make(req)
	outcome := planOutcome{plan: plan, whole: planErr == nil, planned: in.demand}
	var fallbackReq placement.Request
	var deferred []string
	if planErr != nil {
		// What the scheduler does next for a job that can run with fewer members.
		plan, fallbackReq, deferred, planErr = placement.Fallback(req, planErr, gang.Info, gang.SubGroups, len(req.Placed))
		outcome.plan, outcome.planned = plan, in.demand-len(deferred)
	}
	report.capacity, report.in, report.heldBack = capacity, in, held != ""
	defer func() { report.plan = outcome.plan }()
	switch {
	case held != "":
		// The planner's answer holds only once the scheduler lets the members in.
		outcome.plan = nil
		report.Verdict = "the scheduler holds the members back before it plans: " + held
	case planErr != nil:
		var unsat *placement.Unsatisfiable
		if !errors.As(planErr, &unsat) {
			return nil, planErr
		}
		report.Verdict = unsat.Message
	default:
		report.Fits, report.Deferred = true, len(deferred)
		domainInfo, _ := c.snap.HyperNode(plan.Domain)
		report.Verdict = fmt.Sprintf("it fits now: the planner would place the %d pending %s in %s (tier %d)",
			in.demand, plural(in.demand, "pod", "pods"), plan.Domain, domainInfo.Tier)
		if len(deferred) > 0 {
			report.Verdict = fmt.Sprintf("it fits now without all its members: the planner would place %d of the %d pending pods in %s (tier %d); %s",
				outcome.planned, in.demand, plan.Domain, domainInfo.Tier, leftOut(req, fallbackReq, len(deferred), gang.Info.MinMember()))
		}
	}

	// Tiers: the real tiers and the whole cluster, up to the allowed tier and one above (all
	// of them for a soft gang, which the planner may place up to the whole cluster).
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
			cands = append(cands, c.candidate(name, capacity[name], in, unusable, report.PlacedIn, allowed, tier > maxTier, outcome))
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
		if tier > maxTier && !req.Soft {
			break // one tier above the allowed one, for context; a soft gang may go up to the cluster
		}
	}
	return report, nil
}

// inputOf is the search input of demand members of shape (whose requests are request), and
// what of them the counts leave out: resources only DRA provides, claims they cannot read.
func (c *Cluster) inputOf(shape *v1.Pod, request v1.ResourceList, demand int) (searchInput, []string) {
	counted, notCounted := c.counted(request)
	in := searchInput{shape: shape, request: counted, demand: demand, affinity: nodeaffinity.GetRequiredNodeAffinity(shape)}
	if len(shape.Spec.ResourceClaims) > 0 {
		var err error
		if in.devices, err = devices.DemandOfClaims(shape, c.claim); err != nil || !in.devices.Bounded {
			// Devices the count cannot read: named, as a resource only DRA provides is.
			notCounted = append(notCounted, "resource claims")
		} else if !in.devices.Exact && len(in.devices.ByClass) > 0 {
			// Counted per class, an upper bound: what else the claims ask is the allocator's.
			notCounted = append(notCounted, "device requests beyond a count of one class (selectors, constraints, alternatives)")
		}
	}
	return in, notCounted
}

// shapeCapacities returns each shape's capacity per node and a Fitter that counts, by
// requests, what fits next to the members planned on a node.
func (c *Cluster) shapeCapacities(shapes []podgroup.Shape) ([]placement.Shape, placement.Fitter) {
	out := make([]placement.Shape, len(shapes))
	inputs := make([]searchInput, len(shapes))
	for i, s := range shapes {
		request, _ := c.counted(podRequests(s.Rep))
		in := searchInput{shape: s.Rep, request: request, demand: len(s.Members), affinity: nodeaffinity.GetRequiredNodeAffinity(s.Rep)}
		inputs[i] = in
		out[i] = placement.Shape{Name: s.Name, Members: s.Members, Capacity: map[string]int{},
			Request: placement.Amounts(request, binPackResources)}
		for _, n := range c.Nodes {
			out[i].Capacity[n.Name], _ = c.nodeCapacity(n.Name, in)
		}
	}
	fit := func(node string, planned []int, shape, limit int) int {
		n := c.nodes[node]
		holds := limit
		for r, q := range inputs[shape].request {
			if q.Sign() <= 0 {
				continue
			}
			free := n.free(r)
			for i, count := range planned {
				used := inputs[i].request[r]
				for range count {
					free.Sub(used)
				}
			}
			holds = min(holds, max(int(free.MilliValue()/q.MilliValue()), 0))
		}
		return holds
	}
	return out, fit
}

// nodeCapacity returns how many members fit on a node by their requests, capped at the
// demand, or 0 and why none fits for reasons other than room.
func (c *Cluster) nodeCapacity(name string, in searchInput) (int, string) {
	return c.nodeCapacityFreed(name, in, nil)
}

// nodeCapacityFreed is nodeCapacity once the pods holding freed (their requests) have left.
// Devices their claims hold are counted as held still.
func (c *Cluster) nodeCapacityFreed(name string, in searchInput, freed v1.ResourceList) (int, string) {
	n := c.nodes[name]
	if why := refusedBy(n.node, in.shape.Spec.Tolerations); why != "" {
		return 0, why
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
		if q, ok := freed[r]; ok {
			free.Add(q)
		}
		if used, total := c.deviceAmount(name, r); total > 0 {
			// A resource DRA devices provide on this node: those no claim holds.
			free = *resource.NewQuantity(total-used, resource.DecimalSI)
		}
		holds = min(holds, int(free.MilliValue()/q.MilliValue()))
	}
	if m, ok := c.devices.FreeFor(name, in.devices); ok {
		holds = min(holds, m)
	}
	return holds, ""
}

// claim is a ResourceClaim of the read, by namespace and name.
func (c *Cluster) claim(namespace, name string) (*resourcev1.ResourceClaim, error) {
	for _, claim := range c.ResourceClaims {
		if claim.Namespace == namespace && claim.Name == name {
			return claim, nil
		}
	}
	return nil, apierrors.NewNotFound(resourcev1.Resource("resourceclaims"), name)
}

// refusedBy says why kube-scheduler's NodeUnschedulable and TaintToleration filters keep pods
// with these tolerations off the node ("" when they do not). It reads taints, not the Ready
// condition, as the scheduler does: a pod that tolerates a cordon or a not-ready taint (a
// DaemonSet's, an agent's) can be placed there.
func refusedBy(n *v1.Node, tolerations []v1.Toleration) string {
	cordon := v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}
	if n.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(klog.Background(), tolerations, &cordon, true) {
		return "cordoned"
	}
	noNewPods := func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	}
	taint, found := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, tolerations, noNewPods, true)
	if !found {
		return ""
	}
	// The node lifecycle controller's taints, in the words of the node's state.
	switch taint.Key {
	case v1.TaintNodeNotReady:
		return "not ready"
	case v1.TaintNodeUnreachable:
		return "unreachable"
	case v1.TaintNodeUnschedulable:
		return "cordoned"
	}
	return fmt.Sprintf("taint %s not tolerated", taint.ToString())
}

// candidate reports one HyperNode (or the whole cluster) of a tier.
func (c *Cluster) candidate(name string, holds int, in searchInput, unusable map[string]string, placedIn string,
	allowed, aboveAllowed bool, outcome planOutcome) CandidateReport {
	r := CandidateReport{Name: name, Holds: min(holds, in.demand), Needs: in.demand}
	if !c.holdsPlaced(name, placedIn) {
		r.Reason = fmt.Sprintf("does not contain the bound members (they span %s)", placedIn)
		return r
	}
	if outcome.plan != nil && outcome.plan.Domain == name {
		r.Fits = true
		switch {
		case outcome.whole:
			r.Reason = "has room: the planner picks it"
		case holds >= in.demand:
			// Counted alone the pods fit; their sub-groups or shapes packed together do not.
			r.Reason = fmt.Sprintf("room for the %d pods counted alone, but the planner fits %d of them here (see below); the rest wait for room", in.demand, outcome.planned)
		default:
			r.Reason = fmt.Sprintf("the planner picks it for %d of the %d pods; the rest wait for room", outcome.planned, in.demand)
		}
		return r
	}
	if holds >= in.demand {
		r.Fits = true
		switch {
		case !allowed:
			r.Reason = "has room, but its tier is above the allowed one"
		case in.subGroups && !outcome.whole:
			r.Reason = "has room for the job, not for its sub-groups (see the planner below)"
		case aboveAllowed:
			r.Reason = "has room (soft: used only if no allowed tier has)"
		case in.shapes != "" && !outcome.whole:
			// Each shape counted alone is an upper bound: packed together they do not fit.
			r.Fits = false
			r.Reason = fmt.Sprintf("room for each shape counted alone, but the %d pods (%s) do not fit together (see the planner below)", in.demand, in.shapes)
		case in.shapes != "":
			r.Reason = "has room, each shape counted alone"
		default:
			r.Reason = "has room"
		}
		return r
	}
	if in.shapes != "" {
		r.Reason = fmt.Sprintf("room for at most %d of the %d pods (%s), each shape counted alone", holds, in.demand, in.shapes)
		return r
	}
	r.Reason = c.shortfall(name, holds, in, unusable)
	return r
}

// leftOut says which pending members a fallback plan, made from fallbackReq, leaves out of
// req's (n of them), and why the job may run without them.
func leftOut(req, fallbackReq placement.Request, n, minMember int) string {
	if len(fallbackReq.SubGroups) == len(req.SubGroups) {
		return fmt.Sprintf("the remaining %d %s for room (the gang runs with its minMember %d)", n, plural(n, "waits", "wait"), minMember)
	}
	var ids []string
	inDropped := 0
	for _, sg := range req.SubGroups[len(fallbackReq.SubGroups):] {
		ids = append(ids, sg.ID)
		inDropped += len(sg.Pending)
	}
	out := fmt.Sprintf("the remaining %d %s for room: the job runs without %s %s (its minMember and minSubGroups allow it)",
		n, plural(n, "waits", "wait"), plural(len(ids), "sub-group", "sub-groups"), listWithMore(ids, 5))
	if trimmed := n - inDropped; trimmed > 0 {
		// Every sub-group left out was not enough: the elastic fallback trimmed the rest.
		out += fmt.Sprintf(", and without %d of its other pods (minMember %d)", trimmed, minMember)
	}
	return out
}

// holdsPlaced reports whether the HyperNode holds the bound members, which span placedIn
// ("" when none is bound).
func (c *Cluster) holdsPlaced(name, placedIn string) bool {
	if placedIn == "" {
		return true
	}
	lca, ok := c.snap.LCA(name, placedIn)
	return ok && lca == name
}

// describeShapes lists shapes as "2 x cpu=4,nvidia.com/gpu=8, 1 x cpu=1".
func describeShapes(shapes []podgroup.Shape) string {
	parts := make([]string, len(shapes))
	for i, s := range shapes {
		parts[i] = fmt.Sprintf("%d x %s", len(s.Members), s.Name)
	}
	return strings.Join(parts, ", ")
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
