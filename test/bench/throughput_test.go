package bench

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
)

// GangSpec is one gang of a scenario or, Plain, a unit of independent pods.
type GangSpec struct {
	Name string `json:"name"`
	Size int    `json:"size"`
	GPUs int    `json:"gpusPerPod"`
	// Tier is the hard highestTierAllowed (ours only; vanilla pods have no PodGroup).
	Tier int `json:"tier"`
	// Plain: not a gang but Size independent pods, without a PodGroup for either scheduler.
	Plain bool `json:"plain,omitempty"`
	// StageSize > 0 splits the gang (ours) into sub-groups of that many members by rank,
	// each hard at tier 1: pipeline stages. Both schedulers' pods carry the rank.
	StageSize int `json:"stageSize,omitempty"`
}

// RunResult is one run of one scheduler over a scenario's pods. In the arriving mode the
// scheduler is running and has bound a probe pod before the first pod is created; in the
// backlog mode every pod exists before the scheduler process starts.
type RunResult struct {
	Kind Kind     `json:"kind"`
	Run  int      `json:"run"`
	Mode loadMode `json:"mode"`
	Pods int      `json:"pods"`
	// Seconds: from the start (arriving: the first pod's creation; backlog: the scheduler
	// process's start) to the last pod bound.
	Seconds       float64 `json:"seconds"`
	PodsPerSecond float64 `json:"podsPerSecond"`
	// FirstBindSeconds: from the start to the first pod bound; FirstGangSeconds: to the first
	// gang with every member bound (absent without gangs).
	FirstBindSeconds float64 `json:"firstBindSeconds"`
	FirstGangSeconds float64 `json:"firstGangSeconds,omitempty"`
	// CreateSeconds: creating the pods (16 parallel clients).
	CreateSeconds float64 `json:"createSeconds"`
	// AfterLastCreatedSeconds: from the last pod created to the last pod bound (arriving only).
	AfterLastCreatedSeconds float64 `json:"afterLastCreatedSeconds"`
	// BindWindowSeconds: from the first pod bound to the last.
	BindWindowSeconds float64 `json:"bindWindowSeconds"`
	procStats
	// NodesUsed, FullNodes: nodes holding a pod of the run, and those with every GPU taken,
	// when the last pod was bound. A bin-packing scheduler fills nodes that kube-scheduler
	// then filters out again for every later pod.
	NodesUsed   int     `json:"nodesUsed"`
	FullNodes   int     `json:"fullNodes"`
	Plans       int     `json:"plans"`
	PlanTotalMs float64 `json:"planTotalMs"`
	PlanMaxMs   float64 `json:"planMaxMs"`
	// logPath is the scheduler's log.
	logPath string
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

// throughputLoad is scenario 1's cluster and load, shared by the scenarios that compare with
// it: 5,000 nodes (leaves of 32, spines of 16 leaves), 10,000 pods of 2 GPUs, gangs of 8 to
// 512 pods; short: 256 nodes (spines of 4 leaves), 512 pods, gangs of 8 to 128.
type throughputLoad struct {
	tp    Topology
	pods  int
	sizes []int
}

func newThroughputLoad(name string) throughputLoad {
	tl := throughputLoad{tp: Topology{Name: name, Nodes: 256, LeafSize: 32, LeavesPerSpine: 4}, pods: 512, sizes: []int{8, 16, 32, 64, 128}}
	if full() {
		tl.tp.Nodes, tl.tp.LeavesPerSpine = 5000, 16
		tl.pods, tl.sizes = 10000, []int{8, 16, 32, 64, 128, 256, 512}
	}
	return tl
}

// gangs returns scenario 1's gangs over the given number of pods.
func (tl throughputLoad) gangs(pods int) []GangSpec {
	return throughputGangs(pods, tl.sizes, tl.tp.LeafSize*nodeGPUs/2/2)
}

// Scenario 1: throughput. The same pods (2 GPUs each), as hard gangs for ours and as
// independent pods for vanilla, created gang after gang at full speed while the scheduler
// runs; runs alternate between the kinds (ABBA order), medians are reported.
func TestThroughput(t *testing.T) {
	tl := newThroughputLoad("tp")
	tp, pods := tl.tp, tl.pods
	gangs := tl.gangs(pods)
	c := newClients(t)
	tp.create(t, c)
	res := &ThroughputResult{Topology: tp, Pods: pods, Gangs: gangs}
	for rep := range repeats() {
		for _, k := range abbaOrder(rep) {
			r := runGangs(t, c, tp, runSpec{scenario: "throughput", units: gangs, mode: arriving}, k, rep)
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
	Topology Topology `json:"topology"`
	Pods     int      `json:"pods"`
	Tier     int      `json:"tier"`
	// StageSize is the sub-groups' size (0: none).
	StageSize int         `json:"stageSize,omitempty"`
	Runs      []RunResult `json:"runs"`
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
	results.BigGang = runBigGang(t, "biggang", 0)
}

// Scenario 2 in pipeline stages: the same gang in sub-groups of 8 members (by rank), each
// stage hard at tier 1 (625 stages at full scale); vanilla binds the same pods.
func TestBigGangStages(t *testing.T) {
	results.BigGangStages = runBigGang(t, "stages", 8)
}

func runBigGang(t *testing.T, scenario string, stageSize int) *BigGangResult {
	tp := Topology{Name: "bg", Nodes: 256, LeafSize: 32, LeavesPerSpine: 4}
	pods := 100
	if full() {
		tp.Nodes, tp.LeavesPerSpine, pods = 10000, 160, 5000
	}
	if stageSize > 0 {
		pods -= pods % stageSize // every stage complete: a short one could never bind
	}
	gangs := []GangSpec{{Name: "big", Size: pods, GPUs: nodeGPUs, Tier: 2, StageSize: stageSize}}
	c := newClients(t)
	tp.create(t, c)
	res := &BigGangResult{Topology: tp, Pods: pods, Tier: 2, StageSize: stageSize}
	for rep := range repeats() {
		for _, k := range abbaOrder(rep) {
			// A generous Permit timeout: the gang must not time out while 5,000 members are
			// scheduled on a shared 2-core machine.
			r := runGangs(t, c, tp, runSpec{scenario: scenario, units: gangs, mode: arriving, timeoutSeconds: 600}, k, rep)
			t.Logf("%s %s run %d: %d pods bound %.1fs after the last was created (created in %.1fs, bind window %.1fs), plan %.0f ms, peak RSS %.0f MiB, CPU %.1fs",
				scenario, k, rep, r.Pods, r.AfterLastCreatedSeconds, r.CreateSeconds, r.BindWindowSeconds, r.PlanMaxMs, r.PeakRSSMiB, r.CPUSeconds)
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
	return res
}

// abbaOrder alternates which scheduler runs first (ours, vanilla; vanilla, ours; ...), so that
// drift of the shared machine during a run does not favour one of them.
func abbaOrder(rep int) []Kind {
	if rep%2 == 1 {
		return []Kind{Vanilla, OursBinPack}
	}
	return []Kind{OursBinPack, Vanilla}
}
