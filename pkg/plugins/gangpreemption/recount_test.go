package gangpreemption

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/plugintesting"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

const hostnameKey = v1.LabelHostname

// antiAffinity is a required anti-affinity against the pods of gang "train" across key.
func antiAffinity(key string) *v1.Affinity {
	return &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{schedulingv1alpha1.PodGroupLabel: "train"}},
		TopologyKey:   key,
	}}}}
}

// TestRecountScope: the nodes counted again when a unit is given back. n0 and n1 are zone a,
// n2 and n3 zone b, n4 has no zone.
func TestRecountScope(t *testing.T) {
	clones := map[string]fwk.NodeInfo{}
	for i, zone := range []string{"a", "a", "b", "b", ""} {
		name := fmt.Sprintf("n%d", i)
		node := st.MakeNode().Name(name).Label(hostnameKey, name).Obj()
		if zone != "" {
			node.Labels["zone"] = zone
		}
		ni := framework.NewNodeInfo()
		ni.SetNode(node)
		clones[name] = ni
	}
	shape := func(edit func(*v1.Pod, fwk.CycleState)) view {
		v := view{pod: st.MakePod().Name("train-0").Label(schedulingv1alpha1.PodGroupLabel, "train").Obj(), state: framework.NewCycleState()}
		if edit != nil {
			edit(v.pod, v.state)
		}
		return v
	}
	members := func(edit func(*v1.Pod, fwk.CycleState)) []view { return []view{shape(edit)} }
	victim := func(edit func(*v1.Pod), nodes ...string) *unit {
		u := &unit{key: "victim"}
		for _, node := range nodes {
			p := st.MakePod().Name("low-" + node).Node(node).Obj()
			if edit != nil {
				edit(p)
			}
			u.pods = append(u.pods, placed{pod: p, node: node})
		}
		return u
	}
	withAntiAffinity := func(key string) func(*v1.Pod, fwk.CycleState) {
		return func(p *v1.Pod, _ fwk.CycleState) { p.Spec.Affinity = antiAffinity(key) }
	}
	mounting := func(claim string) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{
				PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
		}
	}
	all := []string{"n0", "n1", "n2", "n3", "n4"}
	for _, tc := range []struct {
		name  string
		views []view
		unit  *unit
		want  []string
	}{
		{name: "no constraint across nodes", views: members(nil), unit: victim(nil, "n0"), want: []string{"n0"}},
		{name: "members' hostname anti-affinity", views: members(withAntiAffinity(hostnameKey)),
			unit: victim(nil, "n0"), want: []string{"n0"}},
		{name: "members' zone anti-affinity", views: members(withAntiAffinity("zone")),
			unit: victim(nil, "n0"), want: []string{"n0", "n1"}},
		{name: "members' zone anti-affinity, a node without a zone", views: members(withAntiAffinity("zone")),
			unit: victim(nil, "n4"), want: []string{"n4"}},
		{name: "a later shape's zone anti-affinity", views: []view{shape(nil), shape(withAntiAffinity("zone"))},
			unit: victim(nil, "n0"), want: []string{"n0", "n1"}},
		{name: "the victim's zone anti-affinity", views: members(nil),
			unit: victim(func(p *v1.Pod) { p.Spec.Affinity = antiAffinity("zone") }, "n2"), want: []string{"n2", "n3"}},
		{name: "a gang on two zones", views: members(withAntiAffinity("zone")),
			unit: victim(nil, "n0", "n2"), want: []string{"n0", "n1", "n2", "n3"}},
		{name: "a gang with a pod outside the domain", views: members(withAntiAffinity("zone")),
			unit: victim(nil, "n0", "elsewhere"), want: []string{"n0", "n1"}},
		{name: "members' required affinity", views: members(func(p *v1.Pod, _ fwk.CycleState) {
			p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: antiAffinity("zone").PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution}}
		}), unit: victim(nil, "n0"), want: all},
		{name: "members' DoNotSchedule spread", views: members(func(p *v1.Pod, _ fwk.CycleState) {
			p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: v1.DoNotSchedule}}
		}), unit: victim(nil, "n0"), want: all},
		{name: "members' ScheduleAnyway spread", views: members(func(p *v1.Pod, _ fwk.CycleState) {
			p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: v1.ScheduleAnyway}}
		}), unit: victim(nil, "n0"), want: []string{"n0"}},
		{name: "the profile's DoNotSchedule default spread (PodTopologySpread's state)", views: members(func(_ *v1.Pod, state fwk.CycleState) {
			state.Write(spreadStateKey, spreadState{})
		}), unit: victim(nil, "n0"), want: all},
		{name: "a victim mounting a member's claim", views: members(func(p *v1.Pod, _ fwk.CycleState) { mounting("checkpoints")(p) }),
			unit: victim(mounting("checkpoints"), "n0"), want: all},
		{name: "a victim mounting another claim", views: members(func(p *v1.Pod, _ fwk.CycleState) { mounting("checkpoints")(p) }),
			unit: victim(mounting("scratch"), "n0"), want: []string{"n0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scope := newRecountScope(tc.views, clones)
			if diff := cmp.Diff(tc.want, visited(scope, tc.unit)); diff != "" {
				t.Errorf("nodes counted again (-want,+got):\n%s", diff)
			}
		})
	}
	// One scope for a domain's give-backs: a unit's own keys do not stay for the next.
	scope := newRecountScope(members(withAntiAffinity(hostnameKey)), clones)
	for _, step := range []struct {
		unit *unit
		want []string
	}{
		{victim(func(p *v1.Pod) { p.Spec.Affinity = antiAffinity("zone") }, "n2"), []string{"n2", "n3"}},
		{victim(nil, "n0"), []string{"n0"}},
		{victim(func(p *v1.Pod) { p.Spec.Affinity = antiAffinity("zone") }, "n1"), []string{"n0", "n1"}},
	} {
		if diff := cmp.Diff(step.want, visited(scope, step.unit)); diff != "" {
			t.Errorf("%s: nodes counted again (-want,+got):\n%s", step.unit.pods[0].pod.Name, diff)
		}
	}
}

// spreadState stands for PodTopologySpread's PreFilter state.
type spreadState struct{}

func (spreadState) Clone() fwk.StateData { return spreadState{} }

// visited returns the nodes the scope visits for the unit.
func visited(scope *recountScope, u *unit) []string {
	got := sets.New[string]()
	scope.visit(u, func(node string) { got.Insert(node) })
	return sets.List(got)
}

// simulationEnv runs a simulation with kube-scheduler's default Filter plugins (without
// DynamicResources) on nodes of 8 CPUs labelled with their hostname and zone (zones[i] for
// node-i).
type simulationEnv struct {
	ctx   context.Context
	fw    framework.Framework
	nodes map[string]fwk.NodeInfo
	names []string
}

func newSimulationEnv(tb testing.TB, zones []string, pods []*v1.Pod) *simulationEnv {
	tb.Helper()
	schedmetrics.Register()
	logger := klog.Background()
	ctx := klog.NewContext(context.Background(), logger)
	profile := plugintesting.LoadProfiles(tb, `profiles:
- schedulerName: hypernode-scheduler
  plugins:
    multiPoint:
      disabled:
      - name: DynamicResources
`)[0]
	var nodes []*v1.Node
	e := &simulationEnv{ctx: ctx, nodes: map[string]fwk.NodeInfo{}}
	for i, zone := range zones {
		name := fmt.Sprintf("node-%d", i)
		e.names = append(e.names, name)
		nodes = append(nodes, st.MakeNode().Name(name).Label(hostnameKey, name).Label("zone", zone).
			Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "8", v1.ResourceMemory: "64Gi", v1.ResourcePods: "110"}).Obj())
	}
	snapshot := internalcache.NewSnapshot(pods, nodes)
	client := fake.NewClientset()
	var err error
	if e.fw, err = frameworkruntime.NewFramework(ctx, plugins.NewInTreeRegistry(), &profile,
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(client, 0)),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithEventRecorder(&events.FakeRecorder{}),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithPodNominator(plugintesting.NoNominations{}),
	); err != nil {
		tb.Fatal(err)
	}
	infos, err := snapshot.NodeInfos().List()
	if err != nil {
		tb.Fatal(err)
	}
	for _, ni := range infos {
		e.nodes[ni.Node().Name] = ni
	}
	return e
}

// cpuPod is a pod of 8 CPUs, on node if given.
func cpuPod(name, node string, priority int32) *v1.Pod {
	p := st.MakePod().Namespace("ns").Name(name).UID(name).Priority(priority).Req(map[v1.ResourceName]string{v1.ResourceCPU: "8"}).Obj()
	p.Spec.NodeName = node
	return p
}

// evaluate evaluates the whole cluster for a gang "train" of need members of 8 CPUs and
// priority 100 (edit changes the members).
func (e *simulationEnv) evaluate(tb testing.TB, need int, edit func(*v1.Pod)) *choice {
	tb.Helper()
	var members []*v1.Pod
	for i := range need {
		p := cpuPod(fmt.Sprintf("train-%d", i), "", 100)
		p.Labels = map[string]string{schedulingv1alpha1.PodGroupLabel: "train"}
		edit(p)
		members = append(members, p)
	}
	state := framework.NewCycleState()
	if _, s, _ := e.fw.RunPreFilterPlugins(e.ctx, state, members[0]); !s.IsSuccess() {
		tb.Fatalf("PreFilter: %v", s)
	}
	s := &simulation{pl: newTestPlugin(e.fw, gangstate.New()), state: state, pod: members[0], own: podgroup.Key{Namespace: "ns", Name: "train"},
		priority: 100, need: need, members: members, nodes: e.nodes, units: map[string]*unit{}, spared: sets.New[string](),
		refused: sets.New[types.UID](), sparedRefused: sets.New[string](), now: time.Now()}
	c, total, reason := s.evaluate(e.ctx, domain{name: "cluster", nodes: e.names})
	if c == nil {
		tb.Fatalf("no choice: %d fit, %q", total, reason)
	}
	return c
}

func victimNames(c *choice) []string {
	var out []string
	for _, u := range c.victims {
		for _, p := range u.pods {
			out = append(out, p.pod.Name)
		}
	}
	slices.Sort(out)
	return out
}

// TestGiveBackAcrossTopologyKeys: members of 8 CPUs, one per host; node-0 and node-1 are zone
// a, node-2 and node-3 zone b. guard-0 (the highest priority, given back first) forbids the
// gang in zone a, node-1 is free, low-2 and low-3 fill zone b. Given back, guard-0 must make
// node-1 refuse the gang too (its key, zone, is counted, and the members' hostname alone would
// miss it): both of zone b's pods are evicted. Without the guard, a plain pod on every node:
// the two lowest, low-0 and low-3, go.
func TestGiveBackAcrossTopologyKeys(t *testing.T) {
	oneHost := func(p *v1.Pod) { p.Spec.Affinity = antiAffinity(hostnameKey) }
	guard := cpuPod("guard-0", "node-0", 40)
	guard.Spec.Affinity = antiAffinity("zone")
	zones := []string{"a", "a", "b", "b"}
	e := newSimulationEnv(t, zones, []*v1.Pod{guard, cpuPod("low-2", "node-2", 30), cpuPod("low-3", "node-3", 5)})
	c := e.evaluate(t, 2, oneHost)
	if diff := cmp.Diff([]string{"low-2", "low-3"}, victimNames(c)); diff != "" {
		t.Errorf("victims (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"train-0": "node-2", "train-1": "node-3"}, c.assign); diff != "" {
		t.Errorf("members' nodes (-want,+got):\n%s", diff)
	}

	e = newSimulationEnv(t, zones, []*v1.Pod{cpuPod("low-0", "node-0", 10), cpuPod("low-1", "node-1", 20),
		cpuPod("low-2", "node-2", 30), cpuPod("low-3", "node-3", 5)})
	c = e.evaluate(t, 2, oneHost)
	if diff := cmp.Diff([]string{"low-0", "low-3"}, victimNames(c)); diff != "" {
		t.Errorf("victims (-want,+got):\n%s", diff)
	}
}

// BenchmarkGiveBackOneMemberPerHost: a gang of 128 members, one per host (a required
// anti-affinity on the hostname, as training jobs ask), preempts on 256 full nodes, one pod of
// lower priority each: 256 units given back one at a time.
func BenchmarkGiveBackOneMemberPerHost(b *testing.B) {
	zones := make([]string, 256)
	var pods []*v1.Pod
	for i := range zones {
		zones[i] = fmt.Sprintf("z%d", i/32)
		pods = append(pods, cpuPod(fmt.Sprintf("low-%d", i), fmt.Sprintf("node-%d", i), int32(i%50)))
	}
	e := newSimulationEnv(b, zones, pods)
	for b.Loop() {
		if c := e.evaluate(b, 128, func(p *v1.Pod) { p.Spec.Affinity = antiAffinity(hostnameKey) }); len(c.victims) != 128 {
			b.Fatalf("%d victims, want 128", len(c.victims))
		}
	}
}

// TestSpreadStateKey: PodTopologySpread's PreFilter writes its state under spreadStateKey for a
// pod with a DoNotSchedule constraint, and none for a pod without.
func TestSpreadStateKey(t *testing.T) {
	e := newSimulationEnv(t, []string{"a", "b"}, nil)
	spread := cpuPod("spread", "", 100)
	spread.Labels = map[string]string{"app": "x"}
	spread.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: v1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}}
	for _, tc := range []struct {
		pod  *v1.Pod
		want bool
	}{{spread, true}, {cpuPod("plain", "", 100), false}} {
		state := framework.NewCycleState()
		if _, s, _ := e.fw.RunPreFilterPlugins(e.ctx, state, tc.pod); !s.IsSuccess() {
			t.Fatalf("PreFilter(%s): %v", tc.pod.Name, s)
		}
		if _, err := state.Read(spreadStateKey); (err == nil) != tc.want {
			t.Errorf("%s: state under %q: %v, want %v", tc.pod.Name, spreadStateKey, err == nil, tc.want)
		}
	}
}
