package gangpreemption

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/networktopology"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// wholeCluster names the domain of a gang without a hard constraint.
const wholeCluster = "the cluster"

// preemptForGang decides (decide) and evicts the victims of the cheapest domain, or records
// why no domain helps and evicts nothing.
func (pl *GangPreemption) preemptForGang(ctx context.Context, state fwk.CycleState, pod *v1.Pod, key podgroup.Key) (*fwk.PostFilterResult, *fwk.Status) {
	start := time.Now()
	d, status := pl.decide(ctx, state, pod, key)
	if status != nil {
		return nil, status
	}
	if d.best != nil {
		return pl.actuate(ctx, pod, d.gang, d.need, d.best, d.notChosen, time.Since(start))
	}
	pl.events.Record(d.gang.Info.PodGroup, v1.EventTypeWarning, EventPreemptionNotHelpful, d.refusal)
	// Nominations written for the gang by an earlier preemption hold nothing now.
	var stale []*v1.Pod
	for _, m := range d.gang.Pending {
		if m.Pod.UID != pod.UID && m.Pod.Status.NominatedNodeName != "" {
			stale = append(stale, m.Pod)
		}
	}
	pl.withdraw(stale)
	klog.FromContext(ctx).V(2).Info("Gang preemption cannot help", "podGroup", key, "need", d.need, "duration", time.Since(start))
	return nil, fwk.NewStatus(fwk.Unschedulable, d.refusal)
}

// decision is what preemption decides for a gang: the cheapest domain's choice and the costs
// of the others, or, when no domain helps (best nil), the refusal in the members' words.
type decision struct {
	gang      podgroup.Gang
	need      int
	sim       *simulation
	best      *choice
	notChosen []string
	refusal   string
}

// decide evaluates every allowed domain, lowest tier first, and picks the cheapest of the
// lowest tier where the gang fits once its victims are gone. A status is returned when there
// is nothing to decide.
func (pl *GangPreemption) decide(ctx context.Context, state fwk.CycleState, pod *v1.Pod, key podgroup.Key) (*decision, *fwk.Status) {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == v1.PreemptNever {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s does not preempt (preemptionPolicy: Never)", key))
	}
	su, why := pl.setUp(pod, key)
	if su == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, why)
	}
	return pl.decideFor(ctx, state, pod, su)
}

// decideFor is decide once the gang's setup is read (a native pod group's too).
func (pl *GangPreemption) decideFor(ctx context.Context, state fwk.CycleState, pod *v1.Pod, su *setup) (*decision, *fwk.Status) {
	key := su.gang.Key
	need, tiers := su.need, su.tiers
	pdbs, err := pl.pdbs.List(labels.Everything())
	if err != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s: listing PodDisruptionBudgets: %v", key, err))
	}
	sim, err := pl.newSimulation(ctx, state, pod, su, false)
	if err != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s: %v", key, err))
	}
	sim.pdbs, sim.refused = pdbs, pl.refusedVictims()
	d := &decision{gang: su.gang, need: need, sim: sim}
	var figures []string
	for _, domains := range tiers {
		var others []*choice
		for _, dom := range domains {
			c, fit, why := sim.evaluate(ctx, dom)
			switch {
			case c != nil:
				others = append(others, c)
				if d.best == nil || c.cheaper(d.best) {
					d.best = c
				}
			case why != "":
				figures = append(figures, fmt.Sprintf("%s has no plan: %s", dom.name, why))
			default:
				figures = append(figures, fmt.Sprintf("%s %d/%d", dom.name, fit, need))
			}
		}
		if d.best != nil {
			var alternatives []string
			for _, c := range others {
				if c != d.best {
					alternatives = append(alternatives, c.describe())
				}
			}
			sort.Strings(alternatives)
			d.notChosen = shorten(alternatives, 3)
			if len(figures) > 0 {
				d.notChosen = append(d.notChosen, "too small even with every pod of lower priority evicted"+sim.refusalNote()+": "+strings.Join(shorten(figures, 3), ", "))
			}
			return d, nil
		}
	}
	d.refusal = fmt.Sprintf("gang %s cannot fit even if every pod of lower priority were evicted%s: no domain holds %d members (%s); nothing was evicted",
		key, sim.refusalNote(), need, strings.Join(shorten(figures, 6), ", "))
	return d, nil
}

// setup is what preemption and holds decide from: the gang (with the member of the cycle),
// how many members it still needs, the nodes, the tree and the candidate domains by tier.
type setup struct {
	gang  podgroup.Gang
	need  int
	list  []fwk.NodeInfo
	tree  *hypernode.Snapshot
	tiers [][]domain
	// native: the gang is a native pod group (its key is not a PodGroup label's).
	native bool
}

// setUp reads what the gang's preemption or hold decides from; nil and why not when there is
// nothing to decide (the message goes after "preemption: " or into the hold's).
func (pl *GangPreemption) setUp(pod *v1.Pod, key podgroup.Key) (*setup, string) {
	gang := pl.registry.Gang(key).Including(pod)
	info := gang.Info
	if info.PodGroup == nil {
		return nil, fmt.Sprintf("gang %s has no PodGroup", key)
	}
	if err := errors.Join(info.TopologyErr, info.SubGroupErr); err != nil {
		// The constraint decides the domains: nothing is decided for a gang that cannot say it.
		return nil, fmt.Sprintf("gang %s has an invalid constraint: %v", key, err)
	}
	need := info.MinMember() - len(gang.Placed)
	if need <= 0 {
		return nil, fmt.Sprintf("gang %s has minMember members placed; nothing to preempt for", key)
	}
	list, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, fmt.Sprintf("gang %s: listing nodes: %v", key, err)
	}
	tree := pl.cache.Snapshot()
	tiers, err := pl.domains(tree, gang, list)
	if err != nil {
		return nil, fmt.Sprintf("gang %s: %v", key, err)
	}
	return &setup{gang: gang, need: need, list: list, tree: tree, tiers: tiers}, ""
}

// simulationState is the state a preemption simulates in: the cycle's, without the member's
// plan, with the devices of the pods it adds and removes counted (FilterWithDevices).
func (pl *GangPreemption) simulationState(state fwk.CycleState) fwk.CycleState {
	sim := networktopology.WithoutPlan(state)
	devices.Attach(sim, pl.devices)
	return sim
}

// filter is the Filter the simulations run: the profile's plugins, then the devices.
func (pl *GangPreemption) filter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	return networktopology.FilterWithDevices(ctx, pl.handle, state, pod, ni)
}

// newSimulation prepares the evaluation of domains for the gang: which pods would leave
// (every pod of lower priority for a preemption; with finishing, every pod of the gang's
// priority or lower, as they finish, for a hold) and how the members are counted.
func (pl *GangPreemption) newSimulation(ctx context.Context, state fwk.CycleState, pod *v1.Pod, su *setup, finishing bool) (*simulation, error) {
	gang := su.gang
	sim := &simulation{pl: pl, state: pl.simulationState(state), pod: pod, own: gang.Key, ownNative: su.native, priority: gangPriority(pod, gang), finishing: finishing,
		need: su.need, nodes: make(map[string]fwk.NodeInfo, len(su.list)), units: map[string]*unit{}, spared: sets.New[string](),
		refused: sets.New[types.UID](), sparedRefused: sets.New[string](), now: time.Now()}
	for _, ni := range su.list {
		sim.nodes[ni.Node().Name] = ni
	}
	if len(podgroup.ShapesOf(gang.Pending)) > 1 || len(gang.Info.SubGroupPolicies) > 0 {
		var err error
		if sim.plan, err = pl.newPlanTest(ctx, gang, su.tree, su.need); err != nil {
			return nil, err
		}
		return sim, nil
	}
	// The member in this cycle first (the scheduler nominates it from the result), then
	// the others in rank order.
	sim.members = []*v1.Pod{pod}
	for _, m := range gang.Pending {
		if m.Pod.UID != pod.UID && len(sim.members) < su.need {
			sim.members = append(sim.members, m.Pod)
		}
	}
	return sim, nil
}

// domains returns the candidate domains, lowest tier first: every HyperNode of each tier up
// to the constraint's highest one that holds the placed members; a soft constraint or none,
// or a hard one at or above the virtual root's tier (as the planner reads it), adds the whole
// cluster last.
func (pl *GangPreemption) domains(tree *hypernode.Snapshot, gang podgroup.Gang, list []fwk.NodeInfo) ([][]domain, error) {
	job := placement.JobTopology(gang.Info)
	maxTier, err := placement.MaxTier(tree, job)
	if err != nil {
		return nil, err
	}
	placed := gang.PlacedNodes()
	var out [][]domain
	for _, tier := range tree.Tiers() {
		if tier > maxTier {
			break
		}
		var ds []domain
		for _, name := range tree.Candidates(tier) {
			nodes := tree.Nodes(name)
			if holdsAll(nodes, placed) {
				ds = append(ds, domain{name: name, tier: tier, nodes: nodes})
			}
		}
		if len(ds) > 0 {
			out = append(out, ds)
		}
	}
	if placement.SpansCluster(tree, job.Mode != podgroup.ModeHard, maxTier) {
		all := make([]string, 0, len(list))
		for _, ni := range list {
			all = append(all, ni.Node().Name)
		}
		out = append(out, []domain{{name: wholeCluster, nodes: all}})
	}
	return out, nil
}

func holdsAll(nodes, placed []string) bool {
	if len(placed) == 0 {
		return true
	}
	set := sets.New(nodes...)
	for _, n := range placed {
		if !set.Has(n) {
			return false
		}
	}
	return true
}

// waitingForVictims reports whether the gang's last preemption still has victims to go (no
// new preemption for the gang until they are gone), and the node it nominated pod on.
func (pl *GangPreemption) waitingForVictims(key podgroup.Key, pod *v1.Pod) (msg, node string, waiting bool) {
	pl.gangs.Lock()
	defer pl.gangs.Unlock()
	if a, draining := pl.gangs.PreemptionLocked(key); a != nil && !draining {
		return waitingMsg(key, a), a.Nodes[pod.UID], true
	}
	return "", "", false
}

// waitingMsg says what a gang whose victims terminate waits for.
func waitingMsg(key podgroup.Key, a *gangstate.Preemption) string {
	if a.Resumed {
		return fmt.Sprintf("gang %s waits for %d pod(s) that terminate after a preemption on its members' nominated nodes in %s", key, a.Waiting.Len(), a.Domain)
	}
	return fmt.Sprintf("gang %s waits for %d of the %d pods evicted for it in %s to terminate", key, a.Waiting.Len(), len(a.Victims), a.Domain)
}

// preempting reports whether the gang's preemption is still under way, under one hold of
// the gangs' lock (the informer's handler may end the wait and begin the drain between two
// looks), with the PostFilter message and the node the preemption nominated pod on.
func (pl *GangPreemption) preempting(key podgroup.Key, pod *v1.Pod) (msg, node string, running bool) {
	pl.gangs.Lock()
	defer pl.gangs.Unlock()
	a, draining := pl.gangs.PreemptionLocked(key)
	if a == nil {
		return "", "", false
	}
	node = a.Nodes[pod.UID]
	if draining {
		return drainingMsg(node), node, true
	}
	return waitingMsg(key, a), node, true
}

// victimPods lists the choice's victims, each on its node, and their sorted names. A member
// of another gang that is reserved and not bound comes from the registry without
// spec.nodeName (its node is the unit's): the drain looks the victim up on its node in the
// scheduler's snapshot, and the Preempted Event names the node.
func victimPods(c *choice) ([]*v1.Pod, []string) {
	var victims []*v1.Pod
	var names []string
	for _, u := range c.victims {
		for _, p := range u.pods {
			victim := p.pod
			if victim.Spec.NodeName == "" && p.node != "" {
				onNode := *victim
				onNode.Spec.NodeName = p.node
				victim = &onNode
			}
			victims = append(victims, victim)
			names = append(names, victim.Namespace+"/"+victim.Name)
		}
	}
	sort.Strings(names)
	return victims, names
}

// actuate nominates the needed members on their nodes, so that no pod of lower or equal
// priority takes the room while the victims terminate, and starts evicting the choice's
// victims the way kube-scheduler's preemption does (evict.go).
func (pl *GangPreemption) actuate(ctx context.Context, pod *v1.Pod, gang podgroup.Gang, need int, c *choice, notChosen []string, decision time.Duration) (*fwk.PostFilterResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	key := gang.Key
	if len(c.victims) == 0 {
		// No nomination: the gang's own Filter refused it, and only its plan may hold room.
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s fits in %s without evicting anyone; it is retried", key, c.domain.name))
	}
	victims, names := victimPods(c)
	// The members the choice places, the one in this cycle first: the scheduler nominates
	// it from the result.
	var members []*v1.Pod
	nodes := make(map[types.UID]string, len(c.assign))
	place := func(m *v1.Pod) {
		if node, ok := c.assign[m.Name]; ok && nodes[m.UID] == "" {
			members = append(members, m)
			nodes[m.UID] = node
		}
	}
	place(pod)
	for _, m := range gang.Pending {
		place(m.Pod)
	}
	a := &gangstate.Preemption{Domain: c.domain.name, Victims: victims, Members: members, Nodes: nodes}
	pl.gangs.Lock()
	old := pl.startLocked(logger, key, a)
	// Nothing to resume for this gang in this process: after a failed eviction, resume would
	// otherwise rebuild a preemption from the nominations being withdrawn.
	pl.gangs.MarkResumedLocked(key)
	pl.gangs.Unlock()
	if old != nil {
		// Members the earlier attempt nominated and this one does not place hold nothing.
		var dropped []*v1.Pod
		for _, m := range old.Members {
			if _, ok := nodes[m.UID]; !ok {
				dropped = append(dropped, m)
			}
		}
		pl.withdraw(dropped)
	}
	schedmetrics.PreemptionVictims.Observe(float64(len(victims)))

	// The others are nominated in memory and in the API (kube-scheduler writes this member's
	// from the result): a restarted scheduler nominates them again from their status. One
	// that runs a cycle before the victims are gone keeps its nomination through its result
	// (waitingForVictims).
	for _, m := range members {
		if m.UID == pod.UID {
			continue
		}
		if pi, err := framework.NewPodInfo(m); err == nil {
			pl.handle.AddNominatedPod(logger, pi, &fwk.NominatingInfo{NominatedNodeName: nodes[m.UID], NominatingMode: fwk.ModeOverride})
		}
		pl.nominations.Set(m, nodes[m.UID])
	}
	// This member too waits out of the queue (PreEnqueue) once its attempt ends.
	gangstate.Activate(logger, pl.handle, pod)
	msg := fmt.Sprintf("gang %s: evicting %d pod(s) of lower priority in %s so that %d members fit: %s",
		key, len(victims), c.domain.name, need, strings.Join(shorten(names, 5), ", "))
	if len(notChosen) > 0 {
		msg += "; not chosen: " + strings.Join(notChosen, "; ")
	}
	pl.events.Record(gang.Info.PodGroup, v1.EventTypeNormal, EventGangPreempting, msg)
	// V(2), once per preemption; the benchmark harness reads the durations.
	logger.V(2).Info("Gang preempting", "podGroup", key, "domain", c.domain.name, "victims", len(victims), "highestVictimPriority", c.highest, "need", need,
		"decision", decision)
	pl.startEvictions(logger, gang.Info.PodGroup, key, a, &gangPreemptor{pod: pod, priority: gangPriority(pod, gang)})
	// Unresolvable: the gang's waiting members keep their reservations (see PostFilter).
	return nominate(nodes[pod.UID]), fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

// shorten keeps the first n entries and says how many more there are.
func shorten(items []string, n int) []string {
	if len(items) <= n {
		return items
	}
	return append(items[:n:n], fmt.Sprintf("+%d more", len(items)-n))
}

// gangPreemptor is the gang as kube-scheduler's preemption executor sees the preemptor.
type gangPreemptor struct {
	pod *v1.Pod
	// priority is the gang's (gangPriority): the executor clears the nominations of lower
	// priority on the victims' nodes, and those the gang could not evict stay.
	priority int32
}

func (g *gangPreemptor) GetName() string       { return g.pod.Name }
func (g *gangPreemptor) GetNamespace() string  { return g.pod.Namespace }
func (g *gangPreemptor) UID() types.UID        { return g.pod.UID }
func (g *gangPreemptor) SchedulerName() string { return g.pod.Spec.SchedulerName }
func (g *gangPreemptor) Obj() runtime.Object   { return g.pod }
func (g *gangPreemptor) Priority() int32       { return g.priority }
func (g *gangPreemptor) Type() string          { return "gang member" }
func (g *gangPreemptor) Pods() map[string]*v1.Pod {
	return map[string]*v1.Pod{g.pod.Name: g.pod}
}

// victimCandidate is one victim's node, as the executor's Candidate.
type victimCandidate struct {
	node string
	pod  *v1.Pod
}

func (c *victimCandidate) Victims() *extenderv1.Victims {
	return &extenderv1.Victims{Pods: []*v1.Pod{c.pod}}
}
func (c *victimCandidate) Name() string                { return c.node }
func (c *victimCandidate) NumPodGroupDisruptions() int { return 0 }

// gangPriority is the priority the gang preempts with: the lowest of its pending members'.
// Victims must be of lower priority than every member that takes their room, whichever
// member's cycle preempts (an MPI launcher of high priority must not evict pods for workers
// of lower priority than those pods).
func gangPriority(pod *v1.Pod, gang podgroup.Gang) int32 {
	p := corev1helpers.PodPriority(pod)
	for _, m := range gang.Pending {
		p = min(p, corev1helpers.PodPriority(m.Pod))
	}
	return p
}
