package native

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/gangpreemption"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

const boundTimeout = 30 * time.Second

// env is one test's namespace, nodes and HyperNodes.
type env struct {
	t  *testing.T
	c  util.Clients
	ns string
}

func newEnv(t *testing.T, nodes []*v1.Node, hyperNodes ...*topologyv1alpha1.HyperNode) *env {
	t.Helper()
	ctx := context.Background()
	c, err := util.NewClients(controlPlane.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := util.CreateNamespace(ctx, c.Kube, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := util.DeletePodsNow(ctx, c.Kube, ns); err != nil {
			t.Error(err)
		}
	})
	if err := util.CreateNodes(ctx, c.Kube, nodes...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := util.DeleteAllNodes(ctx, c.Kube); err != nil {
			t.Error(err)
		}
	})
	for _, hn := range hyperNodes {
		if _, err := c.Topology.TopologyV1alpha1().HyperNodes().Create(ctx, hn, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Topology.TopologyV1alpha1().HyperNodes().Delete(ctx, hn.Name, metav1.DeleteOptions{}) })
	}
	return &env{t: t, c: c, ns: ns}
}

// twoSpines is sp0 {l0: n0 n1, l1: n2 n3} and sp1 {l2: n4 n5, l3: n6 n7} of 2-CPU nodes; the
// nodes of l3 are tainted PreferNoSchedule, so that a pod placed node by node avoids them.
func twoSpines() ([]*v1.Node, []*topologyv1alpha1.HyperNode) {
	var nodes []*v1.Node
	for i := range 8 {
		n := util.Node(fmt.Sprintf("n%d", i), "2", "8Gi", nil)
		if i >= 6 {
			n.Spec.Taints = []v1.Taint{{Key: "example.com/cold", Effect: v1.TaintEffectPreferNoSchedule}}
		}
		nodes = append(nodes, n)
	}
	var hns []*topologyv1alpha1.HyperNode
	for l := range 4 {
		hns = append(hns, hntesting.MakeHyperNode(fmt.Sprintf("l%d", l)).Tier(1).Nodes(fmt.Sprintf("n%d", 2*l), fmt.Sprintf("n%d", 2*l+1)).Obj())
	}
	hns = append(hns, hntesting.MakeHyperNode("sp0").Tier(2).Children("l0", "l1").Obj(),
		hntesting.MakeHyperNode("sp1").Tier(2).Children("l2", "l3").Obj())
	return nodes, hns
}

// leafOf is the leaf of a node of twoSpines.
func leafOf(node string) string {
	var i int
	_, _ = fmt.Sscanf(node, "n%d", &i)
	return fmt.Sprintf("l%d", i/2)
}

// startScheduler runs the shipped configuration, changed by change (nil: as shipped).
func (e *env) startScheduler(change func(profile map[string]any)) {
	e.t.Helper()
	config, err := util.SchedulerConfig(controlPlane, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if change != nil {
		var cfg map[string]any
		if err := yaml.Unmarshal([]byte(config), &cfg); err != nil {
			e.t.Fatal(err)
		}
		change(cfg["profiles"].([]any)[0].(map[string]any))
		out, err := yaml.Marshal(cfg)
		if err != nil {
			e.t.Fatal(err)
		}
		config = string(out)
	}
	sched, err := util.StartScheduler(context.Background(), config)
	if err != nil {
		e.t.Fatalf("starting the scheduler: %v", err)
	}
	e.t.Cleanup(func() {
		if err := sched.Stop(); err != nil {
			e.t.Error(err)
		}
	})
}

// inTreeGenerator makes upstream's TopologyPlacementGenerator the profile's placement
// generator, with NetworkTopologyAware left out of placement generation and scoring.
func inTreeGenerator(profile map[string]any) {
	pl := profile["plugins"].(map[string]any)
	pl["placementGenerate"] = map[string]any{"enabled": []any{map[string]any{"name": "TopologyPlacementGenerator"}},
		"disabled": []any{map[string]any{"name": "NetworkTopologyAware"}}}
	pl["placementScore"] = map[string]any{"disabled": []any{map[string]any{"name": "NetworkTopologyAware"}}}
}

// group creates a native gang PodGroup of minCount with our constraint annotation ("" for
// none), and count members of cpu CPUs that name it, both of the priority class ("" for
// none).
func (e *env) group(name string, minCount int32, annotation string, count int, cpu, priorityClass string) []string {
	e.t.Helper()
	ctx := context.Background()
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}}}
	if annotation != "" {
		pg.Annotations = map[string]string{podgroup.NetworkTopologyAnnotation: annotation}
	}
	pg.Spec.PriorityClassName = priorityClass
	if _, err := e.c.Kube.SchedulingV1beta1().PodGroups(e.ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	var pods []*v1.Pod
	for i := range count {
		p := util.Pod(e.ns, fmt.Sprintf("%s-%d", name, i), plugins.SchedulerName, cpu, nil)
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(name)}
		p.Spec.PriorityClassName = priorityClass
		pods = append(pods, p)
	}
	names, err := util.CreatePods(ctx, e.c.Kube, pods...)
	if err != nil {
		e.t.Fatal(err)
	}
	return names
}

// running binds a plain pod of cpu CPUs to node, without a scheduler.
func (e *env) running(name, node, cpu string, mutate ...func(*v1.Pod)) {
	e.t.Helper()
	p := util.Pod(e.ns, name, "no-scheduler", cpu, nil)
	p.Spec.NodeName = node
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	for _, m := range mutate {
		m(p)
	}
	if _, err := util.CreatePods(context.Background(), e.c.Kube, p); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) waitBound(names []string) map[string]string {
	e.t.Helper()
	got, err := util.WaitForPodsBound(context.Background(), e.c.Kube, e.ns, names, boundTimeout)
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

// leaves lists the distinct leaves of a placement of twoSpines.
func leaves(placement map[string]string) []string {
	set := map[string]bool{}
	for _, n := range placement {
		set[leafOf(n)] = true
	}
	var out []string
	for l := range set {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

// TestNativePodGroupInOneLeaf: one CPU is taken on n0, n2 and n4, so only l3 (whose nodes
// the per-pod scores avoid) holds four 1-CPU pods. A native pod group of four, hard at tier
// 1, lands in l3; with upstream's generator, which ignores HyperNodes, it spreads over the
// other leaves.
func TestNativePodGroupInOneLeaf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config func(map[string]any)
		// oneLeaf: the group must land in l3; otherwise it must span several leaves.
		oneLeaf bool
	}{
		{name: "NetworkTopologyAware generates the placements", oneLeaf: true},
		{name: "upstream's TopologyPlacementGenerator", config: inTreeGenerator},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, hns := twoSpines()
			e := newEnv(t, nodes, hns...)
			for _, n := range []string{"n0", "n2", "n4"} {
				e.running("busy-"+n, n, "1")
			}
			e.startScheduler(tc.config)
			got := e.waitBound(e.group("train", 4, `{"mode":"hard","highestTierAllowed":1}`, 4, "1", ""))
			if tc.oneLeaf {
				if diff := cmp.Diff([]string{"l3"}, leaves(got)); diff != "" {
					t.Errorf("leaves of %v (-want +got):\n%s", got, diff)
				}
				return
			}
			if l := leaves(got); len(l) < 2 || contains(l, "l3") {
				t.Errorf("upstream's generator placed the group in %v (%v); the test expects it spread over l0-l2, or it proves nothing", l, got)
			}
		})
	}
}

// TestNativeSoftSpansFewestLeaves: a soft group of six 1-CPU pods fits no leaf (four each):
// it takes two leaves of one spine, the fuller spine (BinPack) where one CPU is taken.
func TestNativeSoftSpansFewestLeaves(t *testing.T) {
	nodes, hns := twoSpines()
	e := newEnv(t, nodes, hns...)
	e.running("busy-n0", "n0", "1")
	e.startScheduler(nil)
	got := e.waitBound(e.group("train", 6, `{"mode":"soft"}`, 6, "1", ""))
	if diff := cmp.Diff([]string{"l0", "l1"}, leaves(got)); diff != "" {
		t.Errorf("leaves of %v (-want +got):\n%s", got, diff)
	}
}

// TestNativeTooBigBindsNothing: five 1-CPU pods hard at tier 1 fit no leaf: nothing binds,
// and the members' condition says why in the planner's words.
func TestNativeTooBigBindsNothing(t *testing.T) {
	nodes, hns := twoSpines()
	e := newEnv(t, nodes, hns...)
	e.startScheduler(nil)
	names := e.group("train", 5, `{"mode":"hard","highestTierAllowed":1}`, 5, "1", "")
	want := fmt.Sprintf("pod group %s/train: hard topology (tier<=1): no HyperNode can host 5 pods; tier 1: l0 4/5, l1 4/5 (+2 more)", e.ns)
	var last string
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, boundTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := e.c.Kube.CoreV1().Pods(e.ns).Get(ctx, names[0], metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
				last = c.Message
			}
		}
		return strings.Contains(last, want), nil
	}); err != nil {
		t.Fatalf("condition of %s: %q, want it to contain %q", names[0], last, want)
	}
	bound, err := util.BoundPods(context.Background(), e.c.Kube, e.ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(bound) != 0 {
		t.Errorf("bound %v, want none", bound)
	}
}

// TestNativePreemptionSeed004Example2: seed 004, example 2, as a native pod group.
// Low-priority pods fill node-0, node-1 and node-5; a high-priority group of four 8-CPU pods
// must be inside one spine. Evicting one pod frees a spine in spine-0 and in spine-1, and
// spine-1 is the tighter fit: exactly the pod on node-5 goes, and the group binds on
// node-5..node-8. Upstream's pod-group preemption picks victims cluster-wide.
func TestNativePreemptionSeed004Example2(t *testing.T) {
	for _, tc := range []struct {
		name string
		// lowGroup puts the low-priority pods in a native group of the basic policy (what the
		// Job controller gives a plain Job): no gang, so they are still evicted one by one.
		lowGroup bool
	}{{name: "plain low-priority pods"}, {name: "low-priority pods in a basic native group", lowGroup: true}} {
		t.Run(tc.name, func(t *testing.T) { nativePreemption(t, tc.lowGroup) })
	}
}

func nativePreemption(t *testing.T, lowGroup bool) {
	var nodes []*v1.Node
	for i := range 12 {
		nodes = append(nodes, util.Node(fmt.Sprintf("node-%d", i), "8", "32Gi", nil))
	}
	e := newEnv(t, nodes, util.Seed004Tree()...)
	ctx := context.Background()
	for name, value := range map[string]int32{e.ns + "-low": 1000, e.ns + "-high": 1000000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if _, err := e.c.Kube.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.c.Kube.SchedulingV1().PriorityClasses().Delete(ctx, name, metav1.DeleteOptions{}) })
		if err := util.WaitPriorityClassAdmitted(ctx, e.c.Kube, e.ns, name, boundTimeout); err != nil {
			t.Fatal(err)
		}
	}
	var inGroup func(*v1.Pod)
	if lowGroup {
		basic := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "lows"},
			Spec: schedulingv1beta1.PodGroupSpec{PriorityClassName: e.ns + "-low", SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
				Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}}}
		if _, err := e.c.Kube.SchedulingV1beta1().PodGroups(e.ns).Create(ctx, basic, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		inGroup = func(p *v1.Pod) { p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("lows")} }
	}
	for _, n := range []string{"node-0", "node-1", "node-5"} {
		e.running("low-"+n, n, "8", func(p *v1.Pod) {
			p.Spec.PriorityClassName = e.ns + "-low"
			if inGroup != nil {
				inGroup(p)
			}
		})
	}
	e.startScheduler(nil)
	names := e.group("train", 4, `{"mode":"hard","highestTierAllowed":2}`, 4, "8", e.ns+"-high")
	got := e.waitBound(names)
	var placed []string
	for _, n := range got {
		placed = append(placed, n)
	}
	sort.Strings(placed)
	if diff := cmp.Diff([]string{"node-5", "node-6", "node-7", "node-8"}, placed); diff != "" {
		t.Errorf("group nodes (-want +got):\n%s", diff)
	}
	list, err := e.c.Kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var low []string
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, "low-") && p.DeletionTimestamp == nil {
			low = append(low, p.Name)
		}
	}
	sort.Strings(low)
	if diff := cmp.Diff([]string{"low-node-0", "low-node-1"}, low); diff != "" {
		t.Errorf("low-priority pods left (-want +got):\n%s", diff)
	}
	want := fmt.Sprintf("pod group %s/train: evicting 1 pod(s) of lower priority in spine-1 so that 4 members fit: %s/low-node-5; "+
		"not chosen: spine-0 would evict 1 pod(s) up to priority 1000, 1 member(s) to spare; "+
		"too small even with every pod of lower priority evicted: block-0 3/4, block-1 2/4, block-2 2/4, +3 more", e.ns, e.ns)
	if diff := cmp.Diff([]string{want}, e.events(gangpreemption.EventGangPreempting)); diff != "" {
		t.Errorf("GangPreempting Events (-want +got):\n%s", diff)
	}
}

// events are the notes of the namespace's Events of a reason, once there is one (they are
// written asynchronously).
func (e *env) events(reason string) []string {
	e.t.Helper()
	var out []string
	_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, boundTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := e.c.Kube.EventsV1().Events(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		out = nil
		for _, ev := range list.Items {
			if ev.Reason == reason {
				out = append(out, ev.Note)
			}
		}
		return len(out) > 0, nil
	})
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
