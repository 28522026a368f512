package networktopology

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	_ "github.com/hypernode-dev/hypernode-scheduler/apis/config/scheme"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/plugintesting"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// The benchmark cluster: 10,000 nodes with 8 GPUs, leaves of 32 nodes (tier 1), two spines of
// 160 leaves (tier 2), one core (tier 3); a 5,000-pod gang of one 8-GPU pod per node, hard at
// tier 2, as in the use case.
const (
	benchNodes, benchPerLeaf, benchLeavesPerSpine, benchGang = 10000, 32, 160, 5000
	benchLeafGang                                            = 16
	benchNamespace                                           = "team"
)

func benchNodeName(i int) string { return fmt.Sprintf("r%03d-n%02d", i/benchPerLeaf, i%benchPerLeaf) }

// benchProfiles loads kube-scheduler's default profile (all default plugins and args) twice:
// once with NetworkTopologyAware added, once without. DynamicResources is off in both: the
// GPUs here come from a device plugin, and the plugin needs a DRA manager this benchmark
// does not run.
func benchProfiles(b testing.TB) (with, without schedconfig.KubeSchedulerProfile) {
	profiles := plugintesting.LoadProfiles(b, `profiles:
- schedulerName: with-topology
  plugins:
    multiPoint:
      enabled:
      - name: NetworkTopologyAware
      disabled:
      - name: DynamicResources
- schedulerName: vanilla
  plugins:
    multiPoint:
      disabled:
      - name: DynamicResources
`)
	return profiles[0], profiles[1]
}

type benchEnv struct {
	ctx     context.Context
	with    framework.Framework
	vanilla framework.Framework
	plugin  *NetworkTopologyAware
	members []*v1.Pod
	// leafMembers are a second gang, of benchLeafGang pods hard at tier 1.
	leafMembers []*v1.Pod
	// stages are a benchGang-pod job in sub-groups of 8, each hard at tier 1.
	stages []*v1.Pod
	// mixed are gangs of a 4-CPU launcher and 8-GPU workers (benchMixedGangs).
	mixed    map[string][]*v1.Pod
	snapshot *internalcache.Snapshot
	// nextStart is where the next cycle starts evaluating nodes: kube-scheduler rotates it so
	// that consecutive pods see different nodes (and the caches are as cold as in a cluster).
	nextStart int
}

func newBenchEnv(b *testing.B) *benchEnv {
	metrics.Register()
	ctx := context.Background()
	logger := klog.Background()
	var nodes []*v1.Node
	cache := hypernode.NewCache(logger, nil)
	for i := range benchNodes {
		n := st.MakeNode().Name(benchNodeName(i)).Capacity(map[v1.ResourceName]string{
			v1.ResourceCPU: "64", v1.ResourceMemory: "512Gi", v1.ResourcePods: "110", "nvidia.com/gpu": "8"}).Obj()
		nodes = append(nodes, n)
		cache.SetNode(n)
	}
	setBenchTree(cache, benchNodes, benchLeavesPerSpine)

	gangs := gangstate.New()
	registry := gangs.Registry()
	registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: "train", UID: "pg-train",
			Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":2}`}},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: benchGang},
	})
	registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: "leafjob", UID: "pg-leafjob",
			Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`}},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: benchLeafGang},
	})
	e := &benchEnv{ctx: ctx, snapshot: internalcache.NewSnapshot(nil, nodes), mixed: map[string][]*v1.Pod{}}
	for _, g := range benchMixedGangs {
		registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: g.name, UID: types.UID("pg-" + g.name),
				Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: fmt.Sprintf(`{"mode":"hard","highestTierAllowed":%d}`, g.tier)}},
			Spec: schedulingv1alpha1.PodGroupSpec{MinMember: int32(g.size)},
		})
		for i := range g.size {
			pod := benchMember(g.name, i)
			if i == 0 {
				pod.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("16Gi")}
			}
			registry.SetPod(nil, pod)
			e.mixed[g.name] = append(e.mixed[g.name], pod)
		}
	}
	// A pipeline job: benchGang members in stages of 8 by rank, each stage hard at tier 1.
	registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: "pipeline", UID: "pg-pipeline",
			Annotations: map[string]string{
				podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":2}`,
				podgroup.SubGroupPolicyAnnotation:  `[{"name":"stage","subGroupSize":8,"partitionSize":8,"networkTopology":{"mode":"hard","highestTierAllowed":1}}]`}},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: benchGang},
	})
	for i := range benchGang {
		pod := benchMember("pipeline", i)
		pod.Annotations = map[string]string{podgroup.RankAnnotation: strconv.Itoa(i)}
		registry.SetPod(nil, pod)
		e.stages = append(e.stages, pod)
	}
	for i := range benchLeafGang {
		pod := benchMember("leafjob", i)
		registry.SetPod(nil, pod)
		e.leafMembers = append(e.leafMembers, pod)
	}
	for i := range benchGang {
		pod := benchMember("train", i)
		registry.SetPod(nil, pod)
		e.members = append(e.members, pod)
	}

	with, vanilla := benchProfiles(b)
	reg := plugins.NewInTreeRegistry()
	reg[Name] = func(_ context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		e.plugin = newPlugin(*obj.(*config.NetworkTopologyAwareArgs), h, cache, gangs)
		return e.plugin, nil
	}
	var err error
	if e.with, err = frameworkruntime.NewFramework(ctx, reg, &with, testFrameworkOptions(e.snapshot)...); err != nil {
		b.Fatal(err)
	}
	if e.vanilla, err = frameworkruntime.NewFramework(ctx, reg, &vanilla, testFrameworkOptions(e.snapshot)...); err != nil {
		b.Fatal(err)
	}
	return e
}

// cycle runs what a scheduling cycle runs for pod up to scoring: PreFilter, Filter on the
// nodes the scheduler would evaluate (the PreFilterResult, or the first numFeasible feasible
// ones from where the previous cycle stopped, as kube-scheduler's percentageOfNodesToScore
// stops early and its next cycle goes on from there; numFeasible < 0 for all), PreScore and
// Score. Filter runs as kube-scheduler runs it: on the profile's parallelizer, in chunks of
// consecutive nodes, the feasible ones listed as they are found.
func (e *benchEnv) cycle(b *testing.B, fw framework.Framework, pod *v1.Pod, numFeasible int) int {
	state := framework.NewCycleState()
	result, status, _ := fw.RunPreFilterPlugins(e.ctx, state, pod)
	if !status.IsSuccess() {
		b.Fatalf("PreFilter: %v", status)
	}
	// As kube-scheduler does: the PreFilterResult's nodes, else every node.
	candidates, _ := e.snapshot.NodeInfos().List()
	if !result.AllNodes() {
		candidates = candidates[:0:0]
		for name := range result.NodeNames {
			ni, err := e.snapshot.NodeInfos().Get(name)
			if err != nil {
				b.Fatal(err)
			}
			candidates = append(candidates, ni)
		}
	}
	start := 0
	if result.AllNodes() {
		start = e.nextStart
	}
	if numFeasible < 0 || numFeasible > len(candidates) {
		numFeasible = len(candidates)
	}
	feasible := make([]fwk.NodeInfo, numFeasible)
	var feasibleLen, failed atomic.Int32
	ctx, cancel := context.WithCancel(e.ctx)
	fw.Parallelizer().Until(ctx, len(candidates), func(i int) {
		ni := candidates[(start+i)%len(candidates)]
		if !fw.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni).IsSuccess() {
			failed.Add(1)
			return
		}
		if n := feasibleLen.Add(1); n > int32(numFeasible) {
			cancel()
			feasibleLen.Add(-1)
		} else {
			feasible[n-1] = ni
		}
	}, "Filter")
	cancel()
	feasible = feasible[:feasibleLen.Load()]
	if result.AllNodes() {
		e.nextStart = (e.nextStart + len(feasible) + int(failed.Load())) % len(candidates)
	}
	if s := fw.RunPreScorePlugins(e.ctx, state, pod, feasible); !s.IsSuccess() {
		b.Fatalf("PreScore: %v", s)
	}
	if _, s := fw.RunScorePlugins(e.ctx, state, pod, feasible); !s.IsSuccess() {
		b.Fatalf("Score: %v", s)
	}
	return len(feasible)
}

// BenchmarkPlanWithCapacitySimulation is the first member's PreFilter: the simulation of the
// profile's Filter plugins on 10,000 nodes and the plan of the 5,000-pod gang.
func BenchmarkPlanWithCapacitySimulation(b *testing.B) {
	e := newBenchEnv(b)
	key := podgroup.Key{Namespace: benchNamespace, Name: "train"}
	b.ReportAllocs()
	for b.Loop() {
		e.plugin.invalidate(klog.Background(), key)
		state := framework.NewCycleState()
		if _, status, _ := e.with.RunPreFilterPlugins(e.ctx, state, e.members[0]); !status.IsSuccess() {
			b.Fatal(status)
		}
	}
	plan := e.plugin.planOf(key)
	if plan == nil || plan.Tier != 2 || len(plan.PodLeaf) != benchGang {
		b.Fatalf("unexpected plan %+v", plan)
	}
}

// BenchmarkPlanLeafGang is the first member's PreFilter for a 16-pod gang hard at tier 1 on
// the same 10,000 nodes: the plan simulates only the leaf it picks.
func BenchmarkPlanLeafGang(b *testing.B) {
	e := newBenchEnv(b)
	key := podgroup.Key{Namespace: benchNamespace, Name: "leafjob"}
	b.ReportAllocs()
	for b.Loop() {
		e.plugin.invalidate(klog.Background(), key)
		state := framework.NewCycleState()
		if _, status, _ := e.with.RunPreFilterPlugins(e.ctx, state, e.leafMembers[0]); !status.IsSuccess() {
			b.Fatal(status)
		}
	}
	plan := e.plugin.planOf(key)
	if plan == nil || plan.Tier != 1 || len(plan.PodLeaf) != benchLeafGang {
		b.Fatalf("unexpected plan %+v", plan)
	}
	// BinPack picks the fullest leaf after placement: the last leaf has 16 nodes (10,000 is
	// not a multiple of 32), exactly the gang's size, and it is the only one simulated.
	if got, want := e.plugin.lastSimulated.Load(), int64(benchNodes%benchPerLeaf); got != want {
		b.Fatalf("simulated %d nodes, want the last leaf's %d", got, want)
	}
}

// BenchmarkPlanSubGroups is the first member's PreFilter for the 5,000-pod pipeline job of
// 625 stages of 8, each stage in one leaf and the job in one spine: every node simulated
// (sub-groups compare every candidate of a tier), then the plan.
func BenchmarkPlanSubGroups(b *testing.B) {
	e := newBenchEnv(b)
	key := podgroup.Key{Namespace: benchNamespace, Name: "pipeline"}
	b.ReportAllocs()
	for b.Loop() {
		e.plugin.invalidate(klog.Background(), key)
		state := framework.NewCycleState()
		if _, status, _ := e.with.RunPreFilterPlugins(e.ctx, state, e.stages[0]); !status.IsSuccess() {
			b.Fatal(status)
		}
	}
	plan := e.plugin.planOf(key)
	if plan == nil || plan.Tier != 2 || len(plan.PodLeaf) != benchGang {
		b.Fatalf("unexpected plan %+v", plan)
	}
	// Each stage in one leaf.
	for i := 0; i < benchGang; i += 8 {
		if first, last := plan.PodLeaf[e.stages[i].Name], plan.PodLeaf[e.stages[i+7].Name]; first != last {
			b.Fatalf("stage %d spans %s and %s", i/8, first, last)
		}
	}
	e.plugin.invalidate(klog.Background(), key)
}

// benchMixedGangs are MPI-style gangs: member 0 a 4-CPU launcher, the others 8-GPU workers.
var benchMixedGangs = []struct {
	name       string
	size, tier int
}{{"mpi-leaf", benchPerLeaf, 1}, {"mpi-big", benchGang, 2}}

// BenchmarkPlanMixedShapes is the first member's PreFilter for a gang of two shapes (a
// launcher and its workers): each shape simulated on every node, then the candidates packed
// node by node, the launcher next to a worker.
func BenchmarkPlanMixedShapes(b *testing.B) {
	e := newBenchEnv(b)
	for _, g := range benchMixedGangs {
		b.Run(fmt.Sprintf("%d-pods-tier-%d", g.size, g.tier), func(b *testing.B) {
			key := podgroup.Key{Namespace: benchNamespace, Name: g.name}
			b.ReportAllocs()
			for b.Loop() {
				e.plugin.invalidate(klog.Background(), key)
				state := framework.NewCycleState()
				if _, status, _ := e.with.RunPreFilterPlugins(e.ctx, state, e.mixed[g.name][1]); !status.IsSuccess() {
					b.Fatal(status)
				}
			}
			plan := e.plugin.planOf(key)
			if plan == nil || plan.Tier != g.tier || len(plan.PodNode) != g.size {
				b.Fatalf("unexpected plan %+v", plan)
			}
			// The launcher shares the first worker's node.
			if launcher, worker := plan.PodNode[e.mixed[g.name][0].Name], plan.PodNode[e.mixed[g.name][1].Name]; launcher != worker {
				b.Fatalf("launcher on %s, first worker on %s", launcher, worker)
			}
			e.plugin.invalidate(klog.Background(), key)
		})
	}
}

// BenchmarkMemberCycle is the per-pod cost of a member of an already planned gang, next to the
// same pod in kube-scheduler's default profile (no topology plugin, Filter until 5% of the
// nodes are feasible, as kube-scheduler does at 10,000 nodes).
func BenchmarkMemberCycle(b *testing.B) {
	e := newBenchEnv(b)
	e.cycle(b, e.with, e.members[0], -1) // plans the gang
	b.Run("with-NetworkTopologyAware", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			// The member's leaf has 32 nodes; the plan nominated a sibling on each of the
			// others, so its own node is the one that fits.
			if n := e.cycle(b, e.with, e.members[1+i%(benchGang-1)], -1); n != 1 {
				b.Fatalf("%d feasible nodes, want the member's own nominated node", n)
			}
			i++
		}
	})
	b.Run("vanilla", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			e.cycle(b, e.vanilla, e.members[1+i%(benchGang-1)], benchNodes*5/100)
			i++
		}
	})
}

// testFrameworkOptions are the framework options of the tests and benchmarks: a fake client,
// the given node snapshot, no nominations, no queue to activate pods in.
func testFrameworkOptions(snapshot *internalcache.Snapshot) []frameworkruntime.Option {
	client := fake.NewClientset()
	return []frameworkruntime.Option{
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(client, 0)),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithParallelism(parallelize.DefaultParallelism),
		frameworkruntime.WithEventRecorder(&events.FakeRecorder{}),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithPodNominator(newTestNominator()),
		frameworkruntime.WithPodActivator(&noActivation{}),
	}
}

// testNominator is an in-memory PodNominator, as kube-scheduler's queue keeps one: plans
// nominate their members through it, and every Filter run sees them.
type testNominator struct {
	mu     sync.Mutex
	byNode map[string][]fwk.PodInfo
	nodeOf map[types.UID]string
}

func newTestNominator() *testNominator {
	return &testNominator{byNode: map[string][]fwk.PodInfo{}, nodeOf: map[types.UID]string{}}
}

func (n *testNominator) AddNominatedPod(_ klog.Logger, pi fwk.PodInfo, ni *fwk.NominatingInfo) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.deleteLocked(pi.GetPod())
	if ni == nil || ni.Mode() != fwk.ModeOverride || ni.NominatedNodeName == "" {
		return
	}
	n.nodeOf[pi.GetPod().UID] = ni.NominatedNodeName
	n.byNode[ni.NominatedNodeName] = append(n.byNode[ni.NominatedNodeName], pi)
}

func (n *testNominator) DeleteNominatedPodIfExists(pod *v1.Pod) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.deleteLocked(pod)
}

func (n *testNominator) deleteLocked(pod *v1.Pod) {
	node, ok := n.nodeOf[pod.UID]
	if !ok {
		return
	}
	delete(n.nodeOf, pod.UID)
	pods := n.byNode[node]
	for i, pi := range pods {
		if pi.GetPod().UID == pod.UID {
			n.byNode[node] = append(pods[:i:i], pods[i+1:]...)
			break
		}
	}
	if len(n.byNode[node]) == 0 {
		delete(n.byNode, node)
	}
}

func (n *testNominator) UpdateNominatedPod(klog.Logger, *v1.Pod, fwk.PodInfo) {}

func (n *testNominator) NominatedPodsForNode(node string) []fwk.PodInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]fwk.PodInfo(nil), n.byNode[node]...)
}

// benchMember is member i of a benchmark gang: an 8-GPU trainer.
func benchMember(group string, i int) *v1.Pod {
	name := fmt.Sprintf("%s-%d", group, i)
	return st.MakePod().Namespace(benchNamespace).Name(name).UID(name).SchedulerName("with-topology").
		Label(schedulingv1alpha1.PodGroupLabel, group).
		Req(map[v1.ResourceName]string{v1.ResourceCPU: "32", v1.ResourceMemory: "256Gi", "nvidia.com/gpu": "8"}).Obj()
}
