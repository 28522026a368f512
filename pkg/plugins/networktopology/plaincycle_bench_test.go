package networktopology

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/plugintesting"
)

// emptyScoreName is a Score plugin that does nothing: what kube-scheduler charges a profile for
// one more Score plugin, whatever the plugin does.
const emptyScoreName = "EmptyScore"

type emptyScore struct{}

func (emptyScore) Name() string { return emptyScoreName }

func (emptyScore) Score(context.Context, fwk.CycleState, *v1.Pod, fwk.NodeInfo) (int64, *fwk.Status) {
	return 0, nil
}

func (emptyScore) ScoreExtensions() fwk.ScoreExtensions { return nil }

// plainCycleProfile is a profile a plain pod's cycle is timed in.
type plainCycleProfile struct {
	name string
	fw   framework.Framework
}

// plainCycleProfiles are the profiles a plain pod's cycle is compared in, vanilla first: the
// full profile, kube-scheduler's default one, the default one with an empty Score plugin (the
// framework's share of the full profile's cost) and the full one with the normal-pod score off.
func (e *benchEnv) plainCycleProfiles(b *testing.B) []plainCycleProfile {
	profiles := plugintesting.LoadProfiles(b, `profiles:
- schedulerName: with-empty-score
  plugins:
    multiPoint:
      enabled:
      - name: EmptyScore
      disabled:
      - name: DynamicResources
- schedulerName: without-normal-pod-score
  plugins:
    multiPoint:
      enabled:
      - name: NetworkTopologyAware
      disabled:
      - name: DynamicResources
  pluginConfig:
  - name: NetworkTopologyAware
    args:
      normalPod:
        enable: false
`)
	reg := plugins.NewInTreeRegistry()
	reg[emptyScoreName] = func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
		return emptyScore{}, nil
	}
	// A plugin of its own (its args differ) on the benchmark's tree and registry.
	reg[Name] = func(_ context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return newPlugin(*obj.(*config.NetworkTopologyAwareArgs), h, e.plugin.cache, e.plugin.gangs), nil
	}
	out := []plainCycleProfile{{"vanilla", e.vanilla}, {"with-NetworkTopologyAware", e.with}}
	for i := range profiles {
		fw, err := frameworkruntime.NewFramework(e.ctx, reg, &profiles[i], testFrameworkOptions(e.snapshot)...)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, plainCycleProfile{profiles[i].SchedulerName, fw})
	}
	return out
}

// newPlainCycleEnv is the benchmark cluster with every node's usage summed, and a plain pod.
func newPlainCycleEnv(b *testing.B) (*benchEnv, *v1.Pod) {
	e := newBenchEnv(b)
	all, _ := e.snapshot.NodeInfos().List()
	for _, ni := range all {
		e.plugin.usageSums.setNode(ni.Node().Name, e.plugin.usageSums.allocatable(ni.Node()))
	}
	pod := st.MakePod().Namespace(benchNamespace).Name("web").UID("web").SchedulerName("with-topology").
		Req(map[v1.ResourceName]string{v1.ResourceCPU: "2", v1.ResourceMemory: "8Gi"}).Obj()
	return e, pod
}

// BenchmarkPlainPodCycle is the per-pod cost of a pod without a PodGroup, scored by the
// normal-pod bin-pack over the 10,000-node tree, next to the same pod in the other profiles of
// plainCycleProfiles; all evaluate nodes until 5% are feasible, as kube-scheduler does at
// 10,000 nodes.
func BenchmarkPlainPodCycle(b *testing.B) {
	e, pod := newPlainCycleEnv(b)
	for _, p := range e.plainCycleProfiles(b) {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e.plainCycle(b, p.fw, pod)
			}
		})
	}
}

// BenchmarkPlainPodCycleRatio is a plain pod's cycle in each profile over vanilla's, measured
// so that this machine's drift cancels: each iteration is a round that times
// plainCyclesPerRound cycles in every profile back to back, in an order that rotates from round
// to round, and the reported ratios are the medians of the rounds' ratios (their quartiles in
// the log). Its ns/op is the time of a round.
func BenchmarkPlainPodCycleRatio(b *testing.B) {
	const plainCyclesPerRound = 200
	e, pod := newPlainCycleEnv(b)
	profiles := e.plainCycleProfiles(b)
	ratios := make([][]float64, len(profiles))
	took := make([]time.Duration, len(profiles))
	round := 0
	for b.Loop() {
		for k := range profiles {
			i := (round + k) % len(profiles)
			start := time.Now()
			for range plainCyclesPerRound {
				e.plainCycle(b, profiles[i].fw, pod)
			}
			took[i] = time.Since(start)
		}
		for i := range profiles[1:] {
			ratios[i+1] = append(ratios[i+1], float64(took[i+1])/float64(took[0]))
		}
		round++
	}
	for i, p := range profiles[1:] {
		q := quartiles(ratios[i+1])
		b.ReportMetric(q[1], p.name+"/vanilla")
		b.Logf("%s / vanilla over %d rounds: median %.3f, quartiles %.3f-%.3f", p.name, round, q[1], q[0], q[2])
	}
}

// plainCycle is one scheduling cycle of pod up to scoring, with kube-scheduler's 5% of nodes.
func (e *benchEnv) plainCycle(b *testing.B, fw framework.Framework, pod *v1.Pod) {
	if n := e.cycle(b, fw, pod, benchNodes*5/100); n != benchNodes*5/100 {
		b.Fatalf("%d feasible nodes, want %d", n, benchNodes*5/100)
	}
}

// quartiles are the first quartile, median and third quartile of xs (nearest rank).
func quartiles(xs []float64) [3]float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return [3]float64{}
	}
	at := func(q float64) float64 { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return [3]float64{at(0.25), at(0.5), at(0.75)}
}

// BenchmarkNormalScorePrepare is the normal-pod score's PreScore pass alone over the 500
// nodes a pod is scored on at 10,000 nodes, each cycle further along the node list as in
// kube-scheduler, with the CPU cache emptied before each pass (untimed) as a scheduling
// cycle's Filter over hundreds of NodeInfos empties it in a cluster. The test snapshot lists
// nodes in map order, so a pod's nodes spread over most leaves, as in a cluster whose nodes
// registered in parallel.
func BenchmarkNormalScorePrepare(b *testing.B) {
	e, pod := newPlainCycleEnv(b)
	list, _ := e.snapshot.NodeInfos().List()
	u := e.plugin.usageSums
	req, tree := u.podRequest(pod), e.plugin.cache.Snapshot()
	const scored = benchNodes * 5 / 100
	// The first pass builds the node-to-leaf table and every bin-pack value: not timed.
	u.prepare(tree, list, list[:scored], req, e.plugin.weights)
	evict := make([]byte, 64<<20)
	start := scored
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for i := 0; i < len(evict); i += 64 {
			evict[i]++
		}
		nodes := list[start : start+scored]
		start = (start + scored) % (len(list) - scored)
		b.StartTimer()
		u.prepare(tree, list, nodes, req, e.plugin.weights)
	}
}
