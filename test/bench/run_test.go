package bench

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// loadMode is how the pods reach the scheduler. The project measures both ways a cluster
// loads a scheduler: pods arriving while it runs, and a backlog that exists when it starts.
type loadMode string

const (
	// arriving: the scheduler runs and has bound a probe pod (its informers synced) before the
	// pods are created at full speed; times count from the first pod's creation.
	arriving loadMode = "arriving"
	// backlog: every PodGroup and pod exists, and the tracker has seen them all, before the
	// scheduler process starts; times count from the process's start.
	backlog loadMode = "backlog"
)

// runSpec is what one run creates, and how.
type runSpec struct {
	scenario string
	// units in creation order: gangs (a PodGroup each, for ours; none for vanilla) and plain
	// units (independent pods for both kinds).
	units []GangSpec
	// interleave: gang members and plain pods alternate pod by pod in creation order (each
	// kind in unit order), so that both arrive together.
	interleave bool
	mode       loadMode
	// timeoutSeconds: the PodGroups' scheduleTimeoutSeconds (0: the plugin's default).
	timeoutSeconds int32
}

// gangs returns the units that are gangs.
func (s runSpec) gangs() []GangSpec {
	var out []GangSpec
	for _, u := range s.units {
		if !u.Plain {
			out = append(out, u)
		}
	}
	return out
}

// objects returns the run's PodGroups (ours only), its pods in creation order and each pod's
// unit. Both kinds get the same pods (names, shapes, order); ours adds the PodGroup label.
func (s runSpec) objects(ns string, k Kind) ([]*schedulingv1alpha1.PodGroup, []*v1.Pod, map[string]GangSpec) {
	var groups []*schedulingv1alpha1.PodGroup
	var members, plain []*v1.Pod
	unitOf := map[string]GangSpec{}
	for _, u := range s.units {
		group := ""
		if k.ours() && !k.native() && !u.Plain {
			group = u.Name
			annotations := map[string]string{
				podgroup.NetworkTopologyAnnotation: fmt.Sprintf(`{"mode":"hard","highestTierAllowed":%d}`, u.Tier),
			}
			if u.StageSize > 0 {
				annotations[podgroup.SubGroupPolicyAnnotation] = fmt.Sprintf(
					`[{"name":"stage","subGroupSize":%d,"partitionSize":%d,"networkTopology":{"mode":"hard","highestTierAllowed":1}}]`,
					u.StageSize, u.StageSize)
			}
			pg := util.PodGroup(ns, u.Name, int32(u.Size), annotations)
			if s.timeoutSeconds > 0 {
				pg.Spec.ScheduleTimeoutSeconds = ptr.To(s.timeoutSeconds)
			}
			groups = append(groups, pg)
		}
		for i := range u.Size {
			p := gpuPod(ns, fmt.Sprintf("%s-%04d", u.Name, i), k.schedulerName(), u.GPUs, group)
			if k.native() && !u.Plain {
				p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(u.Name)}
			}
			if u.StageSize > 0 {
				p.Annotations = map[string]string{podgroup.RankAnnotation: strconv.Itoa(i)}
			}
			unitOf[p.Name] = u
			if u.Plain && s.interleave {
				plain = append(plain, p)
			} else {
				members = append(members, p)
			}
		}
	}
	pods := make([]*v1.Pod, 0, len(members)+len(plain))
	for i := range max(len(members), len(plain)) {
		if i < len(members) {
			pods = append(pods, members[i])
		}
		if i < len(plain) {
			pods = append(pods, plain[i])
		}
	}
	return groups, pods, unitOf
}

// runGangs runs one scheduler of the kind over the spec's pods: in arriving mode it starts the
// scheduler, waits until it is ready and creates the PodGroups and pods; in backlog mode it
// creates them first and then starts the scheduler. It waits until every pod is bound, checks
// the placements and removes the pods.
func runGangs(t *testing.T, c clients, tp Topology, s runSpec, k Kind, rep int) RunResult {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("%s-%s-%d", s.scenario, k, rep)
	ns, err := util.CreateNamespace(ctx, c.kube, name)
	if err != nil {
		t.Fatal(err)
	}
	groups, pods, unitOf := s.objects(ns, k)
	for _, pg := range groups {
		if err := util.CreatePodGroup(ctx, c.scheduling, pg); err != nil {
			t.Fatal(err)
		}
	}
	if k.native() {
		for _, pg := range s.nativeGroups(ns) {
			if _, err := c.kube.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tr := newTracker(t, c, ns)
	defer tr.cancel()
	create := func() (start, end time.Time) {
		start = time.Now()
		if err := parallel(len(pods), func(i int) error {
			_, err := util.CreatePods(ctx, c.kube, pods[i])
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return start, time.Now()
	}
	var sched *schedProcess
	var createStart, createEnd, start time.Time
	if s.mode == backlog {
		createStart, createEnd = create()
		if err := tr.waitCount(len(pods), 0, 5*time.Minute, nil); err != nil {
			t.Fatalf("%s: the backlog: %v", name, err)
		}
		sched = startScheduler(t, k, name)
		start = sched.started
	} else {
		sched = startScheduler(t, k, name)
		waitReady(t, c, ns, tr, sched, "probe")
		createStart, createEnd = create()
		start = createStart
	}
	timeout := 5 * time.Minute
	if full() {
		timeout = 30 * time.Minute
	}
	if err := tr.waitCount(len(pods), len(pods), timeout, sched.alive); err != nil {
		t.Fatalf("%s: %v (scheduler log %s)", name, err, sched.logPath)
	}
	stats, err := sched.stats()
	if err != nil {
		t.Fatal(err)
	}
	sched.stop(t)
	first, last := tr.bindWindow()
	r := RunResult{
		Kind: k, Run: rep, Mode: s.mode, Pods: len(pods),
		Seconds:           last.Sub(start).Seconds(),
		FirstBindSeconds:  first.Sub(start).Seconds(),
		CreateSeconds:     createEnd.Sub(createStart).Seconds(),
		BindWindowSeconds: last.Sub(first).Seconds(),
		procStats:         stats,
		logPath:           sched.logPath,
	}
	if s.mode != backlog {
		r.AfterLastCreatedSeconds = last.Sub(createEnd).Seconds()
	}
	r.PodsPerSecond = float64(r.Pods) / r.Seconds
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	if at := firstCompleteGang(tr.snapshot(names), unitOf); !at.IsZero() {
		r.FirstGangSeconds = at.Sub(start).Seconds()
	}
	if gangs := s.gangs(); k.ours() && !k.native() && len(gangs) > 0 {
		plans, err := sched.planDurations()
		if err != nil {
			t.Fatal(err)
		}
		r.Plans = len(plans)
		for _, d := range plans {
			ms := float64(d.Microseconds()) / 1000
			r.PlanTotalMs += ms
			r.PlanMaxMs = max(r.PlanMaxMs, ms)
		}
		// One plan per gang at least; more only when a plan was dropped and redone.
		if r.Plans < len(gangs) {
			t.Errorf("%s: %d plans logged for %d gangs (log %s)", name, r.Plans, len(gangs), sched.logPath)
		}
	}
	placements := tr.placements()
	checkPlacements(t, tp, placements, unitOf, k)
	for _, gpus := range gpusByNode(placements, unitOf) {
		r.NodesUsed++
		if gpus == nodeGPUs {
			r.FullNodes++
		}
	}

	if err := deletePods(ctx, c, ns); err != nil {
		t.Fatal(err)
	}
	if err := tr.waitCount(0, 0, 5*time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	return r
}

// firstCompleteGang returns when the first gang had every member bound, from the pods' states
// (zero: no gang unit complete). For vanilla the gang's pods are the same pods, without the
// PodGroup, so the moment is computed the same way from its binds.
func firstCompleteGang(states map[string]podState, unitOf map[string]GangSpec) time.Time {
	bound := map[string]int{}
	last := map[string]time.Time{}
	for pod, st := range states {
		u := unitOf[pod]
		if u.Plain || st.node == "" {
			continue
		}
		bound[u.Name]++
		if st.boundAt.After(last[u.Name]) {
			last[u.Name] = st.boundAt
		}
	}
	var first time.Time
	for _, u := range unitOf {
		if u.Plain || bound[u.Name] != u.Size {
			continue
		}
		if at := last[u.Name]; first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first
}

// gpusByNode sums the GPUs of the placed pods per node.
func gpusByNode(placements map[string]string, unitOf map[string]GangSpec) map[string]int {
	used := map[string]int{}
	for pod, node := range placements {
		used[node] += unitOf[pod].GPUs
	}
	return used
}

// checkPlacements asserts that no node holds more GPUs than it has and, for ours, that every
// gang is inside one HyperNode of its hard tier (plain pods have no tier).
func checkPlacements(t *testing.T, tp Topology, placements map[string]string, unitOf map[string]GangSpec, k Kind) {
	t.Helper()
	index := tp.nodeIndex()
	nodesOf := map[string][]int{}
	for pod, node := range placements {
		u := unitOf[pod]
		i, ok := index[node]
		if !ok {
			t.Errorf("pod %s bound to unknown node %s", pod, node)
			continue
		}
		if !u.Plain {
			nodesOf[u.Name] = append(nodesOf[u.Name], i)
		}
	}
	for node, gpus := range gpusByNode(placements, unitOf) {
		if gpus > nodeGPUs {
			t.Errorf("node %s holds %d GPUs of %d", node, gpus, nodeGPUs)
		}
	}
	if !k.ours() && !k.native() {
		return
	}
	specs := map[string]GangSpec{}
	for _, u := range unitOf {
		specs[u.Name] = u
	}
	names := make([]string, 0, len(nodesOf))
	for g := range nodesOf {
		names = append(names, g)
	}
	sort.Strings(names)
	for _, name := range names {
		spec := specs[name]
		if tier := tp.tierOf(nodesOf[name]); tier > spec.Tier {
			t.Errorf("gang %s (hard tier %d) spans tier %d", name, spec.Tier, tier)
		}
	}
	// Each stage (sub-group of StageSize members by rank, the pod name's number) in one leaf.
	stages := map[string][]int{}
	for pod, node := range placements {
		u := unitOf[pod]
		if u.StageSize == 0 {
			continue
		}
		rank, err := strconv.Atoi(pod[strings.LastIndex(pod, "-")+1:])
		if err != nil {
			t.Errorf("pod %s: no rank in its name", pod)
			continue
		}
		stage := fmt.Sprintf("%s stage %d", u.Name, rank/u.StageSize)
		stages[stage] = append(stages[stage], index[node])
	}
	for stage, nodes := range stages {
		if tier := tp.tierOf(nodes); tier > 1 {
			t.Errorf("%s (hard tier 1) spans tier %d", stage, tier)
		}
	}
}
