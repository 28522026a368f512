package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// Job is one job of a replayed trace: a gang of identical pods.
type Job struct {
	Name    string  `json:"name"`
	Class   string  `json:"class"`
	Arrival float64 `json:"arrival"`
	// Duration in trace time units after admission; 0 runs to the end of the trace.
	Duration float64 `json:"duration"`
	Pods     int     `json:"pods"`
	GPUs     int     `json:"gpusPerPod"`
	Mode     string  `json:"mode"` // hard or soft
	Tier     int     `json:"tier"` // highestTierAllowed
	// PriorityClass of the pods ("" for none: priority 0).
	PriorityClass string `json:"priorityClass,omitempty"`
}

// JobOutcome is what happened to one job in one replay.
type JobOutcome struct {
	Name     string `json:"name"`
	Admitted bool   `json:"admitted"`
	// FeasibleTier: the lowest tier with a HyperNode that had room for the whole job when it
	// arrived (0: not even the whole cluster had room).
	FeasibleTier int    `json:"feasibleTier"`
	Tier         int    `json:"tier,omitempty"`   // tier of the lowest HyperNode holding all its pods
	Leaves       int    `json:"leaves,omitempty"` // leaves spanned
	MinLeaves    int    `json:"minLeaves"`        // ceil(pods / pods per leaf)
	Message      string `json:"message,omitempty"`

	usedBefore []int // GPUs in use per node when the job arrived
	nodes      []int // node index of each pod
}

// UtilPoint is the share of GPUs in use after the events at trace time T.
type UtilPoint struct {
	T    float64 `json:"t"`
	Util float64 `json:"util"`
}

// ReplayResult is one scheduler's replay of a trace.
type ReplayResult struct {
	Kind                         Kind         `json:"kind"`
	Jobs                         int          `json:"jobs"`
	Admitted                     int          `json:"admitted"`
	Rejected                     int          `json:"rejected"`
	AdmittedBeforeFirstRejection int          `json:"admittedBeforeFirstRejection"`
	LowestTierShare              float64      `json:"lowestTierShare"` // of admitted jobs
	MeanLeavesRatio              float64      `json:"meanLeavesRatio"` // leaves / minLeaves, mean over admitted jobs
	HardViolations               int          `json:"hardViolations"`  // admitted hard jobs outside their tier
	MeanGPUUtil                  float64      `json:"meanGPUUtil"`     // time-weighted over the trace
	WallSeconds                  float64      `json:"wallSeconds"`
	Utilization                  []UtilPoint  `json:"utilization"`
	Outcomes                     []JobOutcome `json:"outcomes"`
}

// QualityResult is scenario 3.
type QualityResult struct {
	Topology Topology       `json:"topology"`
	Trace    []Job          `json:"trace"`
	Replays  []ReplayResult `json:"replays"`
}

// jobClass is one kind of job of the generated trace.
type jobClass struct {
	name    string
	weight  float64
	minPods int
	maxPods int
	gpus    int
	mode    string
	tier    int
}

// generateTrace draws n jobs with a fixed seed. Classes, relative to the tree (L nodes per
// leaf, S nodes per spine):
//
//	small:  35%, 2..8 pods of 4 GPUs, hard tier 1
//	leaf:   30%, 4..L pods of 8 GPUs, hard tier 1
//	spine:  20%, L+1..S/2 pods of 8 GPUs, hard tier 2
//	soft:   15%, 8..2L pods of 8 GPUs, soft, preferring tier 1
//
// Durations are uniform in [10, 60); arrivals are a Poisson process whose rate offers 1.2 times
// the cluster's GPUs (so the cluster fills up and jobs are rejected).
func generateTrace(tp Topology, n int) []Job {
	rng := rand.New(rand.NewPCG(3, 2026))
	L, S := tp.LeafSize, tp.LeafSize*tp.LeavesPerSpine
	classes := []jobClass{
		{"small", 0.35, 2, 8, 4, "hard", 1},
		{"leaf", 0.30, 4, L, 8, "hard", 1},
		{"spine", 0.20, L + 1, S / 2, 8, "hard", 2},
		{"soft", 0.15, 8, 2 * L, 8, "soft", 1},
	}
	jobs := make([]Job, n)
	gpuTime := 0.0
	for i := range jobs {
		c := pickWeighted(rng, classes, func(cl jobClass) float64 { return cl.weight })
		pods := c.minPods + rng.IntN(c.maxPods-c.minPods+1)
		jobs[i] = Job{
			Name: fmt.Sprintf("j%04d", i), Class: c.name, Duration: math.Round(10 + 50*rng.Float64()),
			Pods: pods, GPUs: c.gpus, Mode: c.mode, Tier: c.tier,
		}
		gpuTime += float64(pods*c.gpus) * jobs[i].Duration
	}
	meanGap := gpuTime / float64(n) / (1.2 * float64(tp.Nodes*nodeGPUs))
	t := 0.0
	for i := range jobs {
		t += rng.ExpFloat64() * meanGap
		jobs[i].Arrival = math.Round(t*100) / 100
	}
	return jobs
}

// feasibleTier is the lowest tier at which one HyperNode has room for the whole job.
func feasibleTier(tp Topology, used []int, job Job) int {
	leafCap := make([]int, tp.leaves())
	for n, u := range used {
		leafCap[tp.leafOf(n)] += (nodeGPUs - u) / job.GPUs
	}
	spineCap := make([]int, tp.spines())
	total := 0
	best := 0
	for l, c := range leafCap {
		if c >= job.Pods {
			best = 1
		}
		spineCap[tp.spineOf(l)] += c
		total += c
	}
	if best > 0 {
		return best
	}
	for _, c := range spineCap {
		if c >= job.Pods {
			return 2
		}
	}
	if total >= job.Pods {
		return 3
	}
	return 0
}

func minLeaves(tp Topology, job Job) int {
	perLeaf := tp.LeafSize * (nodeGPUs / job.GPUs)
	return (job.Pods + perLeaf - 1) / perLeaf
}

// replay runs the trace against a scheduler of the kind, one event at a time in trace order:
// the completions due before an arrival (their pods deleted), then the arrival, whose outcome
// (all pods bound, or refused by the scheduler) is awaited before the next event. Refused jobs
// are deleted (their bound pods too, for vanilla). Wall-clock time plays no part.
func replay(t *testing.T, c clients, tp Topology, jobs []Job, k Kind, name string) ReplayResult {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	ns, err := util.CreateNamespace(ctx, c.kube, name+"-"+string(k))
	if err != nil {
		t.Fatal(err)
	}
	tr := newTracker(t, c, ns)
	defer tr.cancel()
	sched := startScheduler(t, k, fmt.Sprintf("%s-%s", name, k))
	defer sched.stop(t)
	probes := 0
	// barrier makes sure the scheduler has seen earlier deletions before the next job: a
	// probe pod created after them is scheduled, and kube-scheduler's informer delivers the
	// deletions before the probe.
	barrier := func(deleted []string) {
		if err := tr.waitGone(deleted, time.Minute); err != nil {
			t.Fatal(err)
		}
		probes++
		waitReady(t, c, ns, tr, sched, fmt.Sprintf("probe-%d", probes))
	}
	barrier(nil)

	used := make([]int, tp.Nodes)
	index := tp.nodeIndex()
	res := ReplayResult{Kind: k, Jobs: len(jobs), AdmittedBeforeFirstRejection: -1}
	record := func(at float64) {
		sum := 0
		for _, u := range used {
			sum += u
		}
		res.Utilization = append(res.Utilization, UtilPoint{T: at, Util: float64(sum) / float64(tp.Nodes*nodeGPUs)})
	}
	type running struct {
		end   float64
		job   Job
		names []string
		nodes []int
	}
	var active []running
	remove := func(job Job, names []string) {
		if err := deleteJob(ctx, c, ns, job, names, k); err != nil {
			t.Fatal(err)
		}
	}
	var deleted []string
	for _, job := range jobs {
		sort.SliceStable(active, func(i, j int) bool { return active[i].end < active[j].end })
		for len(active) > 0 && active[0].end <= job.Arrival {
			done := active[0]
			active = active[1:]
			remove(done.job, done.names)
			deleted = append(deleted, done.names...)
			for _, n := range done.nodes {
				used[n] -= done.job.GPUs
			}
			record(done.end)
		}
		if len(deleted) > 0 {
			barrier(deleted)
			deleted = nil
		}

		out := JobOutcome{Name: job.Name, FeasibleTier: feasibleTier(tp, used, job), MinLeaves: minLeaves(tp, job), usedBefore: append([]int(nil), used...)}
		names := createJob(t, c, ns, job, k)
		admitted, msg, err := tr.waitOutcome(names, k.ours(), 3*time.Minute, sched.alive)
		if err != nil {
			t.Fatalf("%s job %s: %v (log %s)", k, job.Name, err, sched.logPath)
		}
		out.Admitted, out.Message = admitted, msg
		if admitted {
			res.Admitted++
			placements := tr.snapshot(names)
			for _, name := range names {
				n := index[placements[name].node]
				out.nodes = append(out.nodes, n)
				used[n] += job.GPUs
				if used[n] > nodeGPUs {
					t.Errorf("%s: node %s holds %d GPUs", k, placements[name].node, used[n])
				}
			}
			out.Tier, out.Leaves = tp.tierOf(out.nodes), tp.leafCount(out.nodes)
			if job.Duration > 0 {
				active = append(active, running{end: job.Arrival + job.Duration, job: job, names: names, nodes: out.nodes})
			}
		} else {
			res.Rejected++
			if res.AdmittedBeforeFirstRejection < 0 {
				res.AdmittedBeforeFirstRejection = res.Admitted
			}
			remove(job, names)
			deleted = append(deleted, names...)
		}
		res.Outcomes = append(res.Outcomes, out)
		record(job.Arrival)
	}
	if res.AdmittedBeforeFirstRejection < 0 {
		res.AdmittedBeforeFirstRejection = res.Admitted
	}
	summarize(&res, jobs)
	res.WallSeconds = time.Since(start).Seconds()
	if err := deletePods(ctx, c, ns); err != nil {
		t.Fatal(err)
	}
	return res
}

// summarize computes the placement metrics of a replay.
func summarize(res *ReplayResult, jobs []Job) {
	byName := map[string]Job{}
	for _, j := range jobs {
		byName[j.Name] = j
	}
	lowest, ratio := 0, 0.0
	for _, o := range res.Outcomes {
		if !o.Admitted {
			continue
		}
		if o.Tier == o.FeasibleTier {
			lowest++
		}
		ratio += float64(o.Leaves) / float64(o.MinLeaves)
		if j := byName[o.Name]; j.Mode == "hard" && o.Tier > j.Tier {
			res.HardViolations++
		}
	}
	if res.Admitted > 0 {
		res.LowestTierShare = float64(lowest) / float64(res.Admitted)
		res.MeanLeavesRatio = ratio / float64(res.Admitted)
	}
	pts := res.Utilization
	if len(pts) > 1 && pts[len(pts)-1].T > pts[0].T {
		area := 0.0
		for i := 0; i+1 < len(pts); i++ {
			area += pts[i].Util * (pts[i+1].T - pts[i].T)
		}
		res.MeanGPUUtil = area / (pts[len(pts)-1].T - pts[0].T)
	}
}

// createJob creates the job's pods (and PodGroup, for ours) and returns the pod names.
func createJob(t *testing.T, c clients, ns string, job Job, k Kind) []string {
	t.Helper()
	names, err := createJobObjects(context.Background(), c, ns, job, k)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// createJobObjects is createJob returning its error, for callers off the test's goroutine
// (churn_test.go). A job without a mode is plain pods, no PodGroup, for ours too.
func createJobObjects(ctx context.Context, c clients, ns string, job Job, k Kind) ([]string, error) {
	return makeJobObjects(ctx, c, ns, job, k, false)
}

// recreateJobObjects is createJobObjects for a retry: the objects an earlier attempt created
// count as created (the fault run retries across an apiserver's restart).
func recreateJobObjects(ctx context.Context, c clients, ns string, job Job, k Kind) ([]string, error) {
	return makeJobObjects(ctx, c, ns, job, k, true)
}

func makeJobObjects(ctx context.Context, c clients, ns string, job Job, k Kind, retry bool) ([]string, error) {
	created := func(err error) error {
		if retry && apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	group := ""
	if k.ours() && job.Mode != "" {
		group = job.Name
		constraint := fmt.Sprintf(`{"mode":%q,"highestTierAllowed":%d}`, job.Mode, job.Tier)
		pg := util.PodGroup(ns, job.Name, int32(job.Pods), map[string]string{podgroup.NetworkTopologyAnnotation: constraint})
		if err := created(util.CreatePodGroup(ctx, c.scheduling, pg)); err != nil {
			return nil, err
		}
	}
	pods := make([]*v1.Pod, job.Pods)
	names := make([]string, job.Pods)
	for i := range pods {
		pods[i] = gpuPod(ns, fmt.Sprintf("%s-%03d", job.Name, i), k.schedulerName(), job.GPUs, group)
		pods[i].Spec.PriorityClassName = job.PriorityClass
		names[i] = pods[i].Name
	}
	return names, parallel(len(pods), func(i int) error {
		_, err := util.CreatePods(ctx, c.kube, pods[i])
		return created(err)
	})
}

// deleteJob deletes the job's pods and the PodGroup createJob made for it.
func deleteJob(ctx context.Context, c clients, ns string, job Job, names []string, k Kind) error {
	if err := deletePodsNamed(ctx, c, ns, names); err != nil {
		return err
	}
	if !k.ours() || job.Mode == "" {
		return nil
	}
	return c.scheduling.SchedulingV1alpha1().PodGroups(ns).Delete(ctx, job.Name, metav1.DeleteOptions{})
}

// waitOutcome waits until the job is decided: every pod bound (admitted), or refused by the
// scheduler: for a gang, one member reported Unschedulable (Gang then rejects the whole
// group); for independent pods, every pod is bound or Unschedulable and one is not bound.
func (tr *tracker) waitOutcome(names []string, gang bool, timeout time.Duration, alive func() error) (admitted bool, message string, err error) {
	err = tr.poll(10*time.Millisecond, timeout, func() (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		states := tr.snapshot(names)
		bound, refused := 0, 0
		message = ""
		for _, n := range names {
			st, ok := states[n]
			if !ok {
				continue
			}
			if st.node != "" {
				bound++
			} else if st.unschedulable != "" {
				refused++
				message = st.unschedulable
			}
		}
		switch {
		case bound == len(names):
			admitted = true
			return true, nil
		case gang && refused > 0:
			return true, nil
		case !gang && refused > 0 && bound+refused == len(names):
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return false, "", fmt.Errorf("job not decided: %s: %w", tr.sample(), err)
	}
	return admitted, message, nil
}

// waitBound waits until the named pods are bound.
func (tr *tracker) waitBound(names []string, timeout time.Duration, alive func() error) error {
	return tr.poll(10*time.Millisecond, timeout, func() (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		states := tr.snapshot(names)
		for _, n := range names {
			if states[n].node == "" {
				return false, nil
			}
		}
		return true, nil
	})
}

// waitReady creates a small pod for the scheduler, waits until it is bound, deletes it and
// waits until the tracker has seen it go: the scheduler is up and has seen every earlier event.
func waitReady(t *testing.T, c clients, ns string, tr *tracker, sched *schedProcess, name string) {
	t.Helper()
	ctx := context.Background()
	probe := util.Pod(ns, name, sched.kind.schedulerName(), "10m", nil)
	if _, err := util.CreatePods(ctx, c.kube, probe); err != nil {
		t.Fatal(err)
	}
	if err := tr.waitBound([]string{name}, 2*time.Minute, sched.alive); err != nil {
		t.Fatalf("%s: probe pod %s not bound: %v (log %s)", sched.kind, name, err, sched.logPath)
	}
	if err := deletePodsNamed(ctx, c, ns, []string{name}); err != nil {
		t.Fatal(err)
	}
	if err := tr.waitGone([]string{name}, time.Minute); err != nil {
		t.Fatal(err)
	}
}

// waitGone waits until the tracker has seen the named pods deleted.
func (tr *tracker) waitGone(names []string, timeout time.Duration) error {
	return tr.poll(10*time.Millisecond, timeout, func() (bool, error) {
		return len(tr.snapshot(names)) == 0, nil
	})
}

// Scenario 3: placement quality over a replayed trace, for BinPack, LeastWaste and vanilla.
func TestQuality(t *testing.T) {
	tp := Topology{Name: "q", Nodes: 120, LeafSize: 20, LeavesPerSpine: 3}
	jobs := 30
	if full() {
		tp.Nodes, tp.LeavesPerSpine, jobs = 1000, 10, 120
	}
	trace := generateTrace(tp, jobs)
	c := newClients(t)
	tp.create(t, c)
	res := &QualityResult{Topology: tp, Trace: trace}
	for _, k := range []Kind{OursBinPack, OursLeastWaste, Vanilla} {
		r := replay(t, c, tp, trace, k, "quality")
		t.Logf("quality %s: %d/%d admitted, %d before the first rejection, lowest feasible tier %.0f%%, leaves/min %.2f, hard violations %d, GPU util %.0f%% (%.0fs)",
			k, r.Admitted, r.Jobs, r.AdmittedBeforeFirstRejection, 100*r.LowestTierShare, r.MeanLeavesRatio, r.HardViolations, 100*r.MeanGPUUtil, r.WallSeconds)
		res.Replays = append(res.Replays, r)
	}
	results.Quality = res

	vanilla := res.Replays[2]
	for _, r := range res.Replays[:2] {
		if r.HardViolations != 0 {
			t.Errorf("%s: %d admitted jobs outside their hard tier", r.Kind, r.HardViolations)
		}
		// The gradient search places every admitted gang at the lowest tier that has room.
		if r.LowestTierShare != 1 {
			t.Errorf("%s: only %.3f of the admitted gangs at their lowest feasible tier", r.Kind, r.LowestTierShare)
		}
		if r.LowestTierShare < vanilla.LowestTierShare {
			t.Errorf("%s: lowest-tier share %.3f below vanilla's %.3f", r.Kind, r.LowestTierShare, vanilla.LowestTierShare)
		}
		if r.MeanLeavesRatio > vanilla.MeanLeavesRatio {
			t.Errorf("%s: leaves spanned / minimum %.3f above vanilla's %.3f", r.Kind, r.MeanLeavesRatio, vanilla.MeanLeavesRatio)
		}
		if r.Admitted+r.Rejected != r.Jobs || len(r.Outcomes) != r.Jobs {
			t.Errorf("%s: %d admitted + %d rejected, %d outcomes, for %d jobs", r.Kind, r.Admitted, r.Rejected, len(r.Outcomes), r.Jobs)
		}
	}
}

// pickWeighted draws one of items with probability its weight (the weights sum to 1; the
// last item takes what rounding leaves), from one draw of rng.
func pickWeighted[T any](rng *rand.Rand, items []T, weight func(T) float64) T {
	x := rng.Float64()
	for _, it := range items {
		if x < weight(it) {
			return it
		}
		x -= weight(it)
	}
	return items[len(items)-1]
}
