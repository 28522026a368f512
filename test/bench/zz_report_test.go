package bench

// This file's name puts TestReport after every scenario (go test runs tests in file order).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Results is everything one harness run measured; results.json holds it.
type Results struct {
	Mode    string    `json:"mode"` // short or full
	Started time.Time `json:"started"`
	Machine Machine   `json:"machine"`
	Command string    `json:"command"`
	// OursProfile is BENCH_OURS_PROFILE when set: ours did not run its full profile.
	OursProfile string `json:"oursProfile,omitempty"`
	// ClientRate is BENCH_CLIENT_RATE when set: both ran at that client rate, not the shipped one.
	ClientRate string            `json:"clientRate,omitempty"`
	Throughput *ThroughputResult `json:"throughput,omitempty"`
	BigGang    *BigGangResult    `json:"bigGang,omitempty"`
	// BigGangStages is the big gang in sub-groups (TestBigGangStages).
	BigGangStages *BigGangResult    `json:"bigGangStages,omitempty"`
	Quality       *QualityResult    `json:"quality,omitempty"`
	Exhaustive    *ExhaustiveResult `json:"exhaustive,omitempty"`
	Blocked       *BlockedResult    `json:"blocked,omitempty"`
	Preemption    *PreemptionResult `json:"preemption,omitempty"`
	Plain         *LoadResult       `json:"plainPods,omitempty"`
	Mixed         *LoadResult       `json:"mixedLoad,omitempty"`
	Restart       *LoadResult       `json:"restartBacklog,omitempty"`
	Churn         *ChurnResult      `json:"churn,omitempty"`
	Faults        *FaultResult      `json:"faults,omitempty"`
	// Plan is kubectl hypernode plan's read and plans (TestPlanCommand).
	Plan *PlanResult `json:"plan,omitempty"`
	// NativeGang is one gang as a native pod group (TestNativeGang).
	NativeGang *NativeGangResult `json:"nativeGang,omitempty"`
}

// Machine describes where the numbers were taken.
type Machine struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	MemoryGiB int    `json:"memoryGiB"`
	Kernel    string `json:"kernel"`
	Go        string `json:"go"`
}

var results = &Results{Started: time.Now()}

var (
	outOnce sync.Once
	outPath string
)

// outDir is -bench.out, or a temporary directory that outlives the run (its path is logged).
func outDir(t testing.TB) string {
	outOnce.Do(func() {
		outPath = *flagOut
		if outPath == "" {
			dir, err := os.MkdirTemp("", "hypernode-bench")
			if err != nil {
				t.Fatal(err)
			}
			outPath = dir
		}
		if err := os.MkdirAll(outPath, 0o755); err != nil {
			t.Fatal(err)
		}
	})
	return outPath
}

func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int
		if _, err := fmt.Sscanf(string(data), "MemTotal: %d kB", &kb); err == nil {
			m.MemoryGiB = (kb + 1<<19) >> 20
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	return m
}

// TestReport writes results.json and summary.md and reads the JSON back.
func TestReport(t *testing.T) {
	results.Mode = "short"
	if full() {
		results.Mode = "full"
	}
	results.Machine = machine()
	results.Command = strings.Join(os.Args, " ")
	results.OursProfile = os.Getenv(oursProfileEnv)
	results.ClientRate = os.Getenv(clientRateEnv)
	dir := outDir(t)
	data, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	jsonPath := filepath.Join(dir, "results.json")
	if err := os.WriteFile(jsonPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	summary := summaryTable(results)
	if err := os.WriteFile(filepath.Join(dir, "summary.md"), []byte(summary), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("results in %s\n%s", dir, summary)

	// The file must parse back into the same structure, with every scenario that ran.
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var back Results
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatalf("results.json does not parse: %v", err)
	}
	if (back.Throughput != nil) != (results.Throughput != nil) || (back.BigGang != nil) != (results.BigGang != nil) ||
		(back.Quality != nil) != (results.Quality != nil) || (back.Exhaustive != nil) != (results.Exhaustive != nil) ||
		(back.Blocked != nil) != (results.Blocked != nil) || (back.Plain != nil) != (results.Plain != nil) ||
		(back.Preemption != nil) != (results.Preemption != nil) || (back.BigGangStages != nil) != (results.BigGangStages != nil) ||
		(back.Mixed != nil) != (results.Mixed != nil) || (back.Restart != nil) != (results.Restart != nil) ||
		(back.Churn != nil) != (results.Churn != nil) || (back.Plan != nil) != (results.Plan != nil) ||
		(back.NativeGang != nil) != (results.NativeGang != nil) || (back.Faults != nil) != (results.Faults != nil) {
		t.Errorf("results.json lost a scenario")
	}
	for _, lr := range []*LoadResult{back.Plain, back.Mixed, back.Restart} {
		if lr == nil {
			continue
		}
		for _, m := range lr.Modes {
			if len(m.Runs) != 2*repeats() {
				t.Errorf("results.json has %d %s runs in a scenario of %d pods, want %d", len(m.Runs), m.Mode, lr.Pods, 2*repeats())
			}
			if len(m.PairRatios) != repeats() {
				t.Errorf("results.json has %d %s pair ratios in a scenario of %d pods, want %d", len(m.PairRatios), m.Mode, lr.Pods, repeats())
			}
			for _, r := range m.Runs {
				// Every pod is bound (runGangs waits for it), at most a node's GPUs per node;
				// every load scenario's pods ask for 2 GPUs.
				if minNodes := (r.Pods*2 + nodeGPUs - 1) / nodeGPUs; r.NodesUsed < minNodes || r.NodesUsed > r.Pods || r.FullNodes > r.NodesUsed {
					t.Errorf("%s %s run %d: %d nodes used, %d full, for %d pods of 2 GPUs", m.Mode, r.Kind, r.Run, r.NodesUsed, r.FullNodes, r.Pods)
				}
			}
		}
	}
	if back.Throughput != nil && len(back.Throughput.Runs) != 2*repeats() {
		t.Errorf("results.json has %d throughput runs, want %d", len(back.Throughput.Runs), 2*repeats())
	}
	if back.Quality != nil && len(back.Quality.Replays) != 3 {
		t.Errorf("results.json has %d quality replays, want 3", len(back.Quality.Replays))
	}
	if back.Churn != nil && len(back.Churn.Runs) != 3 {
		t.Errorf("results.json has %d churn runs, want 3", len(back.Churn.Runs))
	}
}

// summaryTable renders the headline numbers as Markdown.
func summaryTable(r *Results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# hypernode-scheduler benchmark (%s, %s, %d cores, %d GiB, %s)\n\n", r.Mode, r.Machine.CPU, r.Machine.Cores, r.Machine.MemoryGiB, r.Machine.Go)
	if r.OursProfile != "" {
		fmt.Fprintf(&b, "Ours ran with %s=%s, not its full profile.\n\n", oursProfileEnv, r.OursProfile)
	}
	if r.ClientRate != "" {
		fmt.Fprintf(&b, "Both ran with %s=%s, not the shipped client rate.\n\n", clientRateEnv, r.ClientRate)
	}
	if tp := r.Throughput; tp != nil {
		fmt.Fprintf(&b, "## Throughput: %d pods (2 GPUs) in %d hard gangs on %d nodes; medians of %d runs each\n\n", tp.Pods, len(tp.Gangs), tp.Topology.Nodes, repeats())
		b.WriteString("| scheduler | pods/s | scheduler CPU s | peak RSS MiB | plans (max ms) | per run: pods/s |\n| --- | --- | --- | --- | --- | --- |\n")
		for _, k := range []Kind{OursBinPack, Vanilla} {
			var each []string
			plans, planMax := 0, 0.0
			for _, run := range tp.Runs {
				if run.Kind == k {
					each = append(each, fmt.Sprintf("%.0f", run.PodsPerSecond))
					plans, planMax = run.Plans, max(planMax, run.PlanMaxMs)
				}
			}
			pps, cpu, rss := tp.VanillaPodsPerSecond, tp.VanillaCPUSeconds, tp.VanillaPeakRSSMiB
			planCol := "-"
			if k.ours() {
				pps, cpu, rss = tp.OursPodsPerSecond, tp.OursCPUSeconds, tp.OursPeakRSSMiB
				planCol = fmt.Sprintf("%d (%.0f)", plans, planMax)
			}
			fmt.Fprintf(&b, "| %s | %.0f | %.1f | %.0f | %s | %s |\n", k, pps, cpu, rss, planCol, strings.Join(each, ", "))
		}
		fmt.Fprintf(&b, "\nratio ours / vanilla: **%.2f** (target >= 1.0)\n\n", tp.Ratio)
	}
	for _, bg := range []*BigGangResult{r.BigGang, r.BigGangStages} {
		if bg == nil {
			continue
		}
		stages := ""
		if bg.StageSize > 0 {
			stages = fmt.Sprintf(" in %d stages of %d (sub-groups hard at tier 1; vanilla: the same pods)", bg.Pods/bg.StageSize, bg.StageSize)
		}
		fmt.Fprintf(&b, "## Big gang: %d pods of 8 GPUs, hard tier %d%s, on %d nodes; medians of %d runs each\n\n", bg.Pods, bg.Tier, stages, bg.Topology.Nodes, repeats())
		b.WriteString("| scheduler | last created -> all bound s | plan ms | scheduler CPU s | peak RSS MiB | per run: last created -> all bound (first created -> all bound) s |\n| --- | --- | --- | --- | --- | --- |\n")
		for _, k := range []Kind{OursBinPack, Vanilla} {
			var each []string
			for _, run := range bg.Runs {
				if run.Kind == k {
					each = append(each, fmt.Sprintf("%.1f (%.1f)", run.AfterLastCreatedSeconds, run.Seconds))
				}
			}
			secs, cpu, rss, plan := bg.VanillaSeconds, bg.VanillaCPUSeconds, bg.VanillaPeakRSSMiB, "-"
			if k.ours() {
				secs, cpu, rss, plan = bg.OursSeconds, bg.OursCPUSeconds, bg.OursPeakRSSMiB, fmt.Sprintf("%.0f", bg.OursPlanMs)
			}
			fmt.Fprintf(&b, "| %s | %.1f | %s | %.1f | %.0f | %s |\n", k, secs, plan, cpu, rss, strings.Join(each, ", "))
		}
		fmt.Fprintf(&b, "\nratio ours / vanilla: **%.2f** (target <= 1.2)\n\n", bg.Ratio)
	}
	if ng := r.NativeGang; ng != nil {
		writeNativeGang(&b, ng)
	}
	if q := r.Quality; q != nil {
		fmt.Fprintf(&b, "## Placement quality: %d-job trace on %d nodes (leaves of %d, spines of %d leaves)\n\n", len(q.Trace), q.Topology.Nodes, q.Topology.LeafSize, q.Topology.LeavesPerSpine)
		b.WriteString("| scheduler | admitted | before 1st rejection | at lowest feasible tier | leaves / minimum | hard-tier violations | mean GPU util |\n| --- | --- | --- | --- | --- | --- | --- |\n")
		for _, rp := range q.Replays {
			fmt.Fprintf(&b, "| %s | %d/%d | %d | %.1f%% | %.2f | %d | %.1f%% |\n", rp.Kind, rp.Admitted, rp.Jobs, rp.AdmittedBeforeFirstRejection,
				100*rp.LowestTierShare, rp.MeanLeavesRatio, rp.HardViolations, 100*rp.MeanGPUUtil)
		}
		b.WriteString("\n")
	}
	if e := r.Exhaustive; e != nil {
		fmt.Fprintf(&b, "## Small instance (%d nodes, %d jobs) against exhaustive search (%d states)\n\n", e.Topology.Nodes, len(e.Jobs), e.SearchStates)
		b.WriteString("| scheduler | jobs before 1st refusal | optimum | gangs matching the per-gang optimum |\n| --- | --- | --- | --- |\n")
		for _, rp := range e.Replays {
			fmt.Fprintf(&b, "| %s | %d | %d | %d/%d |\n", rp.Kind, rp.AdmittedBeforeFirstRejection, e.OptimalAdmittedBeforeFirstRejection, rp.GangsMatched, len(rp.Gangs))
		}
		b.WriteString("\n")
	}
	if pr := r.Preemption; pr != nil {
		fmt.Fprintf(&b, "## Gang preemption: a %d-pod hard tier-2 gang (%d GPUs each; a variant may name another size) on %d nodes full of low-priority pods; medians of %d runs each\n\n", pr.GangPods, pr.GPUsPerPod, pr.Topology.Nodes, repeats())
		b.WriteString("| victims | scheduler | decision s | evictions s | last bind s | pods evicted | gangs hit | gangs broken | gang's tier | vanilla/ours time |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
		for _, v := range pr.Variants {
			for _, m := range []PreemptionRun{v.Ours, v.Vanilla} {
				ratio := ""
				if m.Kind.ours() {
					ratio = fmt.Sprintf("%.2f", v.Ratio)
				}
				fmt.Fprintf(&b, "| %s | %s | %.2f | %.2f | %.1f | %d | %d | %d | %d | %s |\n", v.Name, m.Kind, m.DecisionSeconds, m.EvictionSeconds, m.BoundSeconds, m.Evicted, m.GangsHit, m.GangsBroken, m.Tier, ratio)
			}
		}
		b.WriteString("\n")
	}
	if bl := r.Blocked; bl != nil {
		fmt.Fprintf(&b, "## Plain pods next to a blocked gang: %d plain pods in two waves (churn) on %d nodes; medians of %d runs each\n\n", bl.PlainPods, bl.Topology.Nodes, repeats())
		b.WriteString("| blocked gang | plain pods/s | ratio to none | plans/min | failed gang cycles/min | scheduler CPU s | per run: pods/s |\n| --- | --- | --- | --- | --- | --- | --- |\n")
		for _, v := range bl.Variants {
			var each []string
			for _, x := range v.Runs {
				each = append(each, fmt.Sprintf("%.0f", x))
			}
			fmt.Fprintf(&b, "| %s (%d pods) | %.0f | %.2f | %.1f | %.1f | %.1f | %s |\n", v.Name, v.GangPods, v.PodsPerSecond, v.Ratio, v.PlansPerMinute, v.CyclesPerMinute, v.CPUSeconds, strings.Join(each, ", "))
		}
		b.WriteString("\ntarget: ratio >= 0.9\n\n")
	}
	loadSummary(&b, "Plain pods (no PodGroup)", r.Plain, false)
	loadSummary(&b, "Mixed load: half plain pods, half in gangs, interleaved", r.Mixed, false)
	loadSummary(&b, "Restart with a backlog of gangs", r.Restart, true)
	churnSummary(&b, r.Churn)
	faultSummary(&b, r.Faults)
	planSummary(&b, r.Plan)
	return b.String()
}

// churnSummary renders issue #40's churn scenario (nothing when it did not run) and its
// targets: ours with holds waits at most the longest run time plus the hold wait, loses at
// most 5 points of utilization to ours without, and keeps every hard gang in its tier.
func churnSummary(b *strings.Builder, cr *ChurnResult) {
	if cr == nil || len(cr.Runs) == 0 {
		return
	}
	tr, tp := cr.Trace, cr.Topology
	fmt.Fprintf(b, "## Churn: %d jobs (%d pods) arriving over %.0f s, offered load %.0f%%, on %d nodes (leaves of %d, spines of %d leaves); 1 s = %.0f trace minutes; holds after %d s\n\n",
		tr.Jobs, tr.Pods, tr.WindowSeconds, 100*tr.OfferedLoad, tp.Nodes, tp.LeafSize, tp.LeavesPerSpine, tr.TraceMinutesPerSecond, cr.HoldWaitSeconds)
	fmt.Fprintf(b, "Trace: %s; %d plain pods, gangs %d hard tier 1, %d hard tier 2 (%d heroes of a whole spine), %d soft tier 1; longest run %.0f s.\n\n",
		tr.Sources, tr.PlainJobs, tr.HardTier1, tr.HardTier2, len(tr.Heroes), tr.Soft, tr.LongestSeconds)
	b.WriteString("| scheduler | util: window / run | allocated: window / run | ended (s) | waiting / running at end | partial gangs | hard violations | gangs at tier 1 / 2 / 3 | leaves / minimum | scheduler CPU s | creation lag p99 s |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range cr.Runs {
		fmt.Fprintf(b, "| %s | %.1f%% / %.1f%% | %.1f%% / %.1f%% | %s (%.0f) | %d / %d | %d | %d | %.0f%% / %.0f%% / %.0f%% | %.2f / %.2f | %.1f | %.2f |\n",
			r.Kind, 100*r.UtilWindow, 100*r.UtilRun, 100*r.AllocatedUtilWindow, 100*r.AllocatedUtilRun, r.Ended, r.WallSeconds, r.Waiting, r.Running,
			r.PartialGangs, r.HardViolations, 100*r.TierShares[0], 100*r.TierShares[1], 100*r.TierShares[2], r.MeanLeaves, r.MeanMinLeaves, r.CPUSeconds, r.CreationLagP99Seconds)
	}
	b.WriteString("\nQueueing delay, arrival to all pods bound, p50 / p99 s (jobs still waiting count with their wait so far):\n\n| scheduler |")
	for _, w := range cr.Runs[0].Waits {
		fmt.Fprintf(b, " %s |", w.Class)
	}
	b.WriteString(" largest job | each hero |\n|" + strings.Repeat(" --- |", len(cr.Runs[0].Waits)+3) + "\n")
	for _, r := range cr.Runs {
		fmt.Fprintf(b, "| %s |", r.Kind)
		for _, w := range r.Waits {
			fmt.Fprintf(b, " %.1f / %.1f |", w.P50, w.P99)
		}
		var heroes []string
		for _, h := range r.Heroes {
			heroes = append(heroes, jobWaitText(h))
		}
		fmt.Fprintf(b, " %s (%d GPUs) | %s |\n", jobWaitText(r.LargestJob), r.LargestJob.GPUs, strings.Join(heroes, ", "))
	}
	tg := cr.Targets
	fmt.Fprintf(b, "\nWith holds: max wait **%.1f s** against longest run + hold wait %.1f s (met: %t); utilization (window) with holds minus without **%+.1f points** (target >= -5: %t); hard gangs within their tier: %t\n\n",
		tg.MaxWaitHoldsSeconds, tg.MaxWaitBoundSeconds, tg.MaxWaitMet, tg.UtilDeltaPoints, tg.UtilMet, tg.HardWithinTier)
}

// faultSummary renders issue #45's fault run (nothing when it did not run).
func faultSummary(b *strings.Builder, fr *FaultResult) {
	if fr == nil || len(fr.Runs) == 0 {
		return
	}
	tr, tp := fr.Trace, fr.Topology
	fmt.Fprintf(b, "## Faults: %d jobs (%d pods, %d gangs of high priority) over %.0f s on %d kwok nodes, two scheduler replicas, the controller discovering from labels\n\n",
		tr.Jobs, tr.Pods, fr.HighGangs, tr.WindowSeconds, tp.Nodes)
	b.WriteString("| run | ended (s) | faults by kind | violations | explained by a fault | longest partial gang s (unexplained) | hard gangs checked | evictions (twice, wasted, wasted in a fault) | holds seen (lost at a failover) | failover: Lease / next bind median, max s | self exits | jobs restarted | wait mean / p99 s |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range fr.Runs {
		kinds := make([]string, 0, len(r.ByKind))
		for _, k := range faultKinds {
			if r.ByKind[k] > 0 {
				kinds = append(kinds, fmt.Sprintf("%s %d", k, r.ByKind[k]))
			}
		}
		ch := r.Checks
		fmt.Fprintf(b, "| %s | %s (%.0f) | %s | %d | %d | %.1f (%.1f) | %d | %d (%d, %d, %d) | %d (%d) | %.1f / %.1f, %.1f | %d | %d | %.1f / %.1f |\n",
			r.Name, r.Churn.Ended, r.Churn.WallSeconds, strings.Join(kinds, ", "), len(ch.Violations), len(ch.Explained), ch.LongestPartialSecs, ch.PartialUnexplained,
			ch.HardChecked, ch.Evictions, ch.EvictedTwice, ch.WastedEvictions, ch.WastedExplained, ch.HoldsSeen, ch.HoldsLostAtFailover,
			r.FailoverAcquireMedian, r.FailoverBindMedian, r.FailoverBindMax, len(r.SchedulerSelfExits), r.JobsRestarted, r.MeanWait, r.P99Wait)
	}
	fmt.Fprintf(b, "\nLeader kills: %d; extra queueing delay with faults: mean %+.1f s, p99 %+.1f s\n\n", fr.LeaderKills, fr.ExtraMean, fr.ExtraP99)
}

// jobWaitText is a job's wait, marked when it never started.
func jobWaitText(w JobWait) string {
	if !w.Started {
		return fmt.Sprintf("%.1f (waiting)", w.WaitSeconds)
	}
	return fmt.Sprintf("%.1f", w.WaitSeconds)
}

// loadSummary renders one of issue #18's scenarios (nothing when it did not run) and its
// targets: pods/s ours / vanilla >= 1.0, or for the restart, start to last bind <= vanilla's
// and ours' first complete gang within 2x vanilla's first bind.
func loadSummary(b *strings.Builder, title string, lr *LoadResult, restart bool) {
	if lr == nil {
		return
	}
	pods := fmt.Sprintf("%d pods of 2 GPUs", lr.Pods)
	if len(lr.Gangs) > 0 {
		pods += fmt.Sprintf(" (%d plain, %d in %d hard gangs)", lr.PlainPods, lr.Pods-lr.PlainPods, len(lr.Gangs))
	}
	fmt.Fprintf(b, "## %s: %s on %d nodes; medians of %d runs each\n\n", title, pods, lr.Topology.Nodes, repeats())
	b.WriteString("Times from the first pod's creation (arriving) or from the scheduler process's start (backlog).\n\n")
	b.WriteString("| mode | scheduler | pods/s | last bind s | first bind s | first complete gang s | scheduler CPU s | peak RSS MiB | per run: pods/s | per run: nodes used / full |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, m := range lr.Modes {
		for _, k := range []Kind{OursBinPack, Vanilla} {
			med := m.Vanilla
			if k.ours() {
				med = m.Ours
			}
			var each, nodes []string
			for _, run := range m.Runs {
				if run.Kind == k {
					each = append(each, fmt.Sprintf("%.0f", run.PodsPerSecond))
					nodes = append(nodes, fmt.Sprintf("%d / %d", run.NodesUsed, run.FullNodes))
				}
			}
			gang := "-"
			if len(lr.Gangs) > 0 {
				gang = fmt.Sprintf("%.2f", med.FirstGangSeconds)
			}
			fmt.Fprintf(b, "| %s | %s | %.0f | %.1f | %.2f | %s | %.1f | %.0f | %s | %s |\n", m.Mode, k, med.PodsPerSecond, med.Seconds, med.FirstBindSeconds, gang, med.CPUSeconds, med.PeakRSSMiB, strings.Join(each, ", "), strings.Join(nodes, ", "))
		}
	}
	b.WriteString("\n")
	for _, m := range lr.Modes {
		if restart {
			fmt.Fprintf(b, "%s: start -> last bind ours / vanilla **%.2f** (target <= 1.0); ours' first complete gang / vanilla's first bind **%.2f** (target <= 2.0); first bind ours / vanilla %.2f\n\n",
				m.Mode, m.SecondsRatio, m.FirstGangToFirstBindRatio, m.FirstBindRatio)
			continue
		}
		pairs := make([]string, len(m.PairRatios))
		for i, r := range m.PairRatios {
			pairs[i] = fmt.Sprintf("%.2f", r)
		}
		fmt.Fprintf(b, "%s: pods/s ours / vanilla **%.2f** (target >= 1.0); per ABBA pair %s, median **%.2f**; first bind ours / vanilla %.2f\n\n",
			m.Mode, m.PodsPerSecondRatio, strings.Join(pairs, ", "), m.PairRatioMedian, m.FirstBindRatio)
	}
}
