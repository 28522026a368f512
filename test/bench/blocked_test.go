package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// BlockedResult is scenario 5: plain pods scheduled next to a gang that cannot be placed.
type BlockedResult struct {
	Topology  Topology         `json:"topology"`
	PlainPods int              `json:"plainPods"`
	Variants  []BlockedVariant `json:"variants"`
}

// BlockedVariant is one kind of blocked gang (or none), medians over the runs.
type BlockedVariant struct {
	Name string `json:"name"`
	// GangPods are the blocked gang's members (0: the baseline without a gang).
	GangPods int `json:"gangPods"`
	// PodsPerSecond: plain pods bound per second over both waves; Ratio to the baseline's.
	PodsPerSecond float64 `json:"podsPerSecond"`
	Ratio         float64 `json:"ratio"`
	// PlansPerMinute: plans made for the blocked gang; CyclesPerMinute: failed scheduling
	// cycles of its members (kube-scheduler's "Unable to schedule pod" lines); both while
	// the plain pods are scheduled (after each member's first attempt at start).
	PlansPerMinute  float64   `json:"plansPerMinute"`
	CyclesPerMinute float64   `json:"cyclesPerMinute"`
	CPUSeconds      float64   `json:"cpuSeconds"`
	Runs            []float64 `json:"runsPodsPerSecond"`
}

// Scenario 5: plain pods (2 GPUs, no PodGroup) arrive in two waves, the first deleted while
// the second is created (churn), while a gang that cannot be placed is pending: a hard tier-1
// gang larger than any leaf, or a gang with one member whose node selector matches no node.
// The plain pods' throughput is compared with the same run without the gang (our scheduler
// in both): a pending gang must cost nothing until something that can change its answer
// happens.
func TestBlockedGangs(t *testing.T) {
	tp := Topology{Name: "bl", Nodes: 256, LeafSize: 32, LeavesPerSpine: 4}
	wave, impossible, withBlocker := 300, 200, 32
	if full() {
		tp.Nodes, tp.LeavesPerSpine = 5000, 16
		wave, impossible, withBlocker = 2000, 1000, 64
	}
	c := newClients(t)
	tp.create(t, c)
	res := &BlockedResult{Topology: tp, PlainPods: 2 * wave}
	variants := []struct {
		name string
		size int
		// blocker: the last member's node selector matches no node; otherwise the gang is
		// hard at tier 1 and larger than a leaf (a leaf holds LeafSize*4 pods of 2 GPUs).
		blocker bool
	}{{name: "none"}, {name: "impossible hard tier-1 gang", size: impossible}, {name: "gang with a never-fitting member", size: withBlocker, blocker: true}}
	// Runs alternate between the variants (none, impossible, blocker, none, ...) so that a
	// machine that slows down during the run weighs on every variant alike.
	type series struct{ runs, plans, cycles, cpu []float64 }
	all := make([]series, len(variants))
	for rep := range repeats() {
		for vi, v := range variants {
			r := runBlocked(t, c, fmt.Sprintf("blocked-%d-%d", vi, rep), wave, v.size, v.blocker)
			t.Logf("blocked (%s) run %d: %.0f plain pods/s, %.1f plans/min, %.1f failed gang cycles/min, CPU %.1fs", v.name, rep, r.podsPerSecond, r.plansPerMinute, r.cyclesPerMinute, r.cpuSeconds)
			s := &all[vi]
			s.runs, s.plans, s.cycles, s.cpu = append(s.runs, r.podsPerSecond), append(s.plans, r.plansPerMinute), append(s.cycles, r.cyclesPerMinute), append(s.cpu, r.cpuSeconds)
		}
	}
	for vi, v := range variants {
		s := all[vi]
		res.Variants = append(res.Variants, BlockedVariant{Name: v.name, GangPods: v.size, Runs: s.runs,
			PodsPerSecond: median(s.runs), PlansPerMinute: median(s.plans), CyclesPerMinute: median(s.cycles), CPUSeconds: median(s.cpu)})
	}
	for i := range res.Variants {
		res.Variants[i].Ratio = res.Variants[i].PodsPerSecond / res.Variants[0].PodsPerSecond
	}
	results.Blocked = res
}

type blockedRun struct {
	podsPerSecond, plansPerMinute, cyclesPerMinute, cpuSeconds float64
}

// runBlocked creates the blocked gang (gangSize 0: none), starts our scheduler, then the two
// waves of plain pods, and measures them.
func runBlocked(t *testing.T, c clients, name string, wave, gangSize int, blocker bool) blockedRun {
	t.Helper()
	ctx := context.Background()
	ns, err := util.CreateNamespace(ctx, c.kube, name)
	if err != nil {
		t.Fatal(err)
	}
	var gangNames []string
	if gangSize > 0 {
		annotations := map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`}
		if blocker {
			annotations[podgroup.NetworkTopologyAnnotation] = `{"mode":"hard","highestTierAllowed":2}`
		}
		if err := util.CreatePodGroup(ctx, c.scheduling, util.PodGroup(ns, "blocked", int32(gangSize), annotations)); err != nil {
			t.Fatal(err)
		}
		var gang []*v1.Pod
		for i := range gangSize {
			p := gpuPod(ns, fmt.Sprintf("blocked-%04d", i), OursBinPack.schedulerName(), 2, "blocked")
			if blocker && i == gangSize-1 {
				p.Spec.NodeSelector = map[string]string{"example.com/no-such-node": "true"}
			}
			gang = append(gang, p)
			gangNames = append(gangNames, p.Name)
		}
		if err := parallel(len(gang), func(i int) error { _, err := util.CreatePods(ctx, c.kube, gang[i]); return err }); err != nil {
			t.Fatal(err)
		}
	}
	tr := newTracker(t, c, ns)
	defer tr.cancel()
	sched := startScheduler(t, OursBinPack, name)
	waitReady(t, c, ns, tr, sched, "probe")

	makeWave := func(w int) ([]*v1.Pod, []string) {
		var pods []*v1.Pod
		var names []string
		for i := range wave {
			p := gpuPod(ns, fmt.Sprintf("plain-%d-%05d", w, i), OursBinPack.schedulerName(), 2, "")
			pods, names = append(pods, p), append(names, p.Name)
		}
		return pods, names
	}
	first, firstNames := makeWave(1)
	second, secondNames := makeWave(2)
	timeout := 5 * time.Minute
	if full() {
		timeout = 20 * time.Minute
	}
	// Only what happens under load counts: every member is tried once when the scheduler
	// starts, which no scheduler can avoid; the load starts when each has been refused.
	if err := tr.poll(50*time.Millisecond, 5*time.Minute, func() (bool, error) {
		for _, st := range tr.snapshot(gangNames) {
			if st.unschedulable == "" {
				return false, sched.alive()
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("%s: the gang's members were not all refused: %v (log %s)", name, err, sched.logPath)
	}
	logOffset := fileSize(sched.logPath)
	start := time.Now()
	if err := parallel(len(first), func(i int) error { _, err := util.CreatePods(ctx, c.kube, first[i]); return err }); err != nil {
		t.Fatal(err)
	}
	if err := tr.waitBound(firstNames, timeout, sched.alive); err != nil {
		t.Fatalf("%s: first wave: %v (log %s)", name, err, sched.logPath)
	}
	// Churn: the first wave goes while the second arrives.
	errs := make(chan error, 1)
	go func() { errs <- deletePodsNamed(ctx, c, ns, firstNames) }()
	if err := parallel(len(second), func(i int) error { _, err := util.CreatePods(ctx, c.kube, second[i]); return err }); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if err := tr.waitBound(secondNames, timeout, sched.alive); err != nil {
		t.Fatalf("%s: second wave: %v (log %s)", name, err, sched.logPath)
	}
	elapsed := time.Since(start)
	stats, err := sched.stats()
	if err != nil {
		t.Fatal(err)
	}
	sched.stop(t)
	for n, s := range tr.snapshot(gangNames) {
		if s.node != "" {
			t.Errorf("%s: blocked gang member %s bound to %s", name, n, s.node)
		}
	}
	counts, err := countLogLines(sched.logPath, logOffset, ns+"/blocked-", `"Gang planned"`, `"Gang cannot be planned"`, `"Unable to schedule pod`)
	if err != nil {
		t.Fatal(err)
	}
	minutes := elapsed.Minutes()
	r := blockedRun{
		podsPerSecond:   float64(2*wave) / elapsed.Seconds(),
		plansPerMinute:  float64(counts[`"Gang planned"`]+counts[`"Gang cannot be planned"`]) / minutes,
		cyclesPerMinute: float64(counts[`"Unable to schedule pod`]) / minutes,
		cpuSeconds:      stats.CPUSeconds,
	}
	if err := deletePods(ctx, c, ns); err != nil {
		t.Fatal(err)
	}
	return r
}

// countLogLines counts, per marker, the log lines after offset that contain it and mention
// (a pod or PodGroup name starting with) about.
func countLogLines(path string, offset int64, about string, markers ...string) (map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, err
	}
	groupAbout := strings.TrimSuffix(about, "-")
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, about) && !strings.Contains(line, `podGroup="`+groupAbout+`"`) {
			continue
		}
		for _, m := range markers {
			if strings.Contains(line, m) {
				out[m]++
			}
		}
	}
	return out, sc.Err()
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}
