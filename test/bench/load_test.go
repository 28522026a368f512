package bench

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// Issue #18's scenarios: plain pods, a mixed load and a restart with a backlog, each on
// scenario 1's cluster and pods, ours against vanilla in the same run, in the load modes that
// apply: pods arriving while the scheduler runs, and a backlog that exists when it starts.

// LoadResult is one of issue #18's scenarios.
type LoadResult struct {
	Topology  Topology   `json:"topology"`
	Pods      int        `json:"pods"`
	PlainPods int        `json:"plainPods"`
	Gangs     []GangSpec `json:"gangs,omitempty"`
	// Interleaved: gang members and plain pods alternate in creation order.
	Interleaved bool             `json:"interleaved,omitempty"`
	Modes       []LoadModeResult `json:"modes"`
}

// LoadModeResult is one load mode of a scenario: every run, the medians of each kind and the
// ratios ours / vanilla of the medians.
type LoadModeResult struct {
	Mode    loadMode    `json:"mode"`
	Runs    []RunResult `json:"runs"`
	Ours    Medians     `json:"ours"`
	Vanilla Medians     `json:"vanilla"`
	// PodsPerSecondRatio, SecondsRatio (start to last bind), FirstBindRatio: ours / vanilla.
	PodsPerSecondRatio float64 `json:"podsPerSecondRatio"`
	SecondsRatio       float64 `json:"secondsRatio"`
	FirstBindRatio     float64 `json:"firstBindRatio"`
	// FirstGangToFirstBindRatio: ours' first complete gang / vanilla's first bind (with gangs).
	FirstGangToFirstBindRatio float64 `json:"firstGangToFirstBindRatio,omitempty"`
	// PairRatios: ours' pods/s / vanilla's in each ABBA pair (the two runs of one repetition,
	// back to back), and their median: a slowdown of the whole machine during one pair moves
	// both of its runs, so the pairs' ratios are steadier than the medians' ratio.
	PairRatios      []float64 `json:"pairRatios"`
	PairRatioMedian float64   `json:"pairRatioMedian"`
}

// Medians are the medians of one kind's runs (RunResult's fields of the same names).
type Medians struct {
	PodsPerSecond    float64 `json:"podsPerSecond"`
	Seconds          float64 `json:"seconds"`
	FirstBindSeconds float64 `json:"firstBindSeconds"`
	FirstGangSeconds float64 `json:"firstGangSeconds,omitempty"`
	CPUSeconds       float64 `json:"cpuSeconds"`
	PeakRSSMiB       float64 `json:"peakRSSMiB"`
}

// pairRatios are ours' pods/s / vanilla's for each repetition that has both kinds, in
// repetition order.
func pairRatios(runs []RunResult) []float64 {
	ours, vanilla := map[int]float64{}, map[int]float64{}
	last := -1
	for _, r := range runs {
		if r.Kind.ours() {
			ours[r.Run] = r.PodsPerSecond
		} else {
			vanilla[r.Run] = r.PodsPerSecond
		}
		last = max(last, r.Run)
	}
	var ratios []float64
	for rep := 0; rep <= last; rep++ {
		o, ok1 := ours[rep]
		v, ok2 := vanilla[rep]
		if ok1 && ok2 {
			ratios = append(ratios, o/v)
		}
	}
	return ratios
}

func mediansOf(runs []RunResult, k Kind) Medians {
	return Medians{
		PodsPerSecond:    medianOf(runs, k, func(r RunResult) float64 { return r.PodsPerSecond }),
		Seconds:          medianOf(runs, k, func(r RunResult) float64 { return r.Seconds }),
		FirstBindSeconds: medianOf(runs, k, func(r RunResult) float64 { return r.FirstBindSeconds }),
		FirstGangSeconds: medianOf(runs, k, func(r RunResult) float64 { return r.FirstGangSeconds }),
		CPUSeconds:       medianOf(runs, k, func(r RunResult) float64 { return r.CPUSeconds }),
		PeakRSSMiB:       medianOf(runs, k, func(r RunResult) float64 { return r.PeakRSSMiB }),
	}
}

// TestPlainPods: scenario 1's pods without PodGroups (2 GPUs each), through our profile with
// the HyperNode tree present and through vanilla, arriving and as a backlog. Target (issue
// #18): ours' pods/s >= vanilla's.
func TestPlainPods(t *testing.T) {
	tl := newThroughputLoad("pl")
	units := []GangSpec{{Name: "plain", Size: tl.pods, GPUs: 2, Plain: true}}
	results.Plain = runLoad(t, tl.tp, runSpec{scenario: "plain", units: units}, arriving, backlog)
}

// TestMixedLoad: the same number of pods, half of them plain and half in scenario 1's gangs
// (over half the pods), created interleaved pod by pod so that both arrive together; vanilla
// gets the same pods without PodGroups. Target: ours' pods/s >= vanilla's, in both modes.
func TestMixedLoad(t *testing.T) {
	tl := newThroughputLoad("mx")
	gangs := tl.gangs(tl.pods / 2)
	units := append(gangs, GangSpec{Name: "plain", Size: tl.pods - tl.pods/2, GPUs: 2, Plain: true})
	results.Mixed = runLoad(t, tl.tp, runSpec{scenario: "mixed", units: units, interleave: true}, arriving, backlog)
}

// TestRestartBacklog: scenario 1's gangs, every PodGroup and pod created before the scheduler
// starts. Targets: start to last bind <= vanilla's; ours' first complete gang within 2x
// vanilla's first bind (vanilla's first complete gang, computed from its binds of the same
// pods, is reported too).
func TestRestartBacklog(t *testing.T) {
	tl := newThroughputLoad("rb")
	results.Restart = runLoad(t, tl.tp, runSpec{scenario: "restart", units: tl.gangs(tl.pods)}, backlog)
}

// runLoad creates the cluster and runs the spec in each mode, both kinds alternating in ABBA
// order, -bench.repeat runs each, and returns every run with the medians and ratios.
func runLoad(t *testing.T, tp Topology, s runSpec, modes ...loadMode) *LoadResult {
	t.Helper()
	c := newClients(t)
	tp.create(t, c)
	res := &LoadResult{Topology: tp, Gangs: s.gangs(), Interleaved: s.interleave}
	for _, u := range s.units {
		res.Pods += u.Size
		if u.Plain {
			res.PlainPods += u.Size
		}
	}
	scenario := s.scenario
	for _, mode := range modes {
		s.mode, s.scenario = mode, scenario+"-"+string(mode)
		m := LoadModeResult{Mode: mode}
		for rep := range repeats() {
			for _, k := range abbaOrder(rep) {
				r := runGangs(t, c, tp, s, k, rep)
				gangs := ""
				if len(res.Gangs) > 0 {
					gangs = fmt.Sprintf(", first complete gang %.2fs, %d plans (max %.0f ms)", r.FirstGangSeconds, r.Plans, r.PlanMaxMs)
					if r.FirstGangSeconds == 0 {
						t.Errorf("%s %s run %d: no complete gang among %d bound pods", s.scenario, k, rep, r.Pods)
					}
				}
				t.Logf("%s %s run %d: %d pods in %.1fs = %.0f pods/s, first bind %.2fs%s (created in %.1fs), peak RSS %.0f MiB, CPU %.1fs, %d nodes used, %d full",
					s.scenario, k, rep, r.Pods, r.Seconds, r.PodsPerSecond, r.FirstBindSeconds, gangs, r.CreateSeconds, r.PeakRSSMiB, r.CPUSeconds, r.NodesUsed, r.FullNodes)
				m.Runs = append(m.Runs, r)
			}
		}
		m.Ours, m.Vanilla = mediansOf(m.Runs, OursBinPack), mediansOf(m.Runs, Vanilla)
		m.PairRatios = pairRatios(m.Runs)
		m.PairRatioMedian = median(m.PairRatios)
		m.PodsPerSecondRatio = m.Ours.PodsPerSecond / m.Vanilla.PodsPerSecond
		m.SecondsRatio = m.Ours.Seconds / m.Vanilla.Seconds
		m.FirstBindRatio = m.Ours.FirstBindSeconds / m.Vanilla.FirstBindSeconds
		if len(res.Gangs) > 0 {
			m.FirstGangToFirstBindRatio = m.Ours.FirstGangSeconds / m.Vanilla.FirstBindSeconds
		}
		res.Modes = append(res.Modes, m)
	}
	return res
}

// TestPairRatios: one ratio per repetition with both kinds, in repetition order, whatever the
// order of the runs inside a pair.
func TestPairRatios(t *testing.T) {
	runs := []RunResult{
		{Kind: OursBinPack, Run: 0, PodsPerSecond: 90}, {Kind: Vanilla, Run: 0, PodsPerSecond: 100},
		{Kind: Vanilla, Run: 1, PodsPerSecond: 200}, {Kind: OursBinPack, Run: 1, PodsPerSecond: 220},
		{Kind: OursBinPack, Run: 2, PodsPerSecond: 50}, // its vanilla run is missing: no pair
		{Kind: Vanilla, Run: 3, PodsPerSecond: 100}, {Kind: OursBinPack, Run: 3, PodsPerSecond: 80},
	}
	if diff := cmp.Diff([]float64{0.9, 1.1, 0.8}, pairRatios(runs), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("pair ratios (-want,+got):\n%s", diff)
	}
}
