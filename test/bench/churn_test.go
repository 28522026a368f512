package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// Issue #40's scenario, "a day of a shared GPU fabric, compressed" (TestChurn): jobs arrive as
// a Poisson stream, run, and leave, on a cluster kept about 92% busy, so that queues form;
// the same trace runs on vanilla kube-scheduler, on ours without holds and on ours with holds.
// Its user story: a hard gang that needs a whole spine waits as long as small jobs keep
// arriving, unless it may hold the spine while it drains.
//
// The trace (churnTrace, fixed seed):
//   - sizes: the share of jobs by GPU count in the Helios trace (SenseTime; Hu et al.,
//     "Characterization and Prediction of Deep Learning Workloads in Large-Scale GPU
//     Datacenters", SC'21): 1 GPU 72.2%, 2-4 8.3%, 5-8 14.2%, 9-16 3.0%, 17-32 1.7%,
//     33-64 0.3%, 65-128 0.2%, 129-256 0.1%; uniform within a bucket. A job of G GPUs is
//     ceil(G/8) pods of min(G, 8) GPUs (G above 8 rounded up to whole nodes).
//   - run times: per size bucket from the Philly trace (Microsoft; Jeon et al., "Analysis of
//     Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads", USENIX ATC'19),
//     p50/p75/p90 in minutes: 1 GPU 20/64/245, 2-4 33/1000/3600, 5-8 200/2000/6200, more
//     than 8 140/930/3400; a log-normal through p50 and p90, at least a minute, capped at
//     1.5 p90 to keep a run bounded.
//   - constraints: a single-pod job is a plain pod (most pods of a cluster are not gangs);
//     of the multi-pod jobs (PodGroups), 30% are soft at tier 1, the others hard at tier 1
//     when they fit a leaf, hard at tier 2 when they fit a spine, else soft at tier 1.
//   - heroes: three gangs of a whole spine (8-GPU pods, hard at tier 2, the >8 bucket's p90
//     run time: a job that takes a whole spine is among the longest of its bucket; the same
//     priority as everything else) arriving at 20%, 45% and 70% of the arrival window.
//   - load: jobs are drawn until their GPU demand (heroes included) is 92% of the cluster's
//     GPUs over the window; a Poisson process's arrivals, given their number, are uniform
//     over the window.
//
// Time: 1 trace minute is 1/scale of a second. Full (-bench.full): 1,024 nodes (64 leaves of
// 16, 4 spines), scale 30: the longest run time (9,300 minutes) takes 310 s, a 1-GPU job's
// median 0.7 s; a 6-minute arrival window (10,800 trace minutes, 7.5 days) of about 21,000
// jobs, some 59 a second; holds after 10 s (300 trace minutes). Short (what CI runs): 64
// nodes (8 leaves of 8, 2 spines), scale 300: the longest 31 s, a 20-second window of about
// 1,000 jobs; holds after 1 s. Both keep the hold wait at 300 trace minutes (at least 1 s):
// a gang waits five hours of trace before it may hold a domain. Why these scales: a job's
// demand is fixed by the traces (about 3,800 GPU-minutes on average, mostly the 5-8 GPU
// jobs' long tail), so at a given load the arrivals per longest run time are fixed by the
// cluster's size (about 21,000 on 1,024 nodes); a shorter longest run means more arrivals a
// second, and scale 30 keeps both within what a 2-core machine sustains.
//
// The harness creates a job at its arrival and completes it (deletes its pods and PodGroup)
// its run time after its last pod was bound; vanilla gets the same pods without PodGroups
// and, like a distributed job, a gang runs only once all its pods are bound. A run ends when
// every job ran, when nothing runs and nothing binds for stuckAfter after the last arrival
// (the waiting jobs wait for each other), or at the cap.

// churnSources is what the result cites.
const churnSources = "job sizes: Helios (SenseTime; Hu et al., SC'21); run times: Philly (Jeon et al., USENIX ATC'19)"

const (
	churnLoad       = 0.92  // offered GPU demand over the arrival window / the cluster's GPUs
	churnSoftShare  = 0.30  // of the multi-pod jobs, soft at tier 1 whatever their size
	holdWaitMinutes = 300.0 // Gang's hold wait in trace minutes
	heroClass       = "hero"
	// stuckAfter: with every job arrived and none running, nothing frees room; a run that
	// binds nothing for this long ends (vanilla's partial gangs can hold each other's nodes).
	stuckAfter = 30 * time.Second
	// settleFor: binds in flight when a run ended may land (a gang's members bind one call
	// each, so a look at the wrong moment sees part of a gang being bound).
	settleFor = 10 * time.Second
)

// heroArrivals are the heroes' arrivals, as fractions of the arrival window.
var heroArrivals = []float64{0.20, 0.45, 0.70}

// churnClasses are the size classes of the report, in GPUs per job.
var churnClasses = []string{"1 GPU", "2-8", "9-64", "65+", heroClass}

func sizeClass(gpus int) string {
	switch {
	case gpus == 1:
		return "1 GPU"
	case gpus <= 8:
		return "2-8"
	case gpus <= 64:
		return "9-64"
	}
	return "65+"
}

// runTime is a size bucket's run time in the Philly trace, in minutes.
type runTime struct{ p50, p90 float64 }

// z90 is the standard normal distribution's 90th percentile.
const z90 = 1.2815515655446004

var (
	phillyOne   = runTime{20, 245}
	phillyFew   = runTime{33, 3600}  // 2-4 GPUs
	phillyNode  = runTime{200, 6200} // 5-8 GPUs
	phillyMulti = runTime{140, 3400} // more than 8 GPUs
)

// draw is a log-normal through p50 and p90, between a minute and 1.5 p90.
func (rt runTime) draw(rng *rand.Rand) float64 {
	sigma := math.Log(rt.p90/rt.p50) / z90
	return min(max(rt.p50*math.Exp(sigma*rng.NormFloat64()), 1), 1.5*rt.p90)
}

// sizeBucket is a range of job sizes in GPUs, its share of the Helios jobs and its run time.
type sizeBucket struct {
	lo, hi int
	share  float64
	run    runTime
}

var heliosSizes = []sizeBucket{
	{1, 1, 0.722, phillyOne},
	{2, 4, 0.083, phillyFew},
	{5, 8, 0.142, phillyNode},
	{9, 16, 0.030, phillyMulti},
	{17, 32, 0.017, phillyMulti},
	{33, 64, 0.003, phillyMulti},
	{65, 128, 0.002, phillyMulti},
	{129, 256, 0.001, phillyMulti},
}

// churnConfig is the scenario's cluster and clocks.
type churnConfig struct {
	tp    Topology
	scale float64 // trace minutes per benchmark second
	// window: the arrival window; capAfter: when a run that has not finished ends anyway.
	window, capAfter time.Duration
}

func churnSetup() churnConfig {
	if full() {
		return churnConfig{tp: Topology{Name: "churn", Nodes: 1024, LeafSize: 16, LeavesPerSpine: 16},
			scale: 30, window: 6 * time.Minute, capAfter: 18 * time.Minute}
	}
	return churnConfig{tp: Topology{Name: "churn", Nodes: 64, LeafSize: 8, LeavesPerSpine: 4},
		scale: 300, window: 20 * time.Second, capAfter: 2 * time.Minute}
}

// churnHoldWaitSeconds is OursHolds' hold.waitSeconds: holdWaitMinutes of the trace, at least
// a second (0 would turn holds off).
func churnHoldWaitSeconds() int64 {
	return max(1, int64(math.Round(holdWaitMinutes/churnSetup().scale)))
}

// wall converts trace minutes to the benchmark's clock.
func (cfg churnConfig) wall(minutes float64) time.Duration {
	return time.Duration(minutes / cfg.scale * float64(time.Second))
}

// ChurnTrace describes the generated trace (its jobs are not stored: the seed makes them).
type ChurnTrace struct {
	Sources               string  `json:"sources"`
	TraceMinutesPerSecond float64 `json:"traceMinutesPerSecond"`
	WindowSeconds         float64 `json:"windowSeconds"`
	OfferedLoad           float64 `json:"offeredLoad"`
	Jobs                  int     `json:"jobs"`
	JobsPerSecond         float64 `json:"jobsPerSecond"`
	Pods                  int     `json:"pods"`
	// ByClass counts the jobs per size class; PlainJobs the single-pod jobs; the rest are
	// gangs, HardTier1, HardTier2 or Soft (at tier 1), heroes included.
	ByClass        map[string]int `json:"byClass"`
	PlainJobs      int            `json:"plainJobs"`
	HardTier1      int            `json:"hardTier1"`
	HardTier2      int            `json:"hardTier2"`
	Soft           int            `json:"soft"`
	LongestSeconds float64        `json:"longestSeconds"` // the longest run time, on the wall clock
	Heroes         []Job          `json:"heroes"`
}

// ClassWaits is the queueing delay (arrival to all pods bound) of one size class; a job that
// still waits when the run ends counts with its wait so far.
type ClassWaits struct {
	Class   string  `json:"class"`
	Jobs    int     `json:"jobs"`
	Waiting int     `json:"waiting"`
	P50     float64 `json:"p50Seconds"`
	P99     float64 `json:"p99Seconds"`
}

// JobWait is one job's queueing delay (so far, if it never started).
type JobWait struct {
	Name           string  `json:"name"`
	GPUs           int     `json:"gpus"`
	ArrivalSeconds float64 `json:"arrivalSeconds"`
	WaitSeconds    float64 `json:"waitSeconds"`
	Started        bool    `json:"started"`
	Tier           int     `json:"tier,omitempty"`
}

// ChurnRun is one scheduler's run of the trace.
type ChurnRun struct {
	Kind Kind `json:"kind"`
	Jobs int  `json:"jobs"`
	// Ended: "every job ran", "stuck" (see stuckAfter) or "cap".
	Ended       string  `json:"ended"`
	WallSeconds float64 `json:"wallSeconds"`
	// Util*: GPU-seconds of running jobs (all pods bound, until deleted) over the cluster's,
	// in the arrival window and in the whole run; Allocated* count every bound pod, those of
	// gangs not all bound too.
	UtilWindow          float64      `json:"utilWindow"`
	UtilRun             float64      `json:"utilRun"`
	AllocatedUtilWindow float64      `json:"allocatedUtilWindow"`
	AllocatedUtilRun    float64      `json:"allocatedUtilRun"`
	Waits               []ClassWaits `json:"waits"`
	MaxWaitSeconds      float64      `json:"maxWaitSeconds"`
	LargestJob          JobWait      `json:"largestJob"` // the largest job that is not a hero
	Heroes              []JobWait    `json:"heroes"`
	// Gangs that started; TierShares: their shares at tier 1, 2, 3 (the lowest HyperNode
	// holding all their pods); leaves spanned and the minimum, means over them.
	Gangs          int        `json:"gangs"`
	TierShares     [3]float64 `json:"tierShares"`
	MeanLeaves     float64    `json:"meanLeaves"`
	MeanMinLeaves  float64    `json:"meanMinLeaves"`
	HardViolations int        `json:"hardViolations"` // started hard gangs above their tier
	SoftAboveTier  int        `json:"softAboveTier"`
	// PartialGangs: gangs with some but not all pods bound when the run ended (after
	// settleFor). Waiting: jobs not all bound then; Running: jobs bound and not yet done.
	PartialGangs int `json:"partialGangs"`
	Waiting      int `json:"waiting"`
	Running      int `json:"running"`
	// CreationLag*: how late the harness began creating jobs after their arrival times.
	CreationLagP99Seconds float64 `json:"creationLagP99Seconds"`
	CreationLagMaxSeconds float64 `json:"creationLagMaxSeconds"`
	CPUSeconds            float64 `json:"cpuSeconds"`
	PeakRSSMiB            float64 `json:"peakRSSMiB"`
}

// ChurnTargets are issue #40's checks, ours with holds against ours without.
type ChurnTargets struct {
	// The longest wait with holds (waits so far included) against the trace's longest run
	// time plus the hold wait.
	MaxWaitHoldsSeconds float64 `json:"maxWaitHoldsSeconds"`
	MaxWaitBoundSeconds float64 `json:"maxWaitBoundSeconds"`
	MaxWaitMet          bool    `json:"maxWaitMet"`
	// Utilization over the arrival window with holds minus without, in points (target >= -5).
	UtilDeltaPoints float64 `json:"utilDeltaPoints"`
	UtilMet         bool    `json:"utilMet"`
	// HardWithinTier: every started hard gang of both inside its allowed tier.
	HardWithinTier bool `json:"hardWithinTier"`
}

// ChurnResult is issue #40's scenario.
type ChurnResult struct {
	Topology        Topology     `json:"topology"`
	Trace           ChurnTrace   `json:"trace"`
	HoldWaitSeconds int64        `json:"holdWaitSeconds"`
	CapSeconds      float64      `json:"capSeconds"`
	Runs            []ChurnRun   `json:"runs"`
	Targets         ChurnTargets `json:"targets"`
}

// drawJob draws a job's size, run time and constraint.
func drawJob(tp Topology, rng *rand.Rand) Job {
	b := pickWeighted(rng, heliosSizes, func(sb sizeBucket) float64 { return sb.share })
	g := b.lo + rng.IntN(b.hi-b.lo+1)
	job := Job{Pods: 1, GPUs: g, Duration: b.run.draw(rng)}
	if g > nodeGPUs {
		job.Pods, job.GPUs = (g+nodeGPUs-1)/nodeGPUs, nodeGPUs
	}
	job.Class = sizeClass(job.Pods * job.GPUs)
	constrain(tp, &job, rng)
	return job
}

// constrain sets a multi-pod job's constraint (pods of 8 GPUs: one node each); a single pod
// stays a plain pod.
func constrain(tp Topology, job *Job, rng *rand.Rand) {
	if job.Pods == 1 {
		return
	}
	job.Mode, job.Tier = "soft", 1
	switch {
	case rng.Float64() < churnSoftShare:
	case job.Pods <= tp.LeafSize:
		job.Mode = "hard"
	case job.Pods <= tp.LeafSize*tp.LeavesPerSpine:
		job.Mode, job.Tier = "hard", 2
	}
}

func gpuMinutes(j Job) float64 { return float64(j.Pods*j.GPUs) * j.Duration }

// churnTrace generates the trace (arrivals and run times in trace minutes), in arrival order.
func churnTrace(cfg churnConfig) ([]Job, ChurnTrace) {
	rng := rand.New(rand.NewPCG(40, 2026))
	horizon := cfg.window.Seconds() * cfg.scale
	var jobs []Job
	demand := 0.0
	for i, at := range heroArrivals {
		hero := Job{Name: fmt.Sprintf("hero-%d", i+1), Class: heroClass, Arrival: at * horizon, Duration: phillyMulti.p90,
			Pods: cfg.tp.LeafSize * cfg.tp.LeavesPerSpine, GPUs: nodeGPUs, Mode: "hard", Tier: 2}
		jobs = append(jobs, hero)
		demand += gpuMinutes(hero)
	}
	capacity := float64(cfg.tp.Nodes*nodeGPUs) * horizon
	for demand < churnLoad*capacity {
		job := drawJob(cfg.tp, rng)
		job.Arrival = horizon * rng.Float64()
		jobs = append(jobs, job)
		demand += gpuMinutes(job)
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].Arrival < jobs[b].Arrival })
	for i := range jobs {
		if jobs[i].Class != heroClass {
			jobs[i].Name = fmt.Sprintf("j%05d", i)
		}
	}
	return jobs, describeTrace(cfg, jobs, demand/capacity)
}

func describeTrace(cfg churnConfig, jobs []Job, load float64) ChurnTrace {
	tr := ChurnTrace{Sources: churnSources, TraceMinutesPerSecond: cfg.scale, WindowSeconds: cfg.window.Seconds(),
		OfferedLoad: load, Jobs: len(jobs), JobsPerSecond: float64(len(jobs)) / cfg.window.Seconds(), ByClass: map[string]int{}}
	for _, j := range jobs {
		tr.ByClass[j.Class]++
		tr.Pods += j.Pods
		tr.LongestSeconds = max(tr.LongestSeconds, cfg.wall(j.Duration).Seconds())
		switch {
		case j.Mode == "":
			tr.PlainJobs++
		case j.Mode == "soft":
			tr.Soft++
		case j.Tier == 1:
			tr.HardTier1++
		default:
			tr.HardTier2++
		}
		if j.Class == heroClass {
			tr.Heroes = append(tr.Heroes, j)
		}
	}
	return tr
}

// churnJob is one job of the trace in one run.
type churnJob struct {
	Job
	due, length time.Duration // arrival and run time on the wall clock
	names       []string
	created     time.Time   // the harness began creating it: its arrival
	podBound    []time.Time // when each pod was seen bound, once all were
	nodes       []int
	started     time.Time // its last pod bound
	done        time.Time // the harness deleted it
}

func (j *churnJob) gpus() int { return j.Pods * j.GPUs }

// churnRunner drives one run: each step (a tracker poll) creates the jobs that arrived, notes
// the jobs whose pods are all bound and deletes those whose run time is over.
type churnRunner struct {
	c   clients
	cfg churnConfig
	k   Kind
	ns  string
	tr  *tracker
	// alive fails when a process the run needs has exited; create and remove make and
	// delete a job's objects (createJobObjects and deleteJob; the fault run retries them).
	alive  func() error
	create func(ctx context.Context, c clients, ns string, job Job, k Kind) ([]string, error)
	remove func(ctx context.Context, c clients, ns string, job Job, names []string, k Kind) error
	index  map[string]int
	// untilStarted ends the run once every job has started (the fault run), not finished.
	untilStarted bool
	jobs         []*churnJob
	next         int // the first job that has not arrived

	waiting, running []*churnJob
	start, end       time.Time
	ended            string
	lastBound        int       // bound pods at lastChange
	lastChange       time.Time // when the number of bound pods last changed
}

func runChurn(t *testing.T, c clients, cfg churnConfig, trace []Job, k Kind) ChurnRun {
	t.Helper()
	ctx := context.Background()
	ns, err := util.CreateNamespace(ctx, c.kube, "churn-"+string(k))
	if err != nil {
		t.Fatal(err)
	}
	tr := newTracker(t, c, ns)
	defer tr.cancel()
	sched := startScheduler(t, k, "churn-"+string(k))
	defer sched.stop(t)
	waitReady(t, c, ns, tr, sched, "probe")

	r := newChurnRunner(c, cfg, trace, k, ns, tr, sched.alive)
	if err := tr.poll(10*time.Millisecond, cfg.capAfter+time.Minute, r.step); err != nil {
		t.Fatalf("%s: %v (log %s)", k, err, sched.logPath)
	}
	r.end = time.Now()
	stats, err := sched.stats()
	if err != nil {
		t.Fatal(err)
	}
	r.settle()
	run := r.result()
	run.CPUSeconds, run.PeakRSSMiB = stats.CPUSeconds, stats.PeakRSSMiB
	sched.stop(t)
	if err := deletePods(ctx, c, ns); err != nil {
		t.Fatal(err)
	}
	// The next run's scheduler must find every node empty.
	if err := tr.waitCount(0, 0, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	return run
}

// newChurnRunner prepares a run of the trace; its clock starts now.
func newChurnRunner(c clients, cfg churnConfig, trace []Job, k Kind, ns string, tr *tracker, alive func() error) *churnRunner {
	r := &churnRunner{c: c, cfg: cfg, k: k, ns: ns, tr: tr, alive: alive, create: createJobObjects, remove: deleteJob, index: cfg.tp.nodeIndex()}
	for _, j := range trace {
		r.jobs = append(r.jobs, &churnJob{Job: j, due: cfg.wall(j.Arrival), length: cfg.wall(j.Duration)})
	}
	r.start = time.Now()
	r.lastChange = r.start
	return r
}

func (r *churnRunner) step() (bool, error) {
	if err := r.alive(); err != nil {
		return false, err
	}
	now := time.Now()
	if err := r.arrive(now); err != nil {
		return false, err
	}
	r.checkBound()
	if err := r.complete(now); err != nil {
		return false, err
	}
	return r.over(now), nil
}

// arrive creates the jobs whose arrival time has come.
func (r *churnRunner) arrive(now time.Time) error {
	first := r.next
	for r.next < len(r.jobs) && !r.start.Add(r.jobs[r.next].due).After(now) {
		r.jobs[r.next].created = now
		r.next++
	}
	due := r.jobs[first:r.next]
	r.waiting = append(r.waiting, due...)
	return parallel(len(due), func(i int) error {
		names, err := r.create(context.Background(), r.c, r.ns, due[i].Job, r.k)
		due[i].names = names
		return err
	})
}

// checkBound starts the waiting jobs whose pods are all bound.
func (r *churnRunner) checkBound() {
	waiting := r.waiting[:0]
	for _, j := range r.waiting {
		if r.tr.boundCount(j.names) < j.Pods {
			waiting = append(waiting, j)
			continue
		}
		states := r.tr.snapshot(j.names)
		for _, name := range j.names {
			st := states[name]
			j.podBound = append(j.podBound, st.boundAt)
			j.nodes = append(j.nodes, r.index[st.node])
			if st.boundAt.After(j.started) {
				j.started = st.boundAt
			}
		}
		r.running = append(r.running, j)
	}
	r.waiting = waiting
}

// complete deletes the jobs whose run time since their last bind is over.
func (r *churnRunner) complete(now time.Time) error {
	var due []*churnJob
	running := r.running[:0]
	for _, j := range r.running {
		if j.started.Add(j.length).After(now) {
			running = append(running, j)
			continue
		}
		j.done = now
		due = append(due, j)
	}
	r.running = running
	return parallel(len(due), func(i int) error {
		return r.remove(context.Background(), r.c, r.ns, due[i].Job, due[i].names, r.k)
	})
}

// over reports whether the run ends, and why.
func (r *churnRunner) over(now time.Time) bool {
	arrived := r.next == len(r.jobs)
	if _, bound := r.tr.count(); bound != r.lastBound {
		r.lastBound, r.lastChange = bound, now
	}
	switch {
	case arrived && len(r.waiting) == 0 && r.untilStarted:
		r.ended = "every job started"
	case arrived && len(r.waiting) == 0 && len(r.running) == 0:
		r.ended = "every job ran"
	case now.Sub(r.start) >= r.cfg.capAfter:
		r.ended = "cap"
	case arrived && len(r.running) == 0 && now.Sub(r.lastChange) >= stuckAfter:
		r.ended = "stuck"
	default:
		return false
	}
	return true
}

// settle waits up to settleFor until no waiting gang is partly bound.
func (r *churnRunner) settle() {
	// A timeout is not an error: what is still partial then is counted.
	_ = r.tr.poll(100*time.Millisecond, settleFor, func() (bool, error) { return r.partialGangs() == 0, nil })
}

func (r *churnRunner) partialGangs() int {
	n := 0
	for _, j := range r.waiting {
		if b := r.tr.boundCount(j.names); j.Pods > 1 && b > 0 && b < j.Pods {
			n++
		}
	}
	return n
}

// boundCount returns how many of the named pods are bound.
func (tr *tracker) boundCount(names []string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, name := range names {
		if st, ok := tr.pods[name]; ok && st.node != "" {
			n++
		}
	}
	return n
}

func (r *churnRunner) result() ChurnRun {
	// Jobs that never arrived (a cap inside the window) count as waiting.
	run := ChurnRun{Kind: r.k, Jobs: len(r.jobs), Ended: r.ended, WallSeconds: r.end.Sub(r.start).Seconds(),
		PartialGangs: r.partialGangs(), Waiting: len(r.waiting) + len(r.jobs) - r.next, Running: len(r.running)}
	r.waits(&run)
	r.placement(&run)
	r.utilization(&run)
	return run
}

// wait is the job's queueing delay: arrival to its last pod bound, or to the run's end.
func (r *churnRunner) wait(j *churnJob) float64 {
	if j.started.IsZero() {
		return r.end.Sub(j.created).Seconds()
	}
	return j.started.Sub(j.created).Seconds()
}

func (r *churnRunner) jobWait(j *churnJob) JobWait {
	w := JobWait{Name: j.Name, GPUs: j.gpus(), ArrivalSeconds: j.due.Seconds(), WaitSeconds: r.wait(j), Started: !j.started.IsZero()}
	if w.Started {
		w.Tier = r.cfg.tp.tierOf(j.nodes)
	}
	return w
}

// waits fills the queueing delays per class, the largest job's and the heroes', and the
// harness's creation lag.
func (r *churnRunner) waits(run *ChurnRun) {
	byClass, waiting := map[string][]float64{}, map[string]int{}
	var lags []float64
	var largest *churnJob
	for _, j := range r.jobs[:r.next] {
		w := r.wait(j)
		byClass[j.Class] = append(byClass[j.Class], w)
		if j.started.IsZero() {
			waiting[j.Class]++
		}
		run.MaxWaitSeconds = max(run.MaxWaitSeconds, w)
		lags = append(lags, j.created.Sub(r.start.Add(j.due)).Seconds())
		if j.Class == heroClass {
			run.Heroes = append(run.Heroes, r.jobWait(j))
		} else if largest == nil || j.gpus() > largest.gpus() {
			largest = j
		}
	}
	for _, cl := range churnClasses {
		ws := byClass[cl]
		run.Waits = append(run.Waits, ClassWaits{Class: cl, Jobs: len(ws), Waiting: waiting[cl], P50: percentile(ws, 0.50), P99: percentile(ws, 0.99)})
	}
	if largest != nil {
		run.LargestJob = r.jobWait(largest)
	}
	run.CreationLagP99Seconds, run.CreationLagMaxSeconds = percentile(lags, 0.99), percentile(lags, 1)
}

// placement fills the tiers and leaves of the gangs that started, and the constraint checks.
func (r *churnRunner) placement(run *ChurnRun) {
	tp := r.cfg.tp
	leaves, minimum := 0, 0
	for _, j := range r.jobs {
		if j.Pods == 1 || j.started.IsZero() {
			continue
		}
		tier := tp.tierOf(j.nodes)
		run.Gangs++
		run.TierShares[tier-1]++
		leaves += tp.leafCount(j.nodes)
		minimum += minLeaves(tp, j.Job)
		switch {
		case tier <= j.Tier:
		case j.Mode == "hard":
			run.HardViolations++
		default:
			run.SoftAboveTier++
		}
	}
	if run.Gangs == 0 {
		return
	}
	for i := range run.TierShares {
		run.TierShares[i] /= float64(run.Gangs)
	}
	run.MeanLeaves, run.MeanMinLeaves = float64(leaves)/float64(run.Gangs), float64(minimum)/float64(run.Gangs)
}

// utilization fills the GPU-seconds of running jobs and of bound pods over the cluster's, in
// the arrival window and in the run.
func (r *churnRunner) utilization(run *ChurnRun) {
	windowEnd := r.start.Add(r.cfg.window)
	var used, usedWindow, alloc, allocWindow float64
	add := func(from, to time.Time, gpus int, total, window *float64) {
		*total += float64(gpus) * overlap(from, to, r.start, r.end)
		*window += float64(gpus) * overlap(from, to, r.start, windowEnd)
	}
	for _, j := range r.jobs {
		if j.started.IsZero() {
			continue
		}
		to := j.done
		if to.IsZero() {
			to = r.end
		}
		add(j.started, to, j.gpus(), &used, &usedWindow)
		for _, at := range j.podBound {
			add(at, to, j.GPUs, &alloc, &allocWindow)
		}
	}
	for _, j := range r.waiting {
		for _, st := range r.tr.snapshot(j.names) {
			if st.node != "" {
				add(st.boundAt, r.end, j.GPUs, &alloc, &allocWindow)
			}
		}
	}
	gpus := float64(r.cfg.tp.Nodes * nodeGPUs)
	runSeconds, windowSeconds := gpus*r.end.Sub(r.start).Seconds(), gpus*r.cfg.window.Seconds()
	run.UtilWindow, run.UtilRun = usedWindow/windowSeconds, used/runSeconds
	run.AllocatedUtilWindow, run.AllocatedUtilRun = allocWindow/windowSeconds, alloc/runSeconds
}

// overlap is the length in seconds of [from, to] inside [lo, hi].
func overlap(from, to, lo, hi time.Time) float64 {
	if from.Before(lo) {
		from = lo
	}
	if to.After(hi) {
		to = hi
	}
	return max(0, to.Sub(from).Seconds())
}

// percentile is the nearest-rank p-quantile of vals (0 when empty).
func percentile(vals []float64, p float64) float64 {
	if len(vals) == 0 {
		return 0
	}
	s := append([]float64(nil), vals...)
	sort.Float64s(s)
	return s[max(0, int(math.Ceil(p*float64(len(s))))-1)]
}

// churnTargets computes issue #40's checks from the runs of ours with and without holds.
func churnTargets(trace ChurnTrace, holdWait int64, runs []ChurnRun) ChurnTargets {
	var holds, noHolds ChurnRun
	for _, r := range runs {
		switch r.Kind {
		case OursHolds:
			holds = r
		case OursNoHolds:
			noHolds = r
		}
	}
	tg := ChurnTargets{
		MaxWaitHoldsSeconds: holds.MaxWaitSeconds,
		MaxWaitBoundSeconds: trace.LongestSeconds + float64(holdWait),
		UtilDeltaPoints:     100 * (holds.UtilWindow - noHolds.UtilWindow),
		HardWithinTier:      holds.HardViolations == 0 && noHolds.HardViolations == 0,
	}
	tg.MaxWaitMet = tg.MaxWaitHoldsSeconds <= tg.MaxWaitBoundSeconds
	tg.UtilMet = tg.UtilDeltaPoints >= -5
	return tg
}

// Issue #40: the churn trace on vanilla, ours without holds and ours with holds, one run each.
func TestChurn(t *testing.T) {
	cfg := churnSetup()
	trace, desc := churnTrace(cfg)
	t.Logf("churn trace: %d jobs (%d plain, %d hard tier 1, %d hard tier 2, %d soft; %v), %d pods, %.0f jobs/s, offered load %.3f, longest run %.0f s",
		desc.Jobs, desc.PlainJobs, desc.HardTier1, desc.HardTier2, desc.Soft, desc.ByClass, desc.Pods, desc.JobsPerSecond, desc.OfferedLoad, desc.LongestSeconds)
	c := newClients(t)
	cfg.tp.create(t, c)
	res := &ChurnResult{Topology: cfg.tp, Trace: desc, HoldWaitSeconds: churnHoldWaitSeconds(), CapSeconds: cfg.capAfter.Seconds()}
	for _, k := range []Kind{Vanilla, OursNoHolds, OursHolds} {
		r := runChurn(t, c, cfg, trace, k)
		t.Logf("churn %s: %s in %.0f s, util %.1f%% (window) %.1f%% (run), max wait %.1f s, heroes %+v, partial gangs %d, hard violations %d, waiting %d, running %d, CPU %.1f s",
			k, r.Ended, r.WallSeconds, 100*r.UtilWindow, 100*r.UtilRun, r.MaxWaitSeconds, r.Heroes, r.PartialGangs, r.HardViolations, r.Waiting, r.Running, r.CPUSeconds)
		res.Runs = append(res.Runs, r)
	}
	res.Targets = churnTargets(desc, res.HoldWaitSeconds, res.Runs)
	results.Churn = res

	for _, r := range res.Runs {
		if !r.Kind.ours() {
			continue
		}
		// Gang binds all or nothing and the planner keeps hard gangs in their tier, whatever
		// the timing.
		if r.PartialGangs != 0 {
			t.Errorf("%s: %d gangs partly bound at the end", r.Kind, r.PartialGangs)
		}
		if r.HardViolations != 0 {
			t.Errorf("%s: %d hard gangs above their tier", r.Kind, r.HardViolations)
		}
		// On the short trace every job must have run before the run ended (the heroes once
		// the arrivals stop, at the latest); full mode only records.
		if !full() && r.Waiting != 0 {
			t.Errorf("%s: %d jobs never ran (run ended: %s after %.0f s)", r.Kind, r.Waiting, r.Ended, r.WallSeconds)
		}
	}
}
