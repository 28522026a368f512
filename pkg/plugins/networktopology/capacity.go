package networktopology

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// preFilterRunner is the part of kube-scheduler's framework that runs every PreFilter plugin
// of the profile; the Handle a plugin receives is that framework.
type preFilterRunner interface {
	RunPreFilterPlugins(ctx context.Context, state fwk.CycleState, pod *v1.Pod) (*fwk.PreFilterResult, *fwk.Status, sets.Set[string])
}

// simulationState prepares a cycle state for simulating pod with the Filter plugins: every
// PreFilter plugin of the profile runs on a fresh state, which also records the Filter plugins
// to skip. The scheduling cycle's own state cannot serve: kube-scheduler records the plugins
// to skip only after the last PreFilter plugin, this one, has returned.
func (p *NetworkTopologyAware) simulationState(ctx context.Context, pod *v1.Pod) (fwk.CycleState, *fwk.Status) {
	return SimulationState(ctx, p.handle, p.devices, pod)
}

// SimulationState is the cycle state in which the profile's Filter plugins simulate pod on a
// node, this plugin's narrowing to a plan left out, with the devices of the pods a
// simulation adds counted (FilterWithDevices): GangPreemption simulates with it too.
func SimulationState(ctx context.Context, handle fwk.Handle, source *devices.Source, pod *v1.Pod) (fwk.CycleState, *fwk.Status) {
	runner, ok := handle.(preFilterRunner)
	if !ok {
		return nil, fwk.AsStatus(fmt.Errorf("the scheduler framework cannot run PreFilter plugins for a capacity simulation"))
	}
	state := framework.NewCycleState()
	// This plugin's PreFilter skips it (it would otherwise plan recursively), and so does
	// Gang's (no attempt is recorded).
	gangstate.SimulationMark.Set(state)
	if _, status, _ := runner.RunPreFilterPlugins(ctx, state, pod); !status.IsSuccess() {
		return nil, status
	}
	devices.Attach(state, source)
	return state, nil
}

// maxRefinements bounds how many domains planLazily simulates one by one before it simulates
// every node that is left.
const maxRefinements = 4

// planLazily plans a BinPack gang without simulating every node. The planner first works on an
// upper bound of each node's capacity (free resources divided by the pod's request, no plugin
// called), which req.Nodes (and, for several shapes, req.Shapes) holds; simulate replaces the
// bounds of the given nodes with real capacities. The nodes of the domain the planner picks
// are simulated for real and the gang planned again, until the chosen domain's nodes all have
// real capacities. The result is the one a full simulation gives: an upper bound can only
// make a candidate look feasible, never hide one; BinPack ranks candidates by resource usage,
// not by capacity; and the spread inside the domain uses real capacities. When the gang fits
// nowhere, every node is simulated, so that the explanation quotes real capacities. It
// returns the plan, the request it was made from and how many nodes it simulated.
func (p *NetworkTopologyAware) planLazily(req placement.Request, simulate func(*placement.Request, sets.Set[string])) (*placement.Plan, placement.Request, int, error) {
	real := sets.New[string]()
	simulateMissing := func(names sets.Set[string]) {
		simulate(&req, names)
		real = real.Union(names)
	}
	for round := 0; ; round++ {
		result, err := placement.Make(req)
		if err != nil || round == maxRefinements {
			if real.Len() == len(req.Nodes) {
				return result, req, real.Len(), err
			}
			// Every node left: an exact explanation, or a plan from real capacities only.
			rest := sets.New[string]()
			for n := range req.Nodes {
				if !real.Has(n) {
					rest.Insert(n)
				}
			}
			simulateMissing(rest)
			result, err = placement.Make(req)
			return result, req, real.Len(), err
		}
		var domain []string
		if result.Domain == hypernode.VirtualRootName {
			domain = slices.Collect(maps.Keys(req.Nodes)) // the whole cluster, loose nodes included
		} else {
			domain = req.Tree.Nodes(result.Domain)
		}
		missing := sets.New[string]()
		for _, n := range domain {
			if !real.Has(n) {
				missing.Insert(n)
			}
		}
		if missing.Len() == 0 {
			return result, req, real.Len(), nil
		}
		simulateMissing(missing)
	}
}

// capacityBounds is an upper bound of nodeCapacities without calling any plugin: per node,
// the free amount of every resource the pod requests (and free pod slots) divided by the
// request, under the same cap.
func (p *NetworkTopologyAware) capacityBounds(pod *v1.Pod, nodes []fwk.NodeInfo, demand int) map[string]placement.Node {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	uncounted := p.uncountedResources(reqs, nodes)
	devBound := p.deviceBound(pod)
	out := make(map[string]placement.Node, len(nodes))
	for _, ni := range nodes {
		if ni.Node() == nil {
			continue
		}
		node := placement.Node{}
		node.Used, node.Allocatable = p.usage(ni)
		limit := demand
		requested, allocatable := ni.GetRequested(), ni.GetAllocatable()
		limit = min(limit, max(allocatable.GetAllowedPodNumber()-len(ni.GetPods()), 0))
		for name, q := range reqs {
			have := podgroup.Amount(allocatable, name)
			if have == 0 && uncounted[name] {
				// Not in allocatable because DRA or an extender provides it: only the
				// simulation can tell.
				continue
			}
			free, want := have-podgroup.Amount(requested, name), podgroup.QuantityAmount(name, q)
			if want > 0 {
				limit = min(limit, int(max(free, 0)/want))
			}
		}
		node.Capacity = deviceLimit(devBound, ni.Node().Name, limit)
		out[ni.Node().Name] = node
	}
	return out
}

// uncountedResources returns the extended resources of reqs that bounds cannot count: those
// a DeviceClass provides through DRA, and those no node advertises at all (NodeResourcesFit
// may be configured to ignore them, for a scheduler extender to manage; this plugin cannot
// read its args). Bounding every node to 0 would make every plan fall back to simulating the
// whole cluster.
func (p *NetworkTopologyAware) uncountedResources(reqs v1.ResourceList, nodes []fwk.NodeInfo) map[v1.ResourceName]bool {
	out := p.draBackedResources(reqs)
	for name := range reqs {
		if !podgroup.Scalar(name) || out[name] {
			continue
		}
		advertised := false
		for _, ni := range nodes {
			if _, ok := ni.GetAllocatable().GetScalarResources()[name]; ok && ni.Node() != nil {
				advertised = true
				break
			}
		}
		if !advertised {
			if out == nil {
				out = map[v1.ResourceName]bool{}
			}
			out[name] = true
		}
	}
	return out
}

// draBackedResources returns the extended resources of reqs that a DeviceClass provides
// through DRA (a node then lacks them in its allocatable, and still has them).
func (p *NetworkTopologyAware) draBackedResources(reqs v1.ResourceList) map[v1.ResourceName]bool {
	dra := p.handle.SharedDRAManager()
	if dra == nil || dra.DeviceClassResolver() == nil {
		return nil
	}
	out := map[v1.ResourceName]bool{}
	for name := range reqs {
		if name == v1.ResourceCPU || name == v1.ResourceMemory || name == v1.ResourceEphemeralStorage {
			continue
		}
		if dra.DeviceClassResolver().GetDeviceClass(name) != nil {
			out[name] = true
		}
	}
	return out
}

// nodeCapacities counts, per node, how many copies of pod pass the Filter plugins when added
// one after another, capped at demand (other plans' slots are nominations, which Filter
// counts). It runs on copies of the nodes and of the cycle state. With only set, it simulates
// just those nodes.
func (p *NetworkTopologyAware) nodeCapacities(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo, only sets.Set[string], demand int) map[string]placement.Node {
	if only != nil {
		subset := make([]fwk.NodeInfo, 0, only.Len())
		for _, ni := range nodes {
			if ni.Node() != nil && only.Has(ni.Node().Name) {
				subset = append(subset, ni)
			}
		}
		nodes = subset
	}
	out := make([]placement.Node, len(nodes))
	devBound := p.deviceBound(pod)
	exact := exactState(state, devBound)
	p.handle.Parallelizer().Until(ctx, len(nodes), func(i int) {
		ni := nodes[i]
		node := placement.Node{}
		node.Used, node.Allocatable = p.usage(ni)
		if ni.Node() == nil {
			out[i] = node
			return
		}
		if limit := deviceLimit(devBound, ni.Node().Name, demand); limit > 0 {
			st := state
			if exact != nil && devBound.Exact(ni.Node().Name) && !p.othersNominatedTakeDevices(ni, pod) {
				st = exact
			}
			node.Capacity = p.countFits(ctx, st, pod, ni, limit, false)
		}
		out[i] = node
	}, Name)
	result := make(map[string]placement.Node, len(nodes))
	for i, ni := range nodes {
		if ni.Node() != nil {
			result[ni.Node().Name] = out[i]
		}
	}
	return result
}

// countFits counts how many copies of pod pass the Filter plugins (with the other gangs'
// nominations) on ni when added one after another, at most limit (CountFits).
func (p *NetworkTopologyAware) countFits(ctx context.Context, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo, limit int, owned bool) int {
	return CountFits(ctx, p.handle, p.filterWithOthersNominated, state, pod, ni, limit, owned)
}

// Filter runs the Filter plugins for pod on a node.
type Filter func(ctx context.Context, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status

// CountFits counts how many copies of pod pass filter on ni when added one after another, at
// most limit; each copy runs the PreFilter AddPod extensions, so the plugins' state follows
// (anti-affinity between the copies). owned says that ni and state are copies the caller
// made; otherwise they are copied before the first change (they are shared). GangPreemption
// counts with it too.
func CountFits(ctx context.Context, handle fwk.Handle, filter Filter, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo, limit int, owned bool) int {
	logger := klog.FromContext(ctx)
	fits := 0
	for fits < limit {
		if st := filter(ctx, state, pod, ni); !st.IsSuccess() {
			logger.V(5).Info("Gang member capacity on node", "node", ni.Node().Name, "fits", fits, "stop", st.Message())
			break
		}
		fits++
		if fits == limit {
			break
		}
		if !owned {
			ni, state, owned = ni.Snapshot(), state.Clone(), true
			if devices.TakesDevices(state, pod) {
				// The next copies' devices are devices.Fits' to allocate (FilterWithDevices):
				// DynamicResources' Filter, blind to the copies, would only repeat its answer.
				skipDynamicResources(state)
			}
		}
		pi, err := SimulatedPod(pod, ni.Node().Name, fmt.Sprintf("capacity-%d", fits))
		if err != nil {
			logger.V(5).Info("Could not simulate a gang member", "node", ni.Node().Name, "err", err)
			break
		}
		ni.AddPodInfo(pi)
		if s := handle.RunPreFilterExtensionAddPod(ctx, state, pod, pi, ni); !s.IsSuccess() {
			break
		}
	}
	return fits
}

// filterWithOthersNominated runs the Filter plugins for pod on ni with the pods nominated on
// the node that kube-scheduler's own Filter run adds (priority at least pod's), except pod's
// own gang's members: their nominations (a preemption's, written to their status, which
// kube-scheduler restores on every update of the pod) hold room for the gang being planned,
// not against it.
func (p *NetworkTopologyAware) filterWithOthersNominated(ctx context.Context, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	others := p.othersNominated(ni, pod)
	if len(others) == 0 {
		return FilterWithDevices(ctx, p.handle, state, pod, ni)
	}
	ni, state = ni.Snapshot(), state.Clone()
	for _, pi := range others {
		ni.AddPodInfo(pi)
		if st := p.handle.RunPreFilterExtensionAddPod(ctx, state, pod, pi, ni); !st.IsSuccess() {
			return st
		}
	}
	return FilterWithDevices(ctx, p.handle, state, pod, ni)
}

// othersNominated are the pods nominated on ni that Filter counts for pod (priority at least
// pod's), except pod's own gang's members (filterWithOthersNominated).
func (p *NetworkTopologyAware) othersNominated(ni fwk.NodeInfo, pod *v1.Pod) []fwk.PodInfo {
	key, native, inGang := podgroup.GangOf(pod)
	priority := corev1helpers.PodPriority(pod)
	var others []fwk.PodInfo
	for _, pi := range p.handle.NominatedPodsForNode(ni.Node().Name) {
		np := pi.GetPod()
		if np.UID == pod.UID || corev1helpers.PodPriority(np) < priority {
			continue
		}
		if theirs, theirsNative, ok := podgroup.GangOf(np); inGang && ok && theirs == key && theirsNative == native {
			continue
		}
		others = append(others, pi)
	}
	return others
}

// othersNominatedTakeDevices reports whether a pod nominated on ni that Filter counts for pod
// asks for devices: a bound of free devices does not see them, the simulation does.
func (p *NetworkTopologyAware) othersNominatedTakeDevices(ni fwk.NodeInfo, pod *v1.Pod) bool {
	for _, pi := range p.othersNominated(ni, pod) {
		if p.devices.TakesDevices(pi.GetPod()) {
			return true
		}
	}
	return false
}

// exactState is state for the nodes whose devices b counts exactly (devices.Bound.Exact):
// DynamicResources' Filter is skipped and the bound answers for the devices, which it caps
// the copies by; nil when b counts no node exactly.
func exactState(state fwk.CycleState, b *devices.Bound) fwk.CycleState {
	if !b.ExactDemand() {
		return nil
	}
	exact := state.Clone()
	skipDynamicResources(exact)
	devices.CountedByBound(exact)
	return exact
}

// skipDynamicResources makes the Filter runs of state, the caller's own copy, skip
// DynamicResources' Filter: the devices are counted otherwise there.
func skipDynamicResources(state fwk.CycleState) {
	state.SetSkipFilterPlugins(sets.New(dynamicresources.Name).Union(state.GetSkipFilterPlugins()))
}

// FilterWithDevices runs the Filter plugins for pod on ni, then allocates its claims next to
// the pods the simulation put on ni (devices.Fits): DynamicResources' Filter allocates from
// the cluster's devices as they are, blind to copies of a member, nominated members and
// victims taken away, because it has no AddPod/RemovePod extension. Where it refused and the
// simulation took away the users of some of the node's devices, the other Filter plugins run
// without it and the devices decide. GangPreemption simulates with it too.
func FilterWithDevices(ctx context.Context, handle fwk.Handle, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	filtered := !state.GetSkipFilterPlugins().Has(dynamicresources.Name)
	if st := handle.RunFilterPlugins(ctx, state, pod, ni); !st.IsSuccess() {
		if st.Plugin() != dynamicresources.Name {
			return st
		}
		frees, err := devices.Frees(ctx, state, ni, pod)
		if err != nil {
			return fwk.AsStatus(err)
		}
		if !frees {
			return st
		}
		without := state.Clone()
		skipDynamicResources(without)
		if st := handle.RunFilterPlugins(ctx, without, pod, ni); !st.IsSuccess() {
			return st
		}
		filtered = false
	}
	fits, reason, err := devices.Fits(ctx, state, ni, pod, filtered)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if !fits {
		return fwk.NewStatus(fwk.Unschedulable, reason).WithPlugin(dynamicresources.Name)
	}
	return nil
}

// usage returns a node's used (requested) and allocatable weighted resources.
func (p *NetworkTopologyAware) usage(ni fwk.NodeInfo) (used, alloc []float64) {
	used = make([]float64, len(p.resources))
	alloc = make([]float64, len(p.resources))
	requested, allocatable := ni.GetRequested(), ni.GetAllocatable()
	for i, r := range p.resources {
		used[i], alloc[i] = float64(podgroup.Amount(requested, r)), float64(podgroup.Amount(allocatable, r))
	}
	if p.inventory != nil && ni.Node() != nil {
		// A resource only DRA provides on the node: its devices are its allocatable and use.
		devUsed, devTotal := p.inventory.Amounts(ni.Node().Name, p.resources)
		for i := range devTotal {
			if alloc[i] == 0 && devTotal[i] > 0 {
				used[i], alloc[i] = float64(devUsed[i]), float64(devTotal[i])
			}
		}
	}
	return used, alloc
}

// useInventory counts the nodes' devices in the bin-pack scores: the plan's usage vectors
// read it, and the HyperNode sums follow its changes.
func (p *NetworkTopologyAware) useInventory(inventory *devices.Inventory) {
	p.inventory = inventory
	if inventory == nil || p.usageSums == nil {
		return
	}
	inventory.OnChange(func(node string) {
		used, total := inventory.Amounts(node, p.resources)
		p.usageSums.setDevices(node, used, total)
	})
}

// podRequest returns a pod's weighted resource requests, the devices its claims take
// counted as their classes' resources.
func (p *NetworkTopologyAware) podRequest(pod *v1.Pod) []float64 {
	out := placement.Amounts(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}), p.resources)
	if d := p.deviceDemand(pod); len(d.ByClass) > 0 {
		for i, n := range d.Amounts(p.handle.SharedDRAManager(), p.resources) {
			out[i] += float64(n)
		}
	}
	return out
}

// withDevices adds to req (a pod's weighted requests) the devices its claims take.
func (p *NetworkTopologyAware) withDevices(pod *v1.Pod, req []int64) []int64 {
	d := p.deviceDemand(pod)
	if len(d.ByClass) == 0 {
		return req
	}
	out := slices.Clone(req)
	for i, n := range d.Amounts(p.handle.SharedDRAManager(), p.resources) {
		out[i] += n
	}
	return out
}

// deviceDemand is the devices a pod's own claims take (devices.DemandOf); none without
// claims, without the inventory, or when the claims cannot be read (then nothing is
// bounded by devices, and the simulation decides).
func (p *NetworkTopologyAware) deviceDemand(pod *v1.Pod) devices.Demand {
	if p.inventory == nil || len(pod.Spec.ResourceClaims) == 0 || p.handle == nil {
		return devices.Demand{}
	}
	d, err := devices.DemandOf(p.handle.SharedDRAManager(), pod)
	if err != nil {
		klog.Background().V(4).Info("Cannot read a pod's device demand", "pod", klog.KObj(pod), "err", err)
		return devices.Demand{}
	}
	return d
}

// deviceBound bounds the members of pod's shape by the nodes' free devices (nil: no bound).
func (p *NetworkTopologyAware) deviceBound(pod *v1.Pod) *devices.Bound {
	d := p.deviceDemand(pod)
	if len(d.ByClass) == 0 {
		return nil
	}
	b, err := p.inventory.NewBound(p.handle.SharedDRAManager(), d)
	if err != nil {
		klog.Background().V(4).Info("Cannot bound members by devices", "pod", klog.KObj(pod), "err", err)
	}
	return b
}

// deviceLimit caps limit by the members b says a node's free devices hold.
func deviceLimit(b *devices.Bound, node string, limit int) int {
	if m, ok := b.Members(node); ok {
		return min(limit, m)
	}
	return limit
}

// fitsSomewhere runs the Filter plugins for pod on every node of the cluster, as if it were
// not planned, until one passes or refuses it only for a reason another pod's departure can
// fix (resources). When none does it returns the most frequent reasons, in kube-scheduler's
// words ("8 node(s) didn't match Pod's node affinity/selector").
func (p *NetworkTopologyAware) fitsSomewhere(ctx context.Context, pod *v1.Pod) (string, bool) {
	state, status := p.simulationState(ctx, pod)
	if !status.IsSuccess() {
		return status.Message(), false
	}
	nodes, err := p.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return "", true // cannot tell: assume it fits
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var fits atomic.Bool
	reasons := make([][]string, len(nodes))
	p.handle.Parallelizer().Until(ctx, len(nodes), func(i int) {
		st := p.handle.RunFilterPluginsWithNominatedPods(ctx, state, pod, nodes[i])
		if st.IsSuccess() || !gangstate.RefusedForGood(st) {
			fits.Store(true)
			cancel()
			return
		}
		reasons[i] = st.Reasons()
	}, Name)
	if fits.Load() {
		return "", true
	}
	counts := map[string]int{}
	for _, rs := range reasons {
		for _, r := range rs {
			counts[r]++
		}
	}
	return gangstate.SummarizeReasons(counts, 3), false
}
