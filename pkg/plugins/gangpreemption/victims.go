package gangpreemption

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/networktopology"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// domain is a set of nodes the gang may run in: a HyperNode of an allowed tier, or the whole
// cluster.
type domain struct {
	name  string
	tier  int // 0 for the whole cluster
	nodes []string
}

// unit is what is evicted together: a pod, or every placed member of another gang (a gang
// that loses one member is evicted whole, or spared).
type unit struct {
	key      string
	priority int32
	pods     []placed
}

// placed is a victim pod and the node it runs on (or is reserved on).
type placed struct {
	pod  *v1.Pod
	node string
}

// choice is a domain where the gang fits once its victims are gone.
type choice struct {
	domain  domain
	victims []*unit
	// assign is the node of each needed member, by pod name.
	assign map[string]string
	// violations counts the victims whose eviction a PodDisruptionBudget does not allow;
	// highest is the highest priority among the victims; evicted counts their pods.
	violations int
	highest    int32
	evicted    int
	// surplus is how many more members than needed the domain holds with every pod of
	// lower priority gone: the placement strategy's tie-break (the tightest domain, as
	// BinPack and LeastWaste choose among domains that fit).
	surplus int
}

// describe says what the choice would cost, for the domains not chosen.
func (c *choice) describe() string {
	out := fmt.Sprintf("%s would evict %d pod(s) up to priority %d", c.domain.name, c.evicted, c.highest)
	if c.violations > 0 {
		out += fmt.Sprintf(", %d against a PodDisruptionBudget", c.violations)
	}
	return out + fmt.Sprintf(", %d member(s) to spare", c.surplus)
}

// cheaper orders choices: no victim at all, then the fewest PodDisruptionBudget violations,
// then the lowest highest-victim priority, then the fewest pods evicted (a gang counts with
// all its pods), then the smallest surplus, then the domain's name.
func (c *choice) cheaper(o *choice) bool {
	if (len(c.victims) == 0) != (len(o.victims) == 0) {
		return len(c.victims) == 0 // evicting nobody beats any priority, negative ones too
	}
	if c.violations != o.violations {
		return c.violations < o.violations
	}
	if c.highest != o.highest {
		return c.highest < o.highest
	}
	if c.evicted != o.evicted {
		return c.evicted < o.evicted
	}
	if c.surplus != o.surplus {
		return c.surplus < o.surplus
	}
	return c.domain.name < o.domain.name
}

// simulation evaluates domains for a gang.
type simulation struct {
	pl    *GangPreemption
	state fwk.CycleState
	pod   *v1.Pod
	// own is the gang's key; ownNative: that of a native pod group.
	own       podgroup.Key
	ownNative bool
	priority  int32
	// finishing: the pods that leave are those that will finish, of the gang's priority or
	// lower (a hold's evaluation), not only those of lower priority (a preemption's).
	finishing bool
	need      int
	// members are the needed members, pod first, for a gang of one shape without sub-groups;
	// plan is the planner's fit test otherwise (planned.go).
	members []*v1.Pod
	plan    *planTest
	nodes   map[string]fwk.NodeInfo
	// units caches the victim units by key; spared are units with a pod of equal or
	// higher priority than the gang, or whose eviction failed recently (refused).
	units   map[string]*unit
	spared  sets.Set[string]
	refused sets.Set[types.UID]
	// sparedRefused are the units spared only because of refused: the messages say so, or
	// "even with every pod of lower priority evicted" would not be true.
	sparedRefused sets.Set[string]
	// pdbs are the cluster's PodDisruptionBudgets.
	pdbs []*policyv1.PodDisruptionBudget
	// now is when the simulation runs, for victims stuck terminating.
	now time.Time
}

// violating returns the keys of the units whose eviction, all of them together, a
// PodDisruptionBudget does not allow (kube-scheduler's own accounting: a unit violates when
// any of its pods does).
func (s *simulation) violating(units []*unit) sets.Set[string] {
	out := sets.New[string]()
	if len(s.pdbs) == 0 {
		return out
	}
	victims := make([]preemption.Victim, 0, len(units))
	unitOf := map[preemption.Victim]*unit{}
	for _, u := range units {
		pods := make([]fwk.PodInfo, 0, len(u.pods))
		for _, p := range u.pods {
			if pi, err := framework.NewPodInfo(p.pod); err == nil {
				pods = append(pods, pi)
			}
		}
		keyType := fwk.PodKeyType
		if len(u.pods) > 1 {
			keyType = fwk.PodGroupKeyType
		}
		if v, err := preemption.NewVictim(pods, u.priority, keyType); err == nil {
			victims = append(victims, v)
			unitOf[v] = u
		}
	}
	violating, _ := preemption.FilterVictimsWithPDBViolation(victims, s.pdbs)
	for _, v := range violating {
		out.Insert(unitOf[v.Victim].key)
	}
	return out
}

// unitOf returns the victim unit of a pod on a node, or nil when the pod is not a victim:
// the gang's own member, a pod of equal or higher priority or whose eviction failed recently,
// or a member of a gang that has such a pod.
func (s *simulation) unitOf(p *v1.Pod) *unit {
	if s.stuck(p) {
		return nil
	}
	if key, native, ok := podgroup.GangOf(p); ok {
		if key == s.own && native == s.ownNative {
			return nil
		}
		id := "gang " + key.String()
		if native {
			id = "pod group " + key.String()
		}
		if u, ok := s.units[id]; ok || s.spared.Has(id) {
			return u
		}
		if native && !s.nativeGang(key) {
			// A native group of the basic policy (a Job's, with WorkloadWithJob) is no gang:
			// its pods go one by one, as pods in no group.
			return s.podUnit(p)
		}
		u := &unit{key: id, priority: corev1helpers.PodPriority(p)}
		for _, m := range s.placedMembers(key, native) {
			if s.leaving(m.Pod) {
				continue // evicted already: neither room taken nor cost
			}
			u.pods = append(u.pods, placed{pod: m.Pod, node: m.Node})
			u.priority = max(u.priority, corev1helpers.PodPriority(m.Pod))
		}
		if len(u.pods) == 0 {
			u.pods = []placed{{pod: p, node: p.Spec.NodeName}}
		}
		refused := false
		for _, m := range u.pods {
			refused = refused || s.refused.Has(m.pod.UID)
		}
		if s.stays(u.priority) || refused {
			if u.priority < s.priority {
				s.sparedRefused.Insert(id)
			}
			s.spared.Insert(id)
			return nil
		}
		s.units[id] = u
		return u
	}
	return s.podUnit(p)
}

// podUnit is the victim unit of a pod evicted alone, or nil when it is not a victim.
func (s *simulation) podUnit(p *v1.Pod) *unit {
	if s.stays(corev1helpers.PodPriority(p)) || (s.finishing && neverFinishes(p)) {
		return nil
	}
	id := "pod " + p.Namespace + "/" + p.Name
	if s.refused.Has(p.UID) {
		s.sparedRefused.Insert(id)
		return nil
	}
	if u, ok := s.units[id]; ok {
		return u
	}
	u := &unit{key: id, priority: corev1helpers.PodPriority(p), pods: []placed{{pod: p, node: p.Spec.NodeName}}}
	s.units[id] = u
	return u
}

// nativeGang reports whether a native pod group has the gang policy (false when the
// scheduler's snapshot does not have it).
func (s *simulation) nativeGang(key podgroup.Key) bool {
	pg, err := s.pl.handle.SnapshotSharedLister().PodGroups().Get(key.Namespace, key.Name)
	return err == nil && pg != nil && pg.Spec.SchedulingPolicy.Gang != nil
}

// placedMembers are a gang's bound or reserved members: the registry's for a PodGroup's, the
// scheduler's snapshot's for a native pod group's.
func (s *simulation) placedMembers(key podgroup.Key, native bool) []podgroup.PlacedMember {
	if !native {
		return s.pl.registry.PlacedMembers(key)
	}
	state, err := s.pl.handle.SnapshotSharedLister().PodGroupStates().Get(key.Namespace, key.Name)
	if err != nil {
		return nil
	}
	var out []podgroup.PlacedMember
	for _, p := range state.ScheduledPods() {
		out = append(out, podgroup.PlacedMember{Pod: p, Node: p.Spec.NodeName})
	}
	return out
}

// stays reports whether a pod of that priority stays in the simulation: one of the gang's
// priority or higher is never evicted, and one of higher priority never counts as finishing.
func (s *simulation) stays(priority int32) bool {
	if s.finishing {
		return priority > s.priority
	}
	return priority >= s.priority
}

// neverFinishes reports whether a pod runs as long as its node does (a DaemonSet's, or a
// static pod's mirror): a hold's drain does not wait for it.
func neverFinishes(p *v1.Pod) bool {
	if _, mirror := p.Annotations[v1.MirrorPodAnnotationKey]; mirror {
		return true
	}
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "DaemonSet"
}

// refusalNote says how many victims the simulation spared because their eviction failed
// recently ("" for none), after a message that counts "every pod of lower priority".
func (s *simulation) refusalNote() string {
	if s.sparedRefused.Len() == 0 {
		return ""
	}
	return fmt.Sprintf(" (but %d pod(s) or gang(s) whose eviction failed in the last %v)", s.sparedRefused.Len(), refusalMemory)
}

// evaluate removes every victim unit with a pod in the domain, counts how many members then
// fit, and gives back each unit the gang does not need, highest priority first. It returns
// the choice; or nil, the number of members that fit without anything of lower priority and,
// when that is enough but the planner still finds no plan, its reason.
func (s *simulation) evaluate(ctx context.Context, d domain) (*choice, int, string) {
	views := s.views()
	clones := map[string]fwk.NodeInfo{}
	var units []*unit
	seen := sets.New[string]()
	for _, name := range d.nodes {
		ni, ok := s.nodes[name]
		if !ok || ni.Node() == nil {
			continue
		}
		clone := ni.Snapshot()
		clones[name] = clone
		for _, pi := range ni.GetPods() {
			if s.leaving(pi.GetPod()) {
				// Already evicted by a preemption: gone in the simulation, and no victim.
				s.removeFrom(ctx, views, clone, pi.GetPod())
				continue
			}
			if u := s.unitOf(pi.GetPod()); u != nil && !seen.Has(u.key) {
				seen.Insert(u.key)
				units = append(units, u)
			}
		}
		s.addNominated(ctx, views, clone)
	}
	inDomain := func(u *unit) []placed {
		var out []placed
		for _, p := range u.pods {
			if _, ok := clones[p.node]; ok {
				out = append(out, p)
			}
		}
		return out
	}
	// The pods are taken from and given back to the domain's copies of the nodes, and the
	// PreFilter plugins' state follows (inter-pod affinity counts, for example).
	remove := func(u *unit) {
		for _, p := range inDomain(u) {
			s.removeFrom(ctx, views, clones[p.node], p.pod)
		}
	}
	restore := func(u *unit) {
		for _, p := range inDomain(u) {
			ni := clones[p.node]
			bound := p.pod.DeepCopy()
			bound.Spec.NodeName = p.node
			if pi, err := framework.NewPodInfo(bound); err == nil {
				ni.AddPodInfo(pi)
				for _, v := range views {
					s.pl.handle.RunPreFilterExtensionAddPod(ctx, v.state, v.pod, pi, ni)
				}
			}
		}
	}
	for _, u := range units {
		remove(u)
	}
	counts := make(map[string][]int, len(clones))
	for name, ni := range clones {
		counts[name] = s.count(ctx, views, ni)
	}
	total := s.fit(counts)
	if total < s.need {
		return nil, total, ""
	}
	var assign map[string]string
	if s.plan != nil {
		// The members' counts are an upper bound for several shapes: the planner decides.
		var err error
		if assign, err = s.plan.plan(ctx, s, views, counts, clones); err != nil {
			return nil, total, err.Error()
		}
	}
	surplus := s.surplus(counts)
	// Give back what is not needed: first the units a PodDisruptionBudget protects, then the
	// most important first (as kube-scheduler reprieves on a node).
	protected := s.violating(units)
	sort.SliceStable(units, func(i, j int) bool {
		if pi, pj := protected.Has(units[i].key), protected.Has(units[j].key); pi != pj {
			return pi
		}
		if units[i].priority != units[j].priority {
			return units[i].priority > units[j].priority
		}
		if len(units[i].pods) != len(units[j].pods) {
			return len(units[i].pods) > len(units[j].pods)
		}
		return units[i].key < units[j].key
	})
	var victims []*unit
	scope := newRecountScope(views, clones)
	// Only the counts decide without a planner: one unit at a time is cheap. A planner
	// decision is a run over the domain: in batches (giveBack).
	for _, i := range giveBack(len(units), s.plan != nil, func(lo, hi int) bool {
		before := map[string][]int{}
		after := total
		for _, u := range units[lo:hi] {
			restore(u)
			scope.visit(u, func(node string) {
				if _, ok := before[node]; !ok {
					before[node] = counts[node]
				}
			})
		}
		for node, old := range before {
			counts[node] = s.count(ctx, views, clones[node])
			after += sum(counts[node]) - sum(old)
		}
		if after >= s.need {
			if s.plan == nil {
				total = after
				return true
			}
			if again, err := s.plan.plan(ctx, s, views, counts, clones); err == nil {
				total, assign = after, again
				return true
			}
		}
		maps.Copy(counts, before)
		for _, u := range units[lo:hi] {
			remove(u)
		}
		return false
	}) {
		victims = append(victims, units[i])
	}
	c := &choice{domain: d, victims: victims, surplus: surplus, violations: s.violating(victims).Len()}
	if len(victims) > 0 {
		c.highest = math.MinInt32 // victims may have negative priorities
	}
	for _, u := range victims {
		c.evicted += len(u.pods)
		c.highest = max(c.highest, u.priority)
	}
	if s.plan == nil {
		assign = s.fill(counts)
	}
	c.assign = assign
	return c, total, ""
}

// count returns how many members fit on a node's copy: of each shape for a planned fit
// test, of the one shape otherwise.
func (s *simulation) count(ctx context.Context, views []view, ni fwk.NodeInfo) []int {
	if s.plan != nil {
		return s.plan.count(ctx, s, views, ni)
	}
	return []int{s.fitsOn(ctx, views[0].state, s.pod, ni, s.need)}
}

// view is a member as the Filter plugins see it: the pod and its simulation state.
type view struct {
	pod   *v1.Pod
	state fwk.CycleState
}

// views returns fresh copies of the states of the members simulated (one per shape), for one
// domain: the pods taken off and given back update the PreFilter plugins' state in each.
func (s *simulation) views() []view {
	if s.plan == nil {
		return []view{{pod: s.pod, state: s.state.Clone()}}
	}
	out := make([]view, len(s.plan.shapes))
	for i, sh := range s.plan.shapes {
		out[i] = view{pod: sh.Rep, state: sh.state.Clone()}
	}
	return out
}

// fit is how many members the counted nodes hold (for several shapes, an upper bound: the
// planner decides).
func (s *simulation) fit(counts map[string][]int) int {
	total := 0
	for _, c := range counts {
		total += sum(c)
	}
	return total
}

// surplus is how many more members than needed the counted nodes hold; for several shapes,
// nodes count with their largest shape capacity (shapes may not share a node).
func (s *simulation) surplus(counts map[string][]int) int {
	if s.plan == nil {
		return s.fit(counts) - s.need
	}
	n := 0
	for _, c := range counts {
		n += slices.Max(c)
	}
	return max(n-s.need, 0)
}

// fill places the needed members of a gang of one shape on the counted nodes, in name order.
func (s *simulation) fill(counts map[string][]int) map[string]string {
	out := make(map[string]string, s.need)
	next := 0
	for _, name := range sortedNodes(counts) {
		for i := 0; i < counts[name][0] && next < len(s.members); i++ {
			out[s.members[next].Name] = name
			next++
		}
	}
	return out
}

func sum(c []int) int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// leaving reports whether a pod of lower priority than the gang is already terminating
// because kube-scheduler preempted it (for this gang, before a restart or in a cycle whose
// snapshot predates its deletion; or for another preemptor, whose nomination then holds the
// room): it is not evicted again, and the room it leaves counts as free.
func (s *simulation) leaving(p *v1.Pod) bool {
	return corev1helpers.PodPriority(p) < s.priority && preemption.PodTerminatingByPreemption(p) && !s.stuck(p)
}

// stuck reports whether a deleted pod outlived its grace period by victimSlack (a finalizer, a
// node that does not answer): its room is not coming, and evicting it again frees nothing, so
// it is neither leaving nor a victim. Before, its room counted as free forever, and a gang
// whose attempt expired waiting for it "fit without evicting anyone" there on every retry.
func (s *simulation) stuck(p *v1.Pod) bool {
	return p.DeletionTimestamp != nil && s.now.After(p.DeletionTimestamp.Add(victimSlack))
}

// removeFrom takes a pod off a node's copy; the PreFilter plugins' state follows (inter-pod
// affinity counts, for example).
func (s *simulation) removeFrom(ctx context.Context, views []view, ni fwk.NodeInfo, p *v1.Pod) {
	if err := ni.RemovePod(klog.FromContext(ctx), p); err != nil {
		return
	}
	if pi, err := framework.NewPodInfo(p); err == nil {
		for _, v := range views {
			s.pl.handle.RunPreFilterExtensionRemovePod(ctx, v.state, v.pod, pi, ni)
		}
	}
}

// addNominated adds to a node's copy the pods nominated on it with a priority at least the
// gang's, as kube-scheduler's Filter does, except the gang's own members: their nominations
// (this preemption's, a plan's) hold room for the gang, not against it.
func (s *simulation) addNominated(ctx context.Context, views []view, clone fwk.NodeInfo) {
	for _, pi := range s.pl.handle.NominatedPodsForNode(clone.Node().Name) {
		p := pi.GetPod()
		if key, native, ok := podgroup.GangOf(p); (ok && key == s.own && native == s.ownNative) || corev1helpers.PodPriority(p) < s.priority {
			continue
		}
		clone.AddPodInfo(pi)
		for _, v := range views {
			s.pl.handle.RunPreFilterExtensionAddPod(ctx, v.state, v.pod, pi, clone)
		}
	}
}

// fitsOn counts the copies of pod that fit on a node's copy, up to limit. The copy already
// holds the nominated pods that count (addNominated), so Filter runs without adding them.
func (s *simulation) fitsOn(ctx context.Context, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo, limit int) int {
	return networktopology.CountFits(ctx, s.pl.handle, s.pl.filter, state, pod, ni, limit, false)
}
