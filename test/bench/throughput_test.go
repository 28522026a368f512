package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// GangSpec is one gang of a scenario.
type GangSpec struct {
	Name string `json:"name"`
	Size int    `json:"size"`
	GPUs int    `json:"gpusPerPod"`
	// Tier is the hard highestTierAllowed (ours only; vanilla pods have no PodGroup).
	Tier int `json:"tier"`
}

// RunResult is one run of one scheduler over a scenario's pods. The scheduler is running and
// has bound a probe pod before the first pod is created.
type RunResult struct {
	Kind Kind `json:"kind"`
	Run  int  `json:"run"`
	Pods int  `json:"pods"`
	// Seconds: from the first pod's creation to the last pod bound.
	Seconds       float64 `json:"seconds"`
	PodsPerSecond float64 `json:"podsPerSecond"`
	// CreateSeconds: creating the pods (16 parallel clients).
	CreateSeconds float64 `json:"createSeconds"`
	// AfterLastCreatedSeconds: from the last pod created to the last pod bound.
	AfterLastCreatedSeconds float64 `json:"afterLastCreatedSeconds"`
	// BindWindowSeconds: from the first pod bound to the last.
	BindWindowSeconds float64 `json:"bindWindowSeconds"`
	procStats
	Plans       int     `json:"plans"`
	PlanTotalMs float64 `json:"planTotalMs"`
	PlanMaxMs   float64 `json:"planMaxMs"`
}

// ThroughputResult is scenario 1.
type ThroughputResult struct {
	Topology Topology    `json:"topology"`
	Pods     int         `json:"pods"`
	Gangs    []GangSpec  `json:"gangs"`
	Runs     []RunResult `json:"runs"`
	// Medians over the runs of each kind.
	OursPodsPerSecond    float64 `json:"oursPodsPerSecond"`
	VanillaPodsPerSecond float64 `json:"vanillaPodsPerSecond"`
	Ratio                float64 `json:"ratio"`
	OursPeakRSSMiB       float64 `json:"oursPeakRSSMiB"`
	VanillaPeakRSSMiB    float64 `json:"vanillaPeakRSSMiB"`
	OursCPUSeconds       float64 `json:"oursCPUSeconds"`
	VanillaCPUSeconds    float64 `json:"vanillaCPUSeconds"`
}

// throughputGangs splits pods into gangs of the given sizes (drawn with a fixed seed; the last
// one takes the remainder, merged into its predecessor if smaller than the smallest size).
// A gang that fits half a leaf is hard at tier 1, a larger one at tier 2.
func throughputGangs(pods int, sizes []int, halfLeafPods int) []GangSpec {
	rng := rand.New(rand.NewPCG(8, 1))
	var out []GangSpec
	total := 0
	for total < pods {
		s := sizes[rng.IntN(len(sizes))]
		if total+s > pods {
			s = pods - total
		}
		if s < sizes[0] && len(out) > 0 {
			out[len(out)-1].Size += s
		} else {
			out = append(out, GangSpec{Size: s})
		}
		total += s
	}
	for i := range out {
		out[i].Name = fmt.Sprintf("g%04d", i)
		out[i].GPUs = 2
		out[i].Tier = 1
		if out[i].Size > halfLeafPods {
			out[i].Tier = 2
		}
	}
	return out
}

// Scenario 1: throughput. The same pods (2 GPUs each), as hard gangs for ours and as
// independent pods for vanilla, created gang after gang at full speed while the scheduler
// runs; runs alternate between the kinds (ABBA order), medians are reported.
func TestThroughput(t *testing.T) {
	tp := Topology{Name: "tp", Nodes: 256, LeafSize: 32, LeavesPerSpine: 4}
	pods, sizes := 512, []int{8, 16, 32, 64, 128}
	if full() {
		tp.Nodes, tp.LeavesPerSpine = 5000, 16
		pods, sizes = 10000, []int{8, 16, 32, 64, 128, 256, 512}
	}
	gangs := throughputGangs(pods, sizes, tp.LeafSize*nodeGPUs/2/2)
	c := newClients(t)
	tp.create(t, c)
	res := &ThroughputResult{Topology: tp, Pods: pods, Gangs: gangs}
	for rep := range repeats() {
		for _, k := range abbaOrder(rep) {
			r := runGangs(t, c, tp, "throughput", gangs, k, rep, 0)
			t.Logf("throughput %s run %d: %d pods in %.1fs = %.0f pods/s (created in %.1fs), peak RSS %.0f MiB, CPU %.1fs, %d plans (max %.0f ms)",
				k, rep, r.Pods, r.Seconds, r.PodsPerSecond, r.CreateSeconds, r.PeakRSSMiB, r.CPUSeconds, r.Plans, r.PlanMaxMs)
			res.Runs = append(res.Runs, r)
		}
	}
	res.OursPodsPerSecond = medianOf(res.Runs, OursBinPack, func(r RunResult) float64 { return r.PodsPerSecond })
	res.VanillaPodsPerSecond = medianOf(res.Runs, Vanilla, func(r RunResult) float64 { return r.PodsPerSecond })
	res.Ratio = res.OursPodsPerSecond / res.VanillaPodsPerSecond
	res.OursPeakRSSMiB = medianOf(res.Runs, OursBinPack, func(r RunResult) float64 { return r.PeakRSSMiB })
	res.VanillaPeakRSSMiB = medianOf(res.Runs, Vanilla, func(r RunResult) float64 { return r.PeakRSSMiB })
	res.OursCPUSeconds = medianOf(res.Runs, OursBinPack, func(r RunResult) float64 { return r.CPUSeconds })
	res.VanillaCPUSeconds = medianOf(res.Runs, Vanilla, func(r RunResult) float64 { return r.CPUSeconds })
	results.Throughput = res
}

// runGangs starts a scheduler of the kind and waits until it is ready, creates the gangs'
// PodGroups (ours), then their pods, waits until every pod is bound, checks the placements and
// removes the pods.
func runGangs(t *testing.T, c clients, tp Topology, scenario string, gangs []GangSpec, k Kind, rep int, timeoutSeconds int32) RunResult {
	t.Helper()
	ctx := context.Background()
	ns, err := util.CreateNamespace(ctx, c.kube, fmt.Sprintf("%s-%s-%d", scenario, k, rep))
	if err != nil {
		t.Fatal(err)
	}
	var pods []*v1.Pod
	gangOf := map[string]GangSpec{}
	for _, g := range gangs {
		group := ""
		if k.ours() {
			group = g.Name
			pg := util.PodGroup(ns, g.Name, int32(g.Size), map[string]string{
				podgroup.NetworkTopologyAnnotation: fmt.Sprintf(`{"mode":"hard","highestTierAllowed":%d}`, g.Tier),
			})
			if timeoutSeconds > 0 {
				pg.Spec.ScheduleTimeoutSeconds = ptr.To(timeoutSeconds)
			}
			if err := util.CreatePodGroup(ctx, c.scheduling, pg); err != nil {
				t.Fatal(err)
			}
		}
		for i := range g.Size {
			p := gpuPod(ns, fmt.Sprintf("%s-%04d", g.Name, i), k.schedulerName(), g.GPUs, group)
			pods = append(pods, p)
			gangOf[p.Name] = g
		}
	}
	tr := newTracker(t, c, ns)
	defer tr.cancel()
	sched := startScheduler(t, k, fmt.Sprintf("%s-%s-%d", scenario, k, rep))
	waitReady(t, c, ns, tr, sched, "probe")

	createStart := time.Now()
	if err := parallel(len(pods), func(i int) error {
		_, err := util.CreatePods(ctx, c.kube, pods[i])
		return err
	}); err != nil {
		t.Fatal(err)
	}
	createEnd := time.Now()
	timeout := 5 * time.Minute
	if full() {
		timeout = 30 * time.Minute
	}
	if err := tr.waitCount(len(pods), len(pods), timeout, sched.alive); err != nil {
		t.Fatalf("%s %s run %d: %v (scheduler log %s)", scenario, k, rep, err, sched.logPath)
	}
	stats, err := sched.stats()
	if err != nil {
		t.Fatal(err)
	}
	sched.stop(t)
	first, last := tr.bindWindow()
	r := RunResult{
		Kind: k, Run: rep, Pods: len(pods),
		Seconds:                 last.Sub(createStart).Seconds(),
		CreateSeconds:           createEnd.Sub(createStart).Seconds(),
		AfterLastCreatedSeconds: last.Sub(createEnd).Seconds(),
		BindWindowSeconds:       last.Sub(first).Seconds(),
		procStats:               stats,
	}
	r.PodsPerSecond = float64(r.Pods) / r.Seconds
	if k.ours() {
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
			t.Errorf("%s %s run %d: %d plans logged for %d gangs (log %s)", scenario, k, rep, r.Plans, len(gangs), sched.logPath)
		}
	}
	checkPlacements(t, tp, tr.placements(), gangOf, k)

	if err := deletePods(ctx, c, ns); err != nil {
		t.Fatal(err)
	}
	if err := tr.waitCount(0, 0, 5*time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	return r
}

// checkPlacements asserts that no node holds more GPUs than it has and, for ours, that every
// gang is inside one HyperNode of its hard tier.
func checkPlacements(t *testing.T, tp Topology, placements map[string]string, gangOf map[string]GangSpec, k Kind) {
	t.Helper()
	index := tp.nodeIndex()
	used := map[string]int{}
	nodesOf := map[string][]int{}
	for pod, node := range placements {
		g := gangOf[pod]
		used[node] += g.GPUs
		i, ok := index[node]
		if !ok {
			t.Errorf("pod %s bound to unknown node %s", pod, node)
			continue
		}
		nodesOf[g.Name] = append(nodesOf[g.Name], i)
	}
	for node, gpus := range used {
		if gpus > nodeGPUs {
			t.Errorf("node %s holds %d GPUs of %d", node, gpus, nodeGPUs)
		}
	}
	if !k.ours() {
		return
	}
	specs := map[string]GangSpec{}
	for _, g := range gangOf {
		specs[g.Name] = g
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
}

func medianOf(runs []RunResult, k Kind, f func(RunResult) float64) float64 {
	var vals []float64
	for _, r := range runs {
		if r.Kind == k {
			vals = append(vals, f(r))
		}
	}
	return median(vals)
}

func median(vals []float64) float64 {
	if len(vals) == 0 {
		return 0
	}
	s := append([]float64(nil), vals...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BigGangResult is scenario 2.
type BigGangResult struct {
	Topology Topology    `json:"topology"`
	Pods     int         `json:"pods"`
	Tier     int         `json:"tier"`
	Runs     []RunResult `json:"runs"`
	// Medians: last pod created to all bound.
	OursSeconds       float64 `json:"oursSeconds"`
	VanillaSeconds    float64 `json:"vanillaSeconds"`
	Ratio             float64 `json:"ratio"`
	OursPlanMs        float64 `json:"oursPlanMs"`
	OursPeakRSSMiB    float64 `json:"oursPeakRSSMiB"`
	VanillaPeakRSSMiB float64 `json:"vanillaPeakRSSMiB"`
	OursCPUSeconds    float64 `json:"oursCPUSeconds"`
	VanillaCPUSeconds float64 `json:"vanillaCPUSeconds"`
}

// Scenario 2: one gang of one 8-GPU pod per node, hard at tier 2, on twice as many nodes
// (leaves of 32, two spines big enough for the gang); vanilla binds the same pods as
// independent pods on the same nodes.
func TestBigGang(t *testing.T) {
	tp := Topology{Name: "bg", Nodes: 256, LeafSize: 32, LeavesPerSpine: 4}
	pods := 100
	if full() {
		tp.Nodes, tp.LeavesPerSpine, pods = 10000, 160, 5000
	}
	gangs := []GangSpec{{Name: "big", Size: pods, GPUs: nodeGPUs, Tier: 2}}
	c := newClients(t)
	tp.create(t, c)
	res := &BigGangResult{Topology: tp, Pods: pods, Tier: 2}
	for rep := range repeats() {
		for _, k := range abbaOrder(rep) {
			// A generous Permit timeout: the gang must not time out while 5,000 members are
			// scheduled on a shared 2-core machine.
			r := runGangs(t, c, tp, "biggang", gangs, k, rep, 600)
			t.Logf("big gang %s run %d: %d pods bound %.1fs after the last was created (created in %.1fs, bind window %.1fs), plan %.0f ms, peak RSS %.0f MiB, CPU %.1fs",
				k, rep, r.Pods, r.AfterLastCreatedSeconds, r.CreateSeconds, r.BindWindowSeconds, r.PlanMaxMs, r.PeakRSSMiB, r.CPUSeconds)
			res.Runs = append(res.Runs, r)
		}
	}
	res.OursSeconds = medianOf(res.Runs, OursBinPack, func(r RunResult) float64 { return r.AfterLastCreatedSeconds })
	res.VanillaSeconds = medianOf(res.Runs, Vanilla, func(r RunResult) float64 { return r.AfterLastCreatedSeconds })
	res.Ratio = res.OursSeconds / res.VanillaSeconds
	res.OursPlanMs = medianOf(res.Runs, OursBinPack, func(r RunResult) float64 { return r.PlanMaxMs })
	res.OursPeakRSSMiB = medianOf(res.Runs, OursBinPack, func(r RunResult) float64 { return r.PeakRSSMiB })
	res.VanillaPeakRSSMiB = medianOf(res.Runs, Vanilla, func(r RunResult) float64 { return r.PeakRSSMiB })
	res.OursCPUSeconds = medianOf(res.Runs, OursBinPack, func(r RunResult) float64 { return r.CPUSeconds })
	res.VanillaCPUSeconds = medianOf(res.Runs, Vanilla, func(r RunResult) float64 { return r.CPUSeconds })
	results.BigGang = res
}

// abbaOrder alternates which scheduler runs first (ours, vanilla; vanilla, ours; ...), so that
// drift of the shared machine during a run does not favour one of them.
func abbaOrder(rep int) []Kind {
	if rep%2 == 1 {
		return []Kind{Vanilla, OursBinPack}
	}
	return []Kind{OursBinPack, Vanilla}
}
