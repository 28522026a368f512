package networktopology

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/plugintesting"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// The DRA benchmark cluster: 5,000 nodes with 64 CPUs and 8 GPUs, leaves of 32 nodes (tier 1),
// spines of 40 leaves (tier 2: 1,280 nodes, the last one 1,160), one core (tier 3); a
// 1,000-pod gang of 1-CPU members claiming 8 GPUs each, hard at tier 2. The GPUs are DRA
// devices (one ResourceSlice of 8 devices per node, class gpu.bench, claims generated from
// a ResourceClaimTemplate asking ExactCount 8) or, for the baseline, nvidia.com/gpu: 8 in
// the nodes' allocatable, requested by the same members.
const (
	draBenchNodes, draBenchLeavesPerSpine, draBenchGang, draBenchGPUs = 5000, 40, 1000, 8
	// draBenchClass is the DeviceClass, and the driver of the devices it selects.
	draBenchClass    = "gpu.bench"
	draBenchTemplate = "eight-gpus"
	draBenchGroup    = "train"
)

// draBenchEnv is a benchEnv of the DRA benchmark cluster. dra says whether the GPUs are DRA
// devices (the profiles run DynamicResources with a real DRA manager) or an extended
// resource (DynamicResources off, as in benchProfiles).
type draBenchEnv struct {
	*benchEnv
	dra bool
	// draPlugin is the vanilla profile's DynamicResources plugin; nil without DRA.
	draPlugin fwk.Plugin
	key       podgroup.Key
}

// draBenchProfiles are benchProfiles with DynamicResources on: kube-scheduler's default
// profile with NetworkTopologyAware added, and the default profile alone.
func draBenchProfiles(b testing.TB) (with, vanilla schedconfig.KubeSchedulerProfile) {
	profiles := plugintesting.LoadProfiles(b, `profiles:
- schedulerName: with-topology
  plugins:
    multiPoint:
      enabled:
      - name: NetworkTopologyAware
- schedulerName: vanilla
`)
	return profiles[0], profiles[1]
}

// setBenchTree builds newBenchEnv's tree over n nodes named benchNodeName: leaves of
// benchPerLeaf nodes (tier 1), spines of leavesPerSpine leaves (tier 2), one core (tier 3).
func setBenchTree(cache *hypernode.Cache, n, leavesPerSpine int) {
	leaves := (n + benchPerLeaf - 1) / benchPerLeaf
	var spines []string
	for s := 0; s*leavesPerSpine < leaves; s++ {
		var children []string
		for l := s * leavesPerSpine; l < min((s+1)*leavesPerSpine, leaves); l++ {
			var members []string
			for i := l * benchPerLeaf; i < min((l+1)*benchPerLeaf, n); i++ {
				members = append(members, benchNodeName(i))
			}
			name := fmt.Sprintf("leaf-%d", l)
			cache.SetHyperNode(hntesting.MakeHyperNode(name).Tier(1).Nodes(members...).Obj())
			children = append(children, name)
		}
		name := fmt.Sprintf("spine-%d", s)
		cache.SetHyperNode(hntesting.MakeHyperNode(name).Tier(2).Children(children...).Obj())
		spines = append(spines, name)
	}
	cache.SetHyperNode(hntesting.MakeHyperNode("core").Tier(3).Children(spines...).Obj())
}

// draBenchMember is member i of the benchmark gang: 1 CPU and 8 GPUs, from a claim generated
// from draBenchTemplate (dra) or as nvidia.com/gpu. A DRA member's status names its
// generated claim, as the resource claim controller writes it.
func draBenchMember(i int, dra bool) *v1.Pod {
	name := fmt.Sprintf("%s-%d", draBenchGroup, i)
	req := map[v1.ResourceName]string{v1.ResourceCPU: "1"}
	if !dra {
		req["nvidia.com/gpu"] = fmt.Sprint(draBenchGPUs)
	}
	pod := st.MakePod().Namespace(benchNamespace).Name(name).UID(name).SchedulerName("with-topology").
		Label(schedulingv1alpha1.PodGroupLabel, draBenchGroup).Req(req).Obj()
	if dra {
		pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To(draBenchTemplate)}}
		pod.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpus"}}
		pod.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: ptr.To(name + "-gpus")}}
	}
	return pod
}

// draBenchClaimSpec asks for 8 devices of the class.
func draBenchClaimSpec() resourceapi.ResourceClaimSpec {
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
		Requests: []resourceapi.DeviceRequest{{Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: draBenchClass, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: draBenchGPUs,
		}}},
	}}
}

// draBenchObjects are the DRA objects of the cluster: the class, the template, a slice per
// node and the members' generated claims (what the resource claim controller would create:
// controlled by the pod, annotated with the pod's claim name, unallocated).
func draBenchObjects(nodes []*v1.Node, members []*v1.Pod) []runtime.Object {
	objs := []runtime.Object{
		&resourceapi.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{Name: draBenchClass},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
				CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", draBenchClass)}}}},
		},
		&resourceapi.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: draBenchTemplate},
			Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: draBenchClaimSpec()},
		},
	}
	for _, n := range nodes {
		slice := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name + "-" + draBenchClass, UID: types.UID("slice-" + n.Name)},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:   draBenchClass,
				Pool:     resourceapi.ResourcePool{Name: n.Name, Generation: 1, ResourceSliceCount: 1},
				NodeName: ptr.To(n.Name),
			},
		}
		for i := range draBenchGPUs {
			slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i)})
		}
		objs = append(objs, slice)
	}
	for _, pod := range members {
		objs = append(objs, &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:   pod.Namespace,
				Name:        *pod.Status.ResourceClaimStatuses[0].ResourceClaimName,
				UID:         types.UID("claim-" + pod.Name),
				Annotations: map[string]string{resourceapi.PodResourceClaimAnnotation: "gpus"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
					Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			},
			Spec: draBenchClaimSpec(),
		})
	}
	return objs
}

// newDRABenchEnv builds the DRA benchmark cluster with DRA GPUs (dra) or device-plugin GPUs.
// With DRA, the DRA manager is kube-scheduler's (scheduler.go): an assume cache of the
// ResourceClaims, the ResourceSlice tracker (device taint rules as the gates say) and the
// DeviceClass lister of a fake clientset's informers, started and synced before it returns.
func newDRABenchEnv(b *testing.B, dra bool) *draBenchEnv {
	metrics.Register()
	ctx, cancel := context.WithCancel(context.Background())
	logger := klog.Background()
	tree := hypernode.NewCache(logger, nil)
	capacity := map[v1.ResourceName]string{v1.ResourceCPU: "64", v1.ResourceMemory: "512Gi", v1.ResourcePods: "110"}
	if !dra {
		capacity["nvidia.com/gpu"] = fmt.Sprint(draBenchGPUs)
	}
	var nodes []*v1.Node
	for i := range draBenchNodes {
		n := st.MakeNode().Name(benchNodeName(i)).Capacity(capacity).Obj()
		nodes = append(nodes, n)
		tree.SetNode(n)
	}
	setBenchTree(tree, draBenchNodes, draBenchLeavesPerSpine)

	gangs := gangstate.New()
	registry := gangs.Registry()
	registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: draBenchGroup, UID: "pg-" + draBenchGroup,
			Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":2}`}},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: draBenchGang},
	})
	e := &draBenchEnv{
		benchEnv: &benchEnv{ctx: ctx, snapshot: internalcache.NewSnapshot(nil, nodes)},
		dra:      dra,
		key:      podgroup.Key{Namespace: benchNamespace, Name: draBenchGroup},
	}
	for i := range draBenchGang {
		pod := draBenchMember(i, dra)
		registry.SetPod(nil, pod)
		e.members = append(e.members, pod)
	}

	var objs []runtime.Object
	if dra {
		objs = draBenchObjects(nodes, e.members)
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	// The options of the other benchmarks, on this client and its informers.
	opts := append(testFrameworkOptions(e.snapshot),
		frameworkruntime.WithClientSet(client), frameworkruntime.WithInformerFactory(factory))
	var synced []toolscache.DoneChecker
	var sliceTracker *resourceslicetracker.Tracker
	if dra {
		claims := assumecache.NewAssumeCache(logger, factory.Resource().V1().ResourceClaims().Informer(), "ResourceClaim", "", nil)
		synced = append(synced, claims.AddEventHandler(toolscache.ResourceEventHandlerFuncs{}).HasSyncedChecker())
		trackerOpts := resourceslicetracker.Options{
			EnableDeviceTaintRules:   utilfeature.DefaultFeatureGate.Enabled(features.DRADeviceTaintRules),
			EnableConsumableCapacity: utilfeature.DefaultFeatureGate.Enabled(features.DRAConsumableCapacity),
			SliceInformer:            factory.Resource().V1().ResourceSlices(),
			KubeClient:               client,
		}
		if trackerOpts.EnableDeviceTaintRules {
			trackerOpts.TaintInformer = factory.Resource().V1().DeviceTaintRules()
		}
		var err error
		if sliceTracker, err = resourceslicetracker.StartTracker(ctx, trackerOpts); err != nil {
			b.Fatal(err)
		}
		synced = append(synced, sliceTracker.HasSyncedChecker())
		manager := dynamicresources.NewDRAManager(ctx, claims, sliceTracker, factory)
		// As kube-scheduler's event handlers do: the extended resource cache follows the
		// DeviceClasses (DRAExtendedResource).
		if erCache, ok := manager.DeviceClassResolver().(*extendedresourcecache.ExtendedResourceCache); ok && erCache != nil {
			reg, err := factory.Resource().V1().DeviceClasses().Informer().AddEventHandler(erCache)
			if err != nil {
				b.Fatal(err)
			}
			synced = append(synced, reg.HasSyncedChecker())
		}
		opts = append(opts, frameworkruntime.WithSharedDRAManager(manager))
	}

	var with, vanilla schedconfig.KubeSchedulerProfile
	if dra {
		with, vanilla = draBenchProfiles(b)
	} else {
		with, vanilla = benchProfiles(b)
	}
	reg := plugins.NewInTreeRegistry()
	reg[Name] = func(_ context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		e.plugin = newPlugin(*obj.(*config.NetworkTopologyAwareArgs), h, tree, gangs)
		// The process's device inventory, as pkg/plugins starts it on the scheduler's informers.
		inventory := devices.NewInventory()
		if err := inventory.Run(factory); err != nil {
			return nil, err
		}
		e.plugin.useInventory(inventory)
		return e.plugin, nil
	}
	newDRA := reg[dynamicresources.Name]
	reg[dynamicresources.Name] = func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		pl, err := newDRA(ctx, obj, h)
		if h.ProfileName() == "vanilla" {
			e.draPlugin = pl
		}
		return pl, err
	}
	var err error
	if e.with, err = frameworkruntime.NewFramework(ctx, reg, &with, opts...); err != nil {
		b.Fatal(err)
	}
	if e.vanilla, err = frameworkruntime.NewFramework(ctx, reg, &vanilla, opts...); err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	b.Cleanup(func() {
		cancel()
		factory.Shutdown()
		if sliceTracker != nil {
			sliceTracker.Stop()
		}
	})
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			b.Fatalf("informer of %v did not sync", typ)
		}
	}
	// WaitFor logs every informer it waited for: not in the benchmark's output (the zero
	// logger discards).
	if !toolscache.WaitFor(klog.NewContext(ctx, klog.Logger{}), "DRA manager", synced...) {
		b.Fatal("the DRA manager did not sync")
	}
	if dra {
		// Everything the DRA manager serves is there.
		if got, err := e.with.SharedDRAManager().ResourceSlices().ListWithDeviceTaintRules(); err != nil || len(got) != draBenchNodes {
			b.Fatalf("DRA manager lists %d slices (%v), want %d", len(got), err, draBenchNodes)
		}
		if got, err := e.with.SharedDRAManager().ResourceClaims().List(); err != nil || len(got) != draBenchGang {
			b.Fatalf("DRA manager lists %d claims (%v), want %d", len(got), err, draBenchGang)
		}
		if e.draPlugin == nil {
			b.Fatal("the vanilla profile has no DynamicResources plugin")
		}
		// The inventory's handlers run after the informers' sync: every device counted
		// before the clock starts, so that no run times the inventory being built.
		want := [2]int64{draBenchNodes * draBenchGPUs, 0}
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return e.plugin.inventory.Totals()[draBenchClass] == want, nil
		}); err != nil {
			b.Fatalf("the device inventory counts %v, want %v", e.plugin.inventory.Totals(), want)
		}
	}
	return e
}

// plan runs the first member's PreFilter in the topology profile, which plans the gang, the
// previous plan dropped first (as BenchmarkPlanWithCapacitySimulation does).
func (e *draBenchEnv) plan(b *testing.B) {
	e.plugin.invalidate(klog.Background(), e.key)
	state := framework.NewCycleState()
	if _, status, _ := e.with.RunPreFilterPlugins(e.ctx, state, e.members[0]); !status.IsSuccess() {
		b.Fatal(status)
	}
}

// checkPlan fails unless the gang's plan places every member at tier 2 on a node of its own:
// a node's 8 GPUs hold one 8-GPU member, so two members on a node is the overcount of a
// simulation blind to the devices its copies took. With DRA it also counts the members one
// node holds (CountFits, as the plan's simulation counts them): 1.
func (e *draBenchEnv) checkPlan(b *testing.B) {
	plan := e.plugin.planOf(e.key)
	if plan == nil {
		b.Fatalf("no plan for %s", e.key)
	}
	if plan.Tier != 2 || len(plan.PodNode) != draBenchGang || len(plan.PodLeaf) != draBenchGang {
		b.Fatalf("plan at tier %d in %s with %d members on nodes, %d in leaves; want tier 2, %d members",
			plan.Tier, plan.Domain, len(plan.PodNode), len(plan.PodLeaf), draBenchGang)
	}
	perNode := map[string]int{}
	for _, node := range plan.PodNode {
		perNode[node]++
	}
	for node, n := range perNode {
		if n != 1 {
			b.Fatalf("the plan puts %d members on %s, whose %d GPUs hold one", n, node, draBenchGPUs)
		}
	}
	if len(perNode) != draBenchGang {
		b.Fatalf("the plan uses %d distinct nodes, want %d", len(perNode), draBenchGang)
	}
	pod := e.members[0]
	state, status := e.plugin.simulationState(e.ctx, pod)
	if !status.IsSuccess() {
		b.Fatal(status)
	}
	ni, err := e.snapshot.NodeInfos().Get(benchNodeName(0))
	if err != nil {
		b.Fatal(err)
	}
	if got := e.plugin.countFits(e.ctx, state, pod, ni, draBenchGang, false); got != 1 {
		b.Fatalf("%s holds %d members, want 1", ni.Node().Name, got)
	}
}

// benchmarkPlanGang is BenchmarkPlanWithCapacitySimulation on the DRA benchmark cluster: the
// first member's PreFilter, which simulates the profile's Filter plugins and plans the
// 1,000-pod gang, re-planned every iteration. The plan is checked before and after.
func benchmarkPlanGang(b *testing.B, dra bool) {
	e := newDRABenchEnv(b, dra)
	e.plan(b)
	e.checkPlan(b)
	b.ReportAllocs()
	for b.Loop() {
		e.plan(b)
	}
	b.ReportMetric(float64(e.plugin.lastSimulated.Load()), "simulated-nodes")
	e.checkPlan(b)
	e.plugin.invalidate(klog.Background(), e.key)
}

// BenchmarkPlanDRAGang plans the 1,000-pod gang whose members claim 8 DRA GPUs each on 5,000
// nodes publishing 8 GPUs each as DRA devices (DynamicResources in the profile).
func BenchmarkPlanDRAGang(b *testing.B) { benchmarkPlanGang(b, true) }

// BenchmarkPlanDevicePluginGang plans the same gang requesting nvidia.com/gpu: 8 on 5,000
// nodes advertising nvidia.com/gpu: 8 (no DRA).
func BenchmarkPlanDevicePluginGang(b *testing.B) { benchmarkPlanGang(b, false) }

// filterAll runs the PreFilter plugins for pod on a fresh cycle state and the Filter plugins
// (kube-scheduler's, with nominated pods) on every node, on the profile's parallelizer; it
// returns how many nodes pass. Each cycle evaluates every node, not kube-scheduler's
// adaptive share of them.
func (e *draBenchEnv) filterAll(b *testing.B, fw framework.Framework, pod *v1.Pod) int {
	state := framework.NewCycleState()
	result, status, _ := fw.RunPreFilterPlugins(e.ctx, state, pod)
	if !status.IsSuccess() {
		b.Fatalf("PreFilter: %v", status)
	}
	if !result.AllNodes() {
		b.Fatalf("PreFilter narrowed the nodes to %d", len(result.NodeNames))
	}
	nodes, err := e.snapshot.NodeInfos().List()
	if err != nil {
		b.Fatal(err)
	}
	var feasible atomic.Int32
	fw.Parallelizer().Until(e.ctx, len(nodes), func(i int) {
		if fw.RunFilterPluginsWithNominatedPods(e.ctx, state, pod, nodes[i]).IsSuccess() {
			feasible.Add(1)
		}
	}, "Filter")
	return int(feasible.Load())
}

// filterDRAOnly runs only kube-scheduler's DynamicResources plugin for pod: PreFilter (the
// allocator over every slice) and Filter on every node (an allocation per node), on the
// profile's parallelizer; it returns how many nodes pass.
func (e *draBenchEnv) filterDRAOnly(b *testing.B, pod *v1.Pod) int {
	nodes, err := e.snapshot.NodeInfos().List()
	if err != nil {
		b.Fatal(err)
	}
	state := framework.NewCycleState()
	if _, status := e.draPlugin.(fwk.PreFilterPlugin).PreFilter(e.ctx, state, pod, nodes); !status.IsSuccess() {
		b.Fatalf("DynamicResources PreFilter: %v", status)
	}
	filter := e.draPlugin.(fwk.FilterPlugin)
	var feasible atomic.Int32
	e.vanilla.Parallelizer().Until(e.ctx, len(nodes), func(i int) {
		if filter.Filter(e.ctx, state, pod, nodes[i]).IsSuccess() {
			feasible.Add(1)
		}
	}, "Filter")
	return int(feasible.Load())
}

// BenchmarkDRAMemberCycle is one DRA member's PreFilter and Filter on all 5,000 nodes in
// kube-scheduler's default profile with DynamicResources (no NetworkTopologyAware, no plan):
// every plugin, and DynamicResources alone (the scheduler's DynamicResources time per member).
func BenchmarkDRAMemberCycle(b *testing.B) {
	e := newDRABenchEnv(b, true)
	b.Run("all-plugins", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if n := e.filterAll(b, e.vanilla, e.members[i%draBenchGang]); n != draBenchNodes {
				b.Fatalf("%d feasible nodes, want %d", n, draBenchNodes)
			}
			i++
		}
	})
	b.Run("DynamicResources", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if n := e.filterDRAOnly(b, e.members[i%draBenchGang]); n != draBenchNodes {
				b.Fatalf("%d feasible nodes, want %d", n, draBenchNodes)
			}
			i++
		}
	})
}

// BenchmarkDevicePluginMemberCycle is BenchmarkDRAMemberCycle's all-plugins for the member
// requesting nvidia.com/gpu, in the default profile without DynamicResources.
func BenchmarkDevicePluginMemberCycle(b *testing.B) {
	e := newDRABenchEnv(b, false)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if n := e.filterAll(b, e.vanilla, e.members[i%draBenchGang]); n != draBenchNodes {
			b.Fatalf("%d feasible nodes, want %d", n, draBenchNodes)
		}
		i++
	}
}
