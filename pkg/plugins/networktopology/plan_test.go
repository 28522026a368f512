package networktopology

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// planEnv is the seed 001 tree (s0..s3 leaves of two 1-CPU nodes) in a framework running the
// default profile plus NetworkTopologyAware, with gangs of 1-CPU pods hard at tier 1.
type planEnv struct {
	ctx      context.Context
	cache    *hypernode.Cache
	fw       framework.Framework
	plugin   *NetworkTopologyAware
	registry *podgroup.Registry
	gangs    *gangstate.Tracker
	snapshot *internalcache.Snapshot
	// activated records the pods the plugin activates.
	activated *recordingActivator
}

func newPlanEnv(t testing.TB, gangs map[string]int) *planEnv {
	return newPlanEnvWith(t, gangs, nil)
}

// newPlanEnvWith is newPlanEnv with a change to each node before the framework sees it.
func newPlanEnvWith(t testing.TB, gangs map[string]int, changeNode func(*v1.Node)) *planEnv {
	return newPlanEnvWithPods(t, gangs, changeNode, nil)
}

// newPlanEnvWithPods is newPlanEnvWith with pods already on the nodes of the framework's
// snapshot.
func newPlanEnvWithPods(t testing.TB, gangs map[string]int, changeNode func(*v1.Node), running []*v1.Pod) *planEnv {
	metrics.Register()
	logger, ctx := ktesting.NewTestContext(t)
	ctx = klog.NewContext(ctx, logger)
	cache := hypernode.NewCache(logger, nil)
	var nodes []*v1.Node
	for i := range 8 {
		n := st.MakeNode().Name(fmt.Sprintf("node-%d", i)).Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "4Gi", v1.ResourcePods: "10"}).Obj()
		if changeNode != nil {
			changeNode(n)
		}
		nodes = append(nodes, n)
		cache.SetNode(n)
	}
	for l := range 4 {
		cache.SetHyperNode(hntesting.MakeHyperNode(fmt.Sprintf("s%d", l)).Tier(1).Nodes(fmt.Sprintf("node-%d", 2*l), fmt.Sprintf("node-%d", 2*l+1)).Obj())
	}
	tracker := gangstate.New()
	e := &planEnv{ctx: ctx, cache: cache, registry: tracker.Registry(), gangs: tracker, snapshot: internalcache.NewSnapshot(running, nodes), activated: &recordingActivator{}}
	for name, size := range gangs {
		e.registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("pg-" + name),
				Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: `{"highestTierAllowed":1}`}},
			Spec: schedulingv1alpha1.PodGroupSpec{MinMember: int32(size)},
		})
		for i := range size {
			e.registry.SetPod(nil, e.pod(name, i))
		}
	}
	with, _ := benchProfiles(t)
	reg := plugins.NewInTreeRegistry()
	reg[Name] = func(_ context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		e.plugin = newPlugin(*obj.(*config.NetworkTopologyAwareArgs), h, cache, e.gangs)
		return e.plugin, nil
	}
	fw, err := frameworkruntime.NewFramework(ctx, reg, &with, append(testFrameworkOptions(e.snapshot), frameworkruntime.WithPodActivator(e.activated))...)
	if err != nil {
		t.Fatal(err)
	}
	e.fw = fw
	return e
}

// elasticGang adds a hard tier-1 gang of the given members with a smaller minMember.
func (e *planEnv) elasticGang(name string, minMember int32, members int) {
	e.registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("pg-" + name),
			Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: `{"highestTierAllowed":1}`}},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: minMember},
	})
	for i := range members {
		e.registry.SetPod(nil, e.pod(name, i))
	}
}

func (e *planEnv) pod(group string, i int) *v1.Pod {
	name := fmt.Sprintf("%s-%d", group, i)
	return st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedulingv1alpha1.PodGroupLabel, group).
		Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()
}

// preFilter returns the nodes the member is narrowed to, sorted.
func (e *planEnv) preFilter(t *testing.T, pod *v1.Pod) (fwk.CycleState, []string) {
	t.Helper()
	state := framework.NewCycleState()
	result, status, _ := e.fw.RunPreFilterPlugins(e.ctx, state, pod)
	if !status.IsSuccess() {
		t.Fatalf("PreFilter(%s): %v", pod.Name, status)
	}
	names := result.NodeNames.UnsortedList()
	sort.Strings(names)
	return state, names
}

// wantPlanned checks a member's PreFilter answer: it passed, narrowed to nodes, after a plan
// that simulated that many nodes.
func (e *planEnv) wantPlanned(t *testing.T, result *fwk.PreFilterResult, status *fwk.Status, nodes []string, simulated int) {
	t.Helper()
	if !status.IsSuccess() {
		t.Fatalf("PreFilter: %v", status)
	}
	got := result.NodeNames.UnsortedList()
	sort.Strings(got)
	if diff := cmp.Diff(nodes, got); diff != "" {
		t.Errorf("planned nodes (-want,+got):\n%s", diff)
	}
	if got := e.plugin.lastSimulated.Load(); got != int64(simulated) {
		t.Errorf("simulated %d nodes, want %d", got, simulated)
	}
}

func (e *planEnv) plan(key string) *gangstate.Plan {
	return e.plugin.planOf(podgroup.Key{Namespace: "ns", Name: key})
}

func (e *planEnv) promised(key string) map[string]int {
	e.plugin.gangs.Lock()
	defer e.plugin.gangs.Unlock()
	out := map[string]int{}
	if plan := e.plugin.gangs.PlanLocked(podgroup.Key{Namespace: "ns", Name: key}); plan != nil {
		for leaf, n := range plan.Promised {
			out[leaf] = n
		}
	}
	return out
}

// TestPlanReuseLedgerAndInvalidation: a gang is planned once and its members reuse the plan;
// a second gang plans around the first one's promised slots; Reserve turns promises into
// reservations idempotently; Unreserve of a member reserved under the plan drops it, a late
// Unreserve from an earlier plan does not.
func TestPlanReuseLedgerAndInvalidation(t *testing.T) {
	e := newPlanEnv(t, map[string]int{"a": 2, "b": 2})
	stateA0, nodesA0 := e.preFilter(t, e.pod("a", 0))
	// Each member is narrowed to the node of s0 it is nominated on.
	if diff := cmp.Diff([]string{"node-0"}, nodesA0); diff != "" {
		t.Fatalf("gang a (-want,+got):\n%s", diff)
	}
	planA := e.plan("a")
	if _, nodesA1 := e.preFilter(t, e.pod("a", 1)); !cmp.Equal(nodesA1, []string{"node-1"}) || e.plan("a") != planA {
		t.Errorf("the second member of gang a did not reuse the plan: %v", nodesA1)
	}
	// s0's two slots are promised to gang a: gang b must plan elsewhere.
	if _, nodesB0 := e.preFilter(t, e.pod("b", 0)); !cmp.Equal(nodesB0, []string{"node-2"}) {
		t.Errorf("gang b's first member narrowed to %v, want node-2 of s1: s0 is promised to gang a", nodesB0)
	}

	// Reserve is idempotent.
	e.fw.RunReservePluginsReserve(e.ctx, stateA0, e.pod("a", 0), "node-0")
	e.plugin.Reserve(e.ctx, stateA0, e.pod("a", 0), "node-0")
	if diff := cmp.Diff(map[string]int{"s0": 1}, e.promised("a")); diff != "" {
		t.Errorf("promised after reserving a-0 twice (-want,+got):\n%s", diff)
	}
	// A late Unreserve of a member that did not reserve under this plan changes nothing.
	e.plugin.Unreserve(e.ctx, framework.NewCycleState(), e.pod("a", 1), "node-1")
	if e.plan("a") != planA {
		t.Error("an Unreserve of a member not reserved under the plan dropped it")
	}
	// The reserved member's Unreserve drops gang a's plan; gang b's stays.
	planB := e.plan("b")
	e.plugin.Unreserve(e.ctx, stateA0, e.pod("a", 0), "node-0")
	if e.plan("a") != nil {
		t.Error("gang a's plan survived the Unreserve of a member reserved under it")
	}
	if e.plan("b") != planB {
		t.Error("gang b's plan changed")
	}
}

// TestPlanDroppedWhenThePodGroupChanges: an edit of the PodGroup's constraint between two
// members' cycles is planned for again; the second member does not follow the old plan.
func TestPlanDroppedWhenThePodGroupChanges(t *testing.T) {
	e := newPlanEnv(t, map[string]int{"a": 2})
	e.preFilter(t, e.pod("a", 0))
	before := e.plan("a")
	e.registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "pg-a",
			Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"soft","highestTierAllowed":1}`}},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2},
	})
	e.preFilter(t, e.pod("a", 1))
	after := e.plan("a")
	if after == before || after.Revision != e.registry.Info(podgroup.Key{Namespace: "ns", Name: "a"}).Revision {
		t.Errorf("the member after the edit used the plan made before it (revision %d)", before.Revision)
	}
}

// TestPlannedMemberGone: a planned member deleted before it reserved drops its gang's plan
// (its promise would stay open for nobody); a reserved member's deletion leaves the plan to
// its Unreserve.
func TestPlannedMemberGone(t *testing.T) {
	e := newPlanEnv(t, map[string]int{"a": 2})
	state, _ := e.preFilter(t, e.pod("a", 0))
	e.fw.RunReservePluginsReserve(e.ctx, state, e.pod("a", 0), "node-0")
	plan := e.plan("a")
	e.plugin.plannedMemberGone(e.pod("a", 0))
	if e.plan("a") != plan {
		t.Error("the deletion of a reserved member dropped the plan")
	}
	e.plugin.plannedMemberGone(e.pod("a", 1))
	if e.plan("a") != nil {
		t.Error("the plan survived the deletion of a planned member that had not reserved")
	}
}

type noActivation struct{}

func (*noActivation) Activate(klog.Logger, map[string]*v1.Pod) {}

// recordingActivator records the names of the pods activated, sorted per call.
type recordingActivator struct {
	mu    sync.Mutex
	calls [][]string
}

func (a *recordingActivator) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, names)
}

// take returns the calls recorded since the last take.
func (a *recordingActivator) take() [][]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	calls := a.calls
	a.calls = nil
	return calls
}

// TestLazyPlanMatchesFullSimulation: BinPack plans start from resource bounds and simulate only
// the domains they pick. Tainted nodes have room by resources but take no member: the plan
// must still avoid them, as a full simulation would, and an unsatisfiable gang must be
// explained with real capacities.
func TestLazyPlanMatchesFullSimulation(t *testing.T) {
	taint := func(names ...string) func(*v1.Node) {
		return func(n *v1.Node) {
			for _, name := range names {
				if n.Name == name {
					n.Spec.Taints = []v1.Taint{{Key: "maintenance", Effect: v1.TaintEffectNoSchedule}}
				}
			}
		}
	}
	tests := []struct {
		name          string
		tainted       []string
		wantNodes     []string
		wantSimulated int
		wantErr       string
	}{
		{
			name:          "untainted: the first leaf, two nodes simulated",
			wantNodes:     []string{"node-0"},
			wantSimulated: 2,
		},
		{
			name:          "the first leaf tainted: its bound misleads once, then s1",
			tainted:       []string{"node-1"},
			wantNodes:     []string{"node-2"},
			wantSimulated: 4,
		},
		{
			name:          "every leaf tainted: every node simulated, real capacities in the message",
			tainted:       []string{"node-0", "node-2", "node-4", "node-6"},
			wantSimulated: 8,
			wantErr:       "hard topology (tier<=1): no HyperNode can host 2 pods; tier 1: s0 1/2, s1 1/2 (+2 more)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newPlanEnvWith(t, map[string]int{"g": 2}, taint(tc.tainted...))
			state := framework.NewCycleState()
			result, status, _ := e.fw.RunPreFilterPlugins(e.ctx, state, e.pod("g", 0))
			if tc.wantErr != "" {
				if status.IsSuccess() || status.Message() != tc.wantErr {
					t.Fatalf("PreFilter: %v, want %q", status, tc.wantErr)
				}
				if got := e.plugin.lastSimulated.Load(); got != int64(tc.wantSimulated) {
					t.Errorf("simulated %d nodes, want %d", got, tc.wantSimulated)
				}
				return
			}
			e.wantPlanned(t, result, status, tc.wantNodes, tc.wantSimulated)
		})
	}
}

// newRunningJobEnv is a plan env with job ns/e (minMember 2, hard at tier 1, the given
// sub-group policy over the "partition" label) whose members e-0 and e-1 (1 CPU, partition
// i) run on node-0 and node-1, filling s0; pod(i) builds member e-i.
func newRunningJobEnv(t *testing.T, policy string) (*planEnv, func(int) *v1.Pod, []*v1.Pod) {
	pod := func(i int) *v1.Pod {
		name := fmt.Sprintf("e-%d", i)
		return st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedulingv1alpha1.PodGroupLabel, "e").
			Label("partition", fmt.Sprint(i)).Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()
	}
	running := []*v1.Pod{pod(0), pod(1)}
	running[0].Spec.NodeName, running[1].Spec.NodeName = "node-0", "node-1"
	e := newPlanEnvWithPods(t, nil, nil, running)
	e.registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "e", UID: "pg-e",
			Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: `{"highestTierAllowed":1}`,
				podgroup.SubGroupPolicyAnnotation: policy}},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2},
	})
	e.registry.SetPod(nil, running[0])
	e.registry.SetPod(nil, running[1])
	return e, pod, running
}

// TestLeftOutMembersShareOnePlan: a job of 4 members in sub-groups of 1 (minMember 2, hard
// at tier 1, a leaf holds 2) has 2 members running in s0: planned around them, the other
// two sub-groups find no room, so the plan places nobody. The second left-out member gets
// the same answer without planning, until something that can make room happens (a node
// changed, an assigned pod gone, promised slots released, the PodGroup changed): then one
// plans again, and the next reuses that. (All left-out members are activated together once
// the planned ones reserve: without this, each of them planned again.)
func TestLeftOutMembersShareOnePlan(t *testing.T) {
	e, pod, running := newRunningJobEnv(t, `[{"name":"tp","subGroupSize":1,"matchLabelKeys":["partition"]}]`)
	key := podgroup.Key{Namespace: "ns", Name: "e"}
	e.registry.SetPod(nil, pod(2))
	e.registry.SetPod(nil, pod(3))
	leftOut := func(i int) *gangstate.Plan {
		t.Helper()
		_, status, _ := e.fw.RunPreFilterPlugins(e.ctx, framework.NewCycleState(), pod(i))
		if want := fmt.Sprintf("sub-group tp-%d does not fit next to the job's other sub-groups in s0 now", i); !strings.Contains(status.Message(), want) {
			t.Fatalf("PreFilter(e-%d) = %v, want %q", i, status, want)
		}
		return e.plan("e")
	}
	first := leftOut(2)
	if !first.WaitsForRoom || len(first.PodLeaf) != 0 {
		t.Fatalf("plan around the running members: waitsForRoom %v, %d placed; want a plan that places nobody", first.WaitsForRoom, len(first.PodLeaf))
	}
	if got := leftOut(3); got != first {
		t.Error("the second left-out member planned again with nothing changed")
	}
	// Room freed outside s0 (the job may not grow beyond it) changes nothing.
	e.plugin.freedOn("node-5", podgroup.Key{Namespace: "ns", Name: "other"}, "gone-5")
	if got := leftOut(3); got != first {
		t.Error("an assigned pod gone in s2, outside the job's room, made the left-out member plan again")
	}
	e.plugin.promisesReleased(klog.Background(), []string{"s2"})
	e.plugin.gangs.Lock()
	deferring := e.plugin.gangs.DeferringLocked().Has(key)
	e.plugin.gangs.Unlock()
	if !deferring {
		t.Error("promises released in s2 took the gang off the deferring gangs: a release in s0 would not wake it")
	}
	if got := leftOut(3); got != first {
		t.Error("promises released in s2, outside the job's room, made the left-out member plan again")
	}
	for _, change := range []struct {
		name string
		do   func()
	}{
		{"a node changed", e.plugin.markAllStale},
		{"an assigned pod gone in s0", func() { e.plugin.freedOn("node-1", podgroup.Key{Namespace: "ns", Name: "other"}, "gone-1") }},
		{"promised slots released in s0", func() { e.plugin.promisesReleased(klog.Background(), []string{"s0"}) }},
		{"the PodGroup changed", func() {
			pg := e.registry.Info(key).PodGroup.DeepCopy()
			pg.Spec.ScheduleTimeoutSeconds = ptr.To[int32](30 + int32(len(pg.Annotations)))
			pg.Annotations["example.com/n"] += "x"
			e.registry.SetPodGroup(pg)
		}},
		{"the tree changed", func() { e.cache.SetHyperNode(hntesting.MakeHyperNode("s9").Tier(1).Obj()) }},
		{"the plan is older than leftOutReuse", func() {
			e.plugin.gangs.Lock()
			e.plugin.gangs.PlanLocked(key).Made = time.Now().Add(-leftOutReuse)
			e.plugin.gangs.Unlock()
		}},
		{"a member it was made around unreserved", func() {
			e.plugin.Unreserve(e.ctx, framework.NewCycleState(), running[0], "node-0")
			if e.plan("e") != nil {
				t.Error("the plan that places nobody survived the Unreserve of a member it was made around")
			}
		}},
	} {
		before := e.plan("e")
		change.do()
		again := leftOut(3)
		if again == before {
			t.Errorf("%s: the left-out member did not plan again", change.name)
		}
		if got := leftOut(2); got != again {
			t.Errorf("%s: the next left-out member planned again", change.name)
		}
	}
}

// TestLeftOutMemberTheRegistryHasNotSeen: kube-scheduler's queue and the registry watch
// pods through different handlers, so a member can be planned before the registry has it. Its
// sub-group must still count as one of the job's: minSubGroups 2 is met by the 2 running
// sub-groups, so the newcomer's sub-group is left out to wait for room, not refused as if
// the job could not reach minSubGroups without it (a flake of the integration test
// TestSubGroupsMinSubGroups under load).
func TestLeftOutMemberTheRegistryHasNotSeen(t *testing.T) {
	e, pod, _ := newRunningJobEnv(t, `[{"name":"tp","subGroupSize":1,"minSubGroups":2,"matchLabelKeys":["partition"]}]`)
	state := framework.NewCycleState()
	_, status, _ := e.fw.RunPreFilterPlugins(e.ctx, state, pod(2)) // not in the registry
	want := "gang ns/e: sub-group tp-2 does not fit next to the job's other sub-groups in s0 now"
	if status.Code() != fwk.UnschedulableAndUnresolvable || status.Message() != want {
		t.Fatalf("PreFilter(e-2) = %v %q, want UnschedulableAndUnresolvable %q", status.Code(), status.Message(), want)
	}
	if !gangstate.Deferred(state) {
		t.Error("e-2 is not marked as left out by its plan")
	}
}

// TestRoomArea: where a job with placed members may grow, on seed 001's tree (leaves s0..s3,
// spines s4 and s5 at tier 2, s6 at tier 3, the virtual root at tier 4).
func TestRoomArea(t *testing.T) {
	nodes := map[string]labels.Set{}
	for i := range 8 {
		nodes[fmt.Sprintf("node-%d", i)] = labels.Set{}
	}
	tree := hypernode.Build(nodes, hntesting.Seed001()).Snapshot()
	for _, tc := range []struct {
		placed  []string
		maxTier int
		soft    bool
		want    string
	}{
		{[]string{"node-0"}, 1, false, "s0"},
		{[]string{"node-0"}, 2, false, "s4"},
		{[]string{"node-0", "node-2"}, 2, false, "s4"},
		{[]string{"node-0"}, 3, false, "s6"},
		{[]string{"node-0"}, 4, false, hypernode.VirtualRootName},
		{[]string{"node-0"}, 1, true, hypernode.VirtualRootName},
		{nil, 1, false, hypernode.VirtualRootName},
	} {
		if got := roomArea(tree, tc.placed, tc.maxTier, tc.soft); got != tc.want {
			t.Errorf("roomArea(%v, tier %d, soft %v) = %s, want %s", tc.placed, tc.maxTier, tc.soft, got, tc.want)
		}
	}
}
