package bench

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/localcluster"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// Issue #45's fault run (TestFaults): the churn trace's job stream (churn_test.go; its
// generator, its runner) on a local cluster of real binaries (pkg/localcluster: etcd,
// kube-apiserver, kube-controller-manager, kwok simulating every node and pod,
// hypernode-controller discovering the tree from node labels, and two hypernode-scheduler
// replicas under leader election, with manifests/scheduler/config.yaml as shipped), while the
// faults of faults_inject_test.go are injected on a seeded schedule, and a watcher
// (faults_watch_test.go) checks the invariants all the time. The same trace then runs without
// faults (the baseline: extra queueing delay is against it), each run on a fresh cluster.
//
// What the run changes in the trace: 5% of the gangs (seeded) are of high priority, so that
// preemption happens (and is interrupted); a run ends when every job has started, not when
// every job has finished (faults stop when the arrival window ends; the queue then drains).
//
// Full (-bench.full, `make bench-faults`): 1,024 nodes (64 leaves of 16, 4 spines), 1 s = 20
// trace minutes (the longest run 465 s), a 22-minute arrival window (faults from its first
// minute to its end: a leader killed about every 110 s, 11 in all, ...), a 52-minute cap: the
// heroes that arrive late wait for a spine to drain after the window. Short (`make test`): 64 nodes, a 60-second
// window, a leader killed every 20 s, no gang of high priority, and no baseline run.

// OursShipped is manifests/scheduler/config.yaml as shipped, run by pkg/localcluster.
const OursShipped Kind = "ours-shipped"

var (
	flagFaultWindow   = flag.Duration("bench.faults.window", 0, "the fault run's arrival window in full mode (default 22m; the cap is 30m more)")
	flagFaultBaseline = flag.Bool("bench.faults.baseline", true, "in full mode, run the trace without faults too, after the fault run (the extra queueing delay is against it)")
	flagFaultOnlyBase = flag.Bool("bench.faults.baseline-only", false, "in full mode, run only the trace without faults (to check an invariant the baseline broke)")
)

// faultConfig is the fault run's cluster, clocks and fault periods.
type faultConfig struct {
	churn       churnConfig
	seed        uint64
	from        time.Duration // faults start
	every       map[string]time.Duration
	nodeDownFor time.Duration
	highShare   float64 // of the gangs, of high priority
}

func faultSetup() faultConfig {
	if full() {
		cfg := faultConfig{
			churn: churnConfig{tp: Topology{Name: "faults", Nodes: 1024, LeafSize: 16, LeavesPerSpine: 16},
				scale: 20, window: 22 * time.Minute, capAfter: 52 * time.Minute},
			seed: 45, from: time.Minute, nodeDownFor: time.Minute, highShare: 0.05,
			every: map[string]time.Duration{faultLeaderKill: 110 * time.Second, faultAPIServer: 6 * time.Minute, faultNodeFailure: 3 * time.Minute,
				faultRewire: 5 * time.Minute, faultRecreate: 5 * time.Minute, faultControllerKill: 7 * time.Minute},
		}
		if *flagFaultWindow > 0 {
			cfg.churn.window, cfg.churn.capAfter = *flagFaultWindow, *flagFaultWindow+30*time.Minute
		}
		return cfg
	}
	return faultConfig{
		churn: churnConfig{tp: Topology{Name: "faults", Nodes: 64, LeafSize: 8, LeavesPerSpine: 4},
			scale: 300, window: time.Minute, capAfter: 4 * time.Minute},
		seed: 45, from: 5 * time.Second, nodeDownFor: 10 * time.Second, highShare: 0.05,
		every: map[string]time.Duration{faultLeaderKill: 20 * time.Second, faultAPIServer: 50 * time.Second, faultNodeFailure: 25 * time.Second,
			faultRewire: 30 * time.Second, faultRecreate: 35 * time.Second, faultControllerKill: 45 * time.Second},
	}
}

// FaultRun is one run of the trace on a fresh local cluster.
type FaultRun struct {
	Name   string         `json:"name"` // "no faults" or "faults"
	Churn  ChurnRun       `json:"churn"`
	Faults []Fault        `json:"faults"`
	ByKind map[string]int `json:"byKind"`
	Checks FaultChecks    `json:"checks"`
	// Failover: a leader's SIGKILL to the next Lease holder, and to the next bind after it.
	FailoverAcquireMedian float64 `json:"failoverAcquireMedianSeconds"`
	FailoverBindMedian    float64 `json:"failoverBindMedianSeconds"`
	FailoverBindMax       float64 `json:"failoverBindMaxSeconds"`
	// SchedulerSelfExits: scheduler processes that exited without being killed (target 0).
	SchedulerSelfExits []string `json:"schedulerSelfExits"`
	// JobsRestarted: jobs that lost pods to a node failure and were submitted again.
	JobsRestarted int     `json:"jobsRestarted"`
	MeanWait      float64 `json:"meanWaitSeconds"`
	P99Wait       float64 `json:"p99WaitSeconds"`
}

// FaultResult is issue #45's scenario.
type FaultResult struct {
	Topology    Topology   `json:"topology"`
	Trace       ChurnTrace `json:"trace"`
	HighGangs   int        `json:"highPriorityGangs"`
	Runs        []FaultRun `json:"runs"`
	ExtraMean   float64    `json:"extraMeanWaitSeconds"`
	ExtraP99    float64    `json:"extraP99WaitSeconds"`
	LeaderKills int        `json:"leaderKills"`
}

// faultTrace is the churn trace with a seeded share of the gangs at high priority.
func faultTrace(cfg faultConfig) ([]Job, ChurnTrace, int) {
	trace, desc := churnTrace(cfg.churn)
	rng := rand.New(rand.NewPCG(cfg.seed, 1))
	high := 0
	for i := range trace {
		if trace[i].Mode != "" && trace[i].Class != heroClass && rng.Float64() < cfg.highShare {
			trace[i].PriorityClass = benchHighPriority
			high++
		}
	}
	return trace, desc, high
}

// Issue #45: the churn trace without and with faults, on a local cluster of real binaries.
func TestFaults(t *testing.T) {
	cfg := faultSetup()
	trace, desc, high := faultTrace(cfg)
	schedule := faultSchedule(cfg.seed, cfg.from, cfg.churn.window, cfg.every)
	t.Logf("fault run: %d jobs (%d pods, %d gangs of high priority) over %v on %d nodes; %d faults", desc.Jobs, desc.Pods, high, cfg.churn.window, cfg.churn.tp.Nodes, len(schedule))
	res := &FaultResult{Topology: cfg.churn.tp, Trace: desc, HighGangs: high}
	// The fault run first: its numbers are in the log even if the baseline is cut short.
	runs := [][]Fault{schedule, nil}
	baselineOnly := *flagFaultOnlyBase
	if baselineOnly && (!full() || !*flagFaultBaseline) {
		t.Fatal("-bench.faults.baseline-only runs the baseline of a full run: it needs -bench.full, and contradicts -bench.faults.baseline=false")
	}
	switch {
	case baselineOnly:
		runs = runs[1:]
	case !full() || !*flagFaultBaseline:
		runs = runs[:1] // the short run checks the invariants; the baseline only compares
	}
	for _, faults := range runs {
		run := runFaults(t, cfg, trace, faults)
		t.Logf("%s: %s in %.0f s; violations %d, explained %d, longest partial gang %.1f s (%s), evictions %d (wasted %d), holds %d, failover to next bind median %.1f s max %.1f s, self exits %v, restarted jobs %d",
			run.Name, run.Churn.Ended, run.Churn.WallSeconds, len(run.Checks.Violations), len(run.Checks.Explained), run.Checks.LongestPartialSecs, run.Checks.LongestPartialGang,
			run.Checks.Evictions, run.Checks.WastedEvictions, run.Checks.HoldsSeen, run.FailoverBindMedian, run.FailoverBindMax, run.SchedulerSelfExits, run.JobsRestarted)
		for _, v := range run.Checks.Violations {
			t.Errorf("%s: violation: %s", run.Name, v)
		}
		for _, e := range run.Checks.Explained {
			t.Logf("%s: explained by a fault: %s", run.Name, e)
		}
		if len(run.SchedulerSelfExits) != 0 {
			t.Errorf("%s: schedulers exited on their own: %v", run.Name, run.SchedulerSelfExits)
		}
		if run.Churn.Ended != "every job started" {
			t.Errorf("%s: ended %q with %d jobs waiting", run.Name, run.Churn.Ended, run.Churn.Waiting)
		}
		for _, f := range run.Faults {
			if f.Error != "" {
				t.Errorf("%s: injecting %s at %.0fs failed: %s", run.Name, f.Kind, f.AtSeconds, f.Error)
			}
		}
		res.Runs = append(res.Runs, run)
	}
	if baselineOnly {
		results.Faults = res
		return
	}
	faulty := res.Runs[0]
	if len(res.Runs) == 2 {
		res.ExtraMean = faulty.MeanWait - res.Runs[1].MeanWait
		res.ExtraP99 = faulty.P99Wait - res.Runs[1].P99Wait
	}
	res.LeaderKills = faulty.ByKind[faultLeaderKill]
	results.Faults = res
	// Every kind was injected (the schedule has each at least once).
	for _, kind := range faultKinds {
		if faulty.ByKind[kind] == 0 {
			t.Errorf("no %s was injected", kind)
		}
	}
}

// runFaults runs the trace on a fresh local cluster, injecting the faults.
func runFaults(t *testing.T, cfg faultConfig, trace []Job, faults []Fault) FaultRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	name := "no faults"
	if faults != nil {
		name = "faults"
	}
	cl, c := startFaultCluster(t, cfg.churn.tp, strings.ReplaceAll(name, " ", "-"))
	ns, err := util.CreateNamespace(ctx, c.kube, "faults")
	if err != nil {
		t.Fatal(err)
	}
	tr := newTracker(t, c, ns)
	defer tr.cancel()
	w := newFaultWatcher(t, c, ns, faultLabels[2], faultLabels[1])
	in := &injector{t: t, cl: cl, c: c, tp: cfg.churn.tp, ns: ns, w: w, start: time.Now(), downFor: cfg.nodeDownFor,
		lost: make(chan []string, 64), killed: map[*localcluster.Process]bool{}}
	r := newChurnRunner(c, cfg.churn, trace, OursShipped, ns, tr, cl.CheckControlPlane)
	fr := &faultRunner{churnRunner: r, w: w, owner: map[string]*churnJob{}}
	r.create, r.remove, r.untilStarted = fr.create, fr.remove, true
	in.start = r.start
	injecting, stopInjecting := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		in.run(injecting, faults)
	}()
	err = tr.poll(10*time.Millisecond, cfg.churn.capAfter+time.Minute, func() (bool, error) {
		for {
			select {
			case lost := <-in.lost:
				if err := fr.restart(lost); err != nil {
					return false, err
				}
				continue
			default:
			}
			break
		}
		return r.step()
	})
	stopInjecting()
	<-done
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	r.end = time.Now()
	run := FaultRun{Name: name, Churn: r.result(), Faults: in.faults, ByKind: map[string]int{}, Checks: w.finish(),
		SchedulerSelfExits: in.selfExits, JobsRestarted: fr.restarts}
	for _, f := range in.faults {
		run.ByKind[f.Kind]++
	}
	var acquired, bound []float64
	for _, f := range in.faults {
		if f.Kind != faultLeaderKill || f.Error != "" {
			continue
		}
		if a, b, ok := w.failover(f.at); ok {
			acquired, bound = append(acquired, a.Seconds()), append(bound, b.Seconds())
		}
	}
	run.FailoverAcquireMedian, run.FailoverBindMedian, run.FailoverBindMax = percentile(acquired, 0.5), percentile(bound, 0.5), percentile(bound, 1)
	var waits []float64
	sum := 0.0
	for _, j := range r.jobs[:r.next] {
		waits = append(waits, r.wait(j))
		sum += r.wait(j)
	}
	if len(waits) > 0 {
		run.MeanWait, run.P99Wait = sum/float64(len(waits)), percentile(waits, 0.99)
	}
	cl.Stop()
	return run
}

// startFaultCluster starts a local cluster with the topology's nodes (kwok), their tree
// discovered by hypernode-controller from node labels, and a second scheduler replica.
func startFaultCluster(t *testing.T, tp Topology, name string) (*localcluster.Cluster, clients) {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(outDir(t), "faults", name)
	// A run's etcd data from an earlier run in the same output directory would be reused.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cl, err := localcluster.Start(ctx, localcluster.Options{RepoRoot: util.RepoRoot(), Dir: dir, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	cs, err := util.NewClients(cl.Admin)
	if err != nil {
		t.Fatal(err)
	}
	c := clients{kube: cs.Kube, topology: cs.Topology, scheduling: cs.Scheduling}
	createPriorityClasses(t, c)
	nodes := make([]*v1.Node, tp.Nodes)
	for i := range nodes {
		nodes[i] = localcluster.SimulatedNode(tp.nodeName(i), faultNodeLabels(tp, tp.leafOf(i)), v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("64"), v1.ResourceMemory: resource.MustParse("512Gi"),
			v1.ResourcePods: resource.MustParse("110"), GPU: resource.MustParse(fmt.Sprint(nodeGPUs))})
	}
	if err := cl.AddNodes(ctx, nodes...); err != nil {
		t.Fatal(err)
	}
	if err := cl.StartController(ctx); err != nil {
		t.Fatal(err)
	}
	if err := discoverFromLabels(ctx, c, tp); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.StartSchedulerReplica(ctx); err != nil {
		t.Fatal(err)
	}
	return cl, c
}

// discoverFromLabels turns on the controller's label source for faultLabels and waits for
// the whole tree.
func discoverFromLabels(ctx context.Context, c clients, tp Topology) error {
	conf := "networkTopologyDiscovery:\n- source: label\n  enabled: true\n  config:\n    networkTopologyTypes:\n      bench:\n"
	for _, l := range faultLabels {
		conf += "      - nodeLabel: " + l + "\n"
	}
	cms := c.kube.CoreV1().ConfigMaps(localcluster.SchedulerNamespace)
	cm, err := cms.Get(ctx, localcluster.ControllerConfigMap, metav1.GetOptions{})
	if err != nil {
		return err
	}
	cm.Data["hypernode-controller.conf"] = conf
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return err
	}
	want := tp.leaves() + tp.spines() + 1
	var got int
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.topology.TopologyV1alpha1().HyperNodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		got = len(list.Items)
		return got == want, nil
	})
	if err != nil {
		return fmt.Errorf("the controller discovered %d HyperNodes, want %d: %w", got, want, err)
	}
	return nil
}

// testLog writes the local cluster's steps to the test log.
type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// faultRunner is the churn runner's job stream with what faults need: creation and deletion
// retried while the apiserver restarts (and idempotent: a create whose answer was lost may have
// happened), the watcher told, and the jobs that lost pods to a node failure submitted again.
type faultRunner struct {
	*churnRunner
	w        *faultWatcher
	owner    map[string]*churnJob // pod name to its job
	restarts int
}

func (fr *faultRunner) create(ctx context.Context, c clients, ns string, job Job, k Kind) ([]string, error) {
	fr.w.expectGang(job)
	var names []string
	err := retryAPI(ctx, func() error {
		var err error
		names, err = recreateJobObjects(ctx, c, ns, job, k)
		return err
	})
	return names, err
}

// remove deletes the job's pods and PodGroup; those gone already (a node failure's) are fine.
func (fr *faultRunner) remove(ctx context.Context, c clients, ns string, job Job, names []string, k Kind) error {
	fr.w.ignoreGang(job.Name)
	err := parallel(len(names), func(i int) error {
		return retryAPI(ctx, func() error {
			return ignoreNotFound(c.kube.CoreV1().Pods(ns).Delete(ctx, names[i], metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
		})
	})
	if err != nil || job.Mode == "" {
		return err
	}
	return retryAPI(ctx, func() error {
		return ignoreNotFound(c.scheduling.SchedulingV1alpha1().PodGroups(ns).Delete(ctx, job.Name, metav1.DeleteOptions{}))
	})
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// restart submits again, under a new name, every job that lost one of these pods.
func (fr *faultRunner) restart(lost []string) error {
	for _, j := range fr.jobs[:fr.next] {
		for _, n := range j.names {
			fr.owner[n] = j
		}
	}
	hit := map[*churnJob]bool{}
	for _, name := range lost {
		if j := fr.owner[name]; j != nil && j.done.IsZero() {
			hit[j] = true
		}
	}
	jobs := make([]*churnJob, 0, len(hit))
	for j := range hit {
		jobs = append(jobs, j)
	}
	sort.Slice(jobs, func(a, b int) bool { return jobs[a].Name < jobs[b].Name })
	for _, j := range jobs {
		fr.running = removeJob(fr.running, j)
		fr.waiting = removeJob(fr.waiting, j)
		if err := fr.remove(context.Background(), fr.c, fr.ns, j.Job, j.names, fr.k); err != nil {
			return err
		}
		fr.restarts++
		base, _, _ := strings.Cut(j.Name, "-r")
		j.Name = fmt.Sprintf("%s-r%d", base, fr.restarts)
		j.created, j.started, j.podBound, j.nodes = time.Now(), time.Time{}, nil, nil
		names, err := fr.create(context.Background(), fr.c, fr.ns, j.Job, fr.k)
		if err != nil {
			return err
		}
		j.names = names
		fr.waiting = append(fr.waiting, j)
	}
	return nil
}

func removeJob(jobs []*churnJob, j *churnJob) []*churnJob {
	out := jobs[:0]
	for _, x := range jobs {
		if x != j {
			out = append(out, x)
		}
	}
	return out
}
