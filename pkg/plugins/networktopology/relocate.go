package networktopology

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/metrics"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// A planned member can find its planned leaf (or node) full: a pod of higher priority, which
// does not see the plan's nominations, a pod bound by another scheduler, or a node that lost
// capacity took the room. Rather than failing its gang's round (every waiting member released
// and the gang planned again), PostFilter moves the member to a node of its gang's domain
// that is free for it now, nominates it there, and retries it.

// relocationBatch is how many nodes the search filters in parallel at a time: the first node
// in order that fits wins, and most searches stop in the first batch.
const relocationBatch = 64

// relocateOutcome says whether a relocation was searched for and found.
type relocateOutcome int

const (
	// notPlanned: the member is not (or no longer) a pending member of its gang's plan.
	notPlanned relocateOutcome = iota
	noRoom
	moved
)

// relocation is where a member moved: the node, its leaf, and the domain searched.
type relocation struct {
	node, leaf, domain string
}

// relocate finds a node of the member's domain where it fits now, next to every nomination
// (the other members' planned nodes stay theirs), and moves the member there in its plan.
func (p *NetworkTopologyAware) relocate(ctx context.Context, state fwk.CycleState, pod *v1.Pod, key podgroup.Key, info podgroup.Info, planned *preFilterState) (relocation, relocateOutcome) {
	tree := p.cache.Snapshot()
	p.gangs.Lock()
	plan := p.gangs.PlanLocked(key)
	ok := plan != nil && plan.PodLeaf[pod.Name] == planned.leaf && !plan.Reserved.Has(pod.Name)
	var domain string
	used := sets.New[string]()
	if ok {
		domain = plan.Domain
		for leaf, n := range plan.Promised {
			if n > 0 {
				used.Insert(leaf)
			}
		}
		for leaf, n := range plan.PlacedByLeaf {
			if n > 0 {
				used.Insert(leaf)
			}
		}
	}
	p.gangs.Unlock()
	if !ok || planned.leaf == placement.LooseLeaf {
		return relocation{}, notPlanned
	}
	domain = relocationDomain(tree, domain, planned.leaf, pod, info)
	// A plan of one shape narrowed the member to its whole leaf, which had no room; a plan of
	// several shapes narrowed it to one node, and its leaf's other nodes come first.
	leaves := relocationLeaves(tree, domain, planned.leaf, used, planned.node != "")
	var candidates []string
	for _, leaf := range leaves {
		hn, _ := tree.HyperNode(leaf)
		for _, node := range hn.Nodes {
			if node != planned.node {
				candidates = append(candidates, node)
			}
		}
	}
	// Filter keeps the member to its planned set; while it is tried elsewhere, it does not.
	state.Write(preFilterStateKey, &preFilterState{leaf: planned.leaf, relocating: true})
	defer state.Write(preFilterStateKey, planned)
	nodeInfos := p.handle.SnapshotSharedLister().NodeInfos()
	if p.devices.TakesDevices(pod) {
		devices.Attach(state, p.devices)
	}
	for start := 0; start < len(candidates); start += relocationBatch {
		batch := candidates[start:min(start+relocationBatch, len(candidates))]
		fits := make([]bool, len(batch))
		p.handle.Parallelizer().Until(ctx, len(batch), func(i int) {
			if ni, err := nodeInfos.Get(batch[i]); err == nil {
				fits[i] = p.handle.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni).IsSuccess() &&
					p.devicesFitWithNominated(ctx, state, pod, ni)
			}
		}, "NetworkTopologyAwareRelocation")
		for i, fit := range fits {
			if !fit {
				continue
			}
			leaf, _ := tree.LeafOf(batch[i])
			r := relocation{node: batch[i], leaf: leaf, domain: domain}
			if !p.moveMember(tree, key, pod, planned.leaf, r) {
				return relocation{}, notPlanned
			}
			return r, moved
		}
	}
	return relocation{}, noRoom
}

// relocationDomain is where a member may move: its gang's domain, or, for a member of a
// sub-group with a hard constraint, the highest HyperNode above its planned leaf that the
// sub-group's constraint allows, when that is lower (the sub-group's other members are
// below it, so the sub-group stays inside one allowed HyperNode).
func relocationDomain(tree *hypernode.Snapshot, domain, leaf string, pod *v1.Pod, info podgroup.Info) string {
	sub, ok := podgroup.SubGroupOf(info.SubGroupPolicies, pod)
	if !ok {
		return domain
	}
	policy, _ := info.Policy(sub.Policy)
	constraint := policy.NetworkTopology
	if constraint == nil || constraint.Mode != podgroup.ModeHard {
		return domain
	}
	maxTier, err := placement.MaxTier(tree, constraint)
	if err != nil {
		return leaf
	}
	within := leaf
	for _, a := range tree.Ancestors(leaf) {
		hn, ok := tree.HyperNode(a)
		if !ok || hn.Tier > maxTier {
			break
		}
		within = a
		if a == domain {
			break
		}
	}
	return within
}

// relocationLeaves orders the leaves of the domain for a member that has no room in its
// planned leaf: the leaves already holding the gang's members first (the gang's traffic
// crosses no new leaf switch), then the others; in each, the nearest to the planned leaf
// first (the lowest tier of their common ancestor), then by name.
func relocationLeaves(tree *hypernode.Snapshot, domain, planned string, used sets.Set[string], includePlanned bool) []string {
	type candidate struct {
		name string
		used bool
		tier int
	}
	var candidates []candidate
	for _, leaf := range tree.Leaves(domain) {
		if leaf == planned && !includePlanned {
			continue
		}
		tier := math.MaxInt
		if lca, ok := tree.LCA(leaf, planned); ok {
			if hn, ok := tree.HyperNode(lca); ok {
				tier = hn.Tier
			}
		}
		candidates = append(candidates, candidate{name: leaf, used: used.Has(leaf), tier: tier})
	}
	sort.Slice(candidates, func(i, j int) bool {
		a, b := candidates[i], candidates[j]
		if a.used != b.used {
			return a.used
		}
		if a.tier != b.tier {
			return a.tier < b.tier
		}
		return a.name < b.name
	})
	out := make([]string, len(candidates))
	for i, c := range candidates {
		out[i] = c.name
	}
	return out
}

// moveMember records the relocation in the gang's plan: the member's promised slot moves to
// its new leaf (and node), which the plan then watches like its other leaves.
func (p *NetworkTopologyAware) moveMember(tree *hypernode.Snapshot, key podgroup.Key, pod *v1.Pod, from string, r relocation) bool {
	p.gangs.Lock()
	defer p.gangs.Unlock()
	plan := p.gangs.PlanLocked(key)
	if plan == nil || plan.PodLeaf[pod.Name] != from || plan.Reserved.Has(pod.Name) {
		return false
	}
	if plan.Promised[from] > 0 {
		plan.Promised[from]--
	}
	plan.Promised[r.leaf]++
	plan.PodLeaf[pod.Name] = r.leaf
	if plan.PodNode != nil {
		plan.PodNode[pod.Name] = r.node
	}
	if _, ok := plan.LeafInfos[r.leaf]; !ok {
		hn, _ := tree.HyperNode(r.leaf)
		plan.LeafInfos[r.leaf] = hn
		plan.LeafNodes[r.leaf] = sets.New(hn.Nodes...)
	}
	// The scheduler drops the member's nomination when it ends the failed attempt; the member
	// is nominated on its new node once it is done (renominate). Until then the plan counts it
	// among its nominations, so that dropping the plan withdraws it.
	if plan.Nominated == nil {
		plan.Nominated = map[string]*v1.Pod{}
	}
	plan.Nominated[pod.Name] = pod
	if _, ok := plan.Relocated[pod.Name]; !ok {
		p.relocations.Add(1)
	}
	plan.Relocated[pod.Name] = r.node
	plan.LastUsed = time.Now()
	return true
}

// renominate nominates a relocated member on its new node again, after the scheduler ended
// the attempt that relocated it (which dropped its nomination): on each update of the pod
// (the attempt's condition comes right after) and at its next PreFilter, which consumes the
// relocation. Re-adding a nomination is idempotent, so an update that arrives before the
// scheduler dropped it does no harm.
func (p *NetworkTopologyAware) renominate(logger klog.Logger, key podgroup.Key, pod *v1.Pod, consume bool) {
	p.gangs.Lock()
	node, relocated := "", false
	if plan := p.gangs.PlanLocked(key); plan != nil {
		node, relocated = plan.Relocated[pod.Name]
		if relocated && consume {
			delete(plan.Relocated, pod.Name)
			p.relocations.Add(-1)
		}
	}
	p.gangs.Unlock()
	if relocated {
		p.nominateOn(logger, pod, node)
	}
}

// relocated finishes a relocation in PostFilter: the member is activated (no cluster event
// would requeue it; it comes back after its back-off), and the Event, metric and status say
// where it went. PostFilter's Success keeps DefaultPreemption and Gang's PostFilter from
// running; no NominatingInfo, since the scheduler would write it to the pod's status, which
// the nominator then follows even after the plan has moved on.
func (p *NetworkTopologyAware) relocated(ctx context.Context, pod *v1.Pod, key podgroup.Key, info podgroup.Info, from *preFilterState, r relocation) (*fwk.PostFilterResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	where := "HyperNode " + from.leaf
	if from.node != "" {
		where = "node " + from.node
	}
	msg := fmt.Sprintf("gang %s: no room for member %s in its planned %s now; it moves to node %s in HyperNode %s, inside %s",
		key, pod.Name, where, r.node, r.leaf, r.domain)
	metrics.MemberRelocationsTotal.WithLabelValues(metrics.ResultRelocated).Inc()
	if info.PodGroup != nil {
		p.events.Record(info.PodGroup, v1.EventTypeNormal, EventMemberRelocated, msg)
	}
	logger.V(3).Info("Gang member relocated inside its domain", "pod", klog.KObj(pod), "podGroup", key, "from", where, "node", r.node, "leaf", r.leaf, "domain", r.domain)
	gangstate.Activate(logger, p.handle, pod)
	return nil, fwk.NewStatus(fwk.Success, msg)
}

// devicesFitWithNominated reports whether pod's claims can be allocated on ni next to the
// claims of the pods nominated there that the Filter run counts (priority at least pod's):
// DynamicResources' Filter counts their resources, not their devices, so a sibling planned
// on the node would otherwise lose its GPUs to the relocated member. state must have a
// device source attached (devices.Attach).
func (p *NetworkTopologyAware) devicesFitWithNominated(ctx context.Context, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) bool {
	if !p.devices.TakesDevices(pod) {
		return true
	}
	priority := corev1helpers.PodPriority(pod)
	var clone fwk.NodeInfo
	for _, pi := range p.handle.NominatedPodsForNode(ni.Node().Name) {
		if np := pi.GetPod(); np.UID != pod.UID && corev1helpers.PodPriority(np) >= priority {
			if clone == nil {
				clone = ni.Snapshot()
			}
			clone.AddPodInfo(pi)
		}
	}
	if clone == nil {
		return true // DynamicResources' Filter answered on the same devices
	}
	fits, reason, err := devices.Fits(ctx, state, clone, pod, true)
	if err != nil || !fits {
		klog.FromContext(ctx).V(5).Info("Relocation candidate lacks devices for the member next to the pods nominated there", "node", ni.Node().Name, "reason", reason, "err", err)
		return false
	}
	return true
}
