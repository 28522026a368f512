package bench

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Issue #43's kinds: one gang as Kubernetes' own PodGroup (gang policy, topology key
// hypernode.dev/tier-2), placed by our scheduler (OursNative: NetworkTopologyAware generates
// the placements) or by upstream's (VanillaTAS: its TopologyPlacementGenerator on the tier-2
// label), both with the native pod groups' gates.
const (
	OursNative Kind = "ours-native"
	VanillaTAS Kind = "vanilla-tas"
)

// nativeGates are the gates of the native kinds' schedulers and of the benchmark's apiserver.
const nativeGates = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"

// nativeTopologyKey is the native gangs' topology constraint: hard at the spine tier.
const nativeTopologyKey = "hypernode.dev/tier-2"

// nativeGroups are the run's gangs as native PodGroups (gang policy of their size, the tier-2
// key).
func (s runSpec) nativeGroups(ns string) []*schedulingv1beta1.PodGroup {
	var out []*schedulingv1beta1.PodGroup
	for _, u := range s.gangs() {
		out = append(out, &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: u.Name},
			Spec: schedulingv1beta1.PodGroupSpec{
				SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(u.Size)}},
				SchedulingConstraints: &schedulingv1beta1.PodGroupSchedulingConstraints{
					Topology: []schedulingv1beta1.TopologyConstraint{{Key: nativeTopologyKey}}},
			}})
	}
	return out
}

// NativeGangResult is issue #43's scenario: one gang of 8-GPU pods hard at tier 2, through
// our classic path (a scheduler-plugins PodGroup), as a native PodGroup through our
// placement plugins, and as a native PodGroup through upstream's TopologyPlacementGenerator.
type NativeGangResult struct {
	Topology Topology    `json:"topology"`
	Pods     int         `json:"pods"`
	Runs     []RunResult `json:"runs"`
	// Medians: last pod created to all bound, per kind; ratios against the classic path.
	ClassicSeconds float64 `json:"classicSeconds"`
	NativeSeconds  float64 `json:"nativeSeconds"`
	TASSeconds     float64 `json:"tasSeconds"`
	NativeRatio    float64 `json:"nativeRatio"`
	TASRatio       float64 `json:"tasRatio"`
	ClassicRSSMiB  float64 `json:"classicPeakRSSMiB"`
	NativeRSSMiB   float64 `json:"nativePeakRSSMiB"`
	TASRSSMiB      float64 `json:"tasPeakRSSMiB"`
	ClassicCPU     float64 `json:"classicCPUSeconds"`
	NativeCPU      float64 `json:"nativeCPUSeconds"`
	TASCPU         float64 `json:"tasCPUSeconds"`
	// NativePlacements is the most placements our generator gave one pod-group cycle over
	// the runs (target <= 32), NativeGenerations how many cycles it generated for (median);
	// TASPlacements is what upstream's generator gives: one per value of the label.
	NativePlacements  int     `json:"nativePlacements"`
	NativeGenerations float64 `json:"nativeGenerations"`
	TASPlacements     int     `json:"tasPlacements"`
}

// TestNativeGang: issue #43's benchmark (1,000 pods on 5,000 nodes at full size).
func TestNativeGang(t *testing.T) {
	tp := Topology{Name: "ng", Nodes: 256, LeafSize: 32, LeavesPerSpine: 4}
	pods := 100
	if full() {
		tp.Nodes, tp.LeavesPerSpine, pods = 5000, 40, 1000
	}
	gangs := []GangSpec{{Name: "native", Size: pods, GPUs: nodeGPUs, Tier: 2}}
	c := newClients(t)
	tp.create(t, c)
	res := &NativeGangResult{Topology: tp, Pods: pods, TASPlacements: tp.spines()}
	kinds := []Kind{OursBinPack, OursNative, VanillaTAS}
	var generations []float64
	for rep := range repeats() {
		for i := range kinds {
			k := kinds[(i+rep)%len(kinds)] // each kind first in turn
			r := runGangs(t, c, tp, runSpec{scenario: "native", units: gangs, mode: arriving, timeoutSeconds: 600}, k, rep)
			if k == OursNative {
				most, cycles, err := placementsGenerated(r.logPath)
				if err != nil {
					t.Fatal(err)
				}
				if cycles == 0 {
					t.Errorf("%s run %d: no placement generation logged (%s): the gang did not go through NetworkTopologyAware", k, rep, r.logPath)
				}
				res.NativePlacements = max(res.NativePlacements, most)
				generations = append(generations, float64(cycles))
			}
			t.Logf("native gang %s run %d: %d pods bound %.1fs after the last was created, peak RSS %.0f MiB, CPU %.1fs",
				k, rep, r.Pods, r.AfterLastCreatedSeconds, r.PeakRSSMiB, r.CPUSeconds)
			res.Runs = append(res.Runs, r)
		}
	}
	after := func(r RunResult) float64 { return r.AfterLastCreatedSeconds }
	rss := func(r RunResult) float64 { return r.PeakRSSMiB }
	cpu := func(r RunResult) float64 { return r.CPUSeconds }
	res.ClassicSeconds, res.NativeSeconds, res.TASSeconds = medianOf(res.Runs, OursBinPack, after), medianOf(res.Runs, OursNative, after), medianOf(res.Runs, VanillaTAS, after)
	res.NativeRatio, res.TASRatio = res.NativeSeconds/res.ClassicSeconds, res.TASSeconds/res.ClassicSeconds
	res.ClassicRSSMiB, res.NativeRSSMiB, res.TASRSSMiB = medianOf(res.Runs, OursBinPack, rss), medianOf(res.Runs, OursNative, rss), medianOf(res.Runs, VanillaTAS, rss)
	res.ClassicCPU, res.NativeCPU, res.TASCPU = medianOf(res.Runs, OursBinPack, cpu), medianOf(res.Runs, OursNative, cpu), medianOf(res.Runs, VanillaTAS, cpu)
	res.NativeGenerations = median(generations)
	if res.NativePlacements > 32 {
		t.Errorf("NetworkTopologyAware generated %d placements in one cycle; the issue's bound is 32", res.NativePlacements)
	}
	results.NativeGang = res
}

// generatedLine is NetworkTopologyAware's V(2) line for each pod-group cycle it generates for.
var generatedLine = regexp.MustCompile(`"Placements generated for native pod group".* placements=\[(.*)\]`)

// placementsGenerated reads a scheduler log: the most placements one cycle got, and the
// number of cycles.
func placementsGenerated(logPath string) (most, cycles int, err error) {
	f, err := os.Open(logPath)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = f.Close() }()
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		m := generatedLine.FindStringSubmatch(scanner.Text())
		if m == nil {
			continue
		}
		cycles++
		// The names are quoted strings (klog's slice format), with brackets of their own.
		most = max(most, strings.Count(m[1], `"`)/2)
	}
	return most, cycles, scanner.Err()
}

// writeNativeGang adds the scenario to the summary.
func writeNativeGang(b *strings.Builder, ng *NativeGangResult) {
	fmt.Fprintf(b, "## Native pod group: %d pods of 8 GPUs, hard tier 2 (topology key %s), on %d nodes; medians of %d runs each\n\n",
		ng.Pods, nativeTopologyKey, ng.Topology.Nodes, repeats())
	b.WriteString("| scheduler | last created -> all bound s | ratio to classic | placements per cycle | scheduler CPU s | peak RSS MiB |\n| --- | --- | --- | --- | --- | --- |\n")
	fmt.Fprintf(b, "| ours, classic PodGroup | %.1f | 1.00 | - | %.1f | %.0f |\n", ng.ClassicSeconds, ng.ClassicCPU, ng.ClassicRSSMiB)
	fmt.Fprintf(b, "| ours, native PodGroup | %.1f | %.2f | %d (%.0f cycles) | %.1f | %.0f |\n", ng.NativeSeconds, ng.NativeRatio, ng.NativePlacements, ng.NativeGenerations, ng.NativeCPU, ng.NativeRSSMiB)
	fmt.Fprintf(b, "| upstream TopologyPlacementGenerator | %.1f | %.2f | %d (one per spine) | %.1f | %.0f |\n\n", ng.TASSeconds, ng.TASRatio, ng.TASPlacements, ng.TASCPU, ng.TASRSSMiB)
	fmt.Fprintf(b, "native / classic: **%.2f** (target <= 1.2), placements per cycle %d (target <= 32)\n\n", ng.NativeRatio, ng.NativePlacements)
}
