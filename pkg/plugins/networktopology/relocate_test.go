package networktopology

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// seedTree adds seed 001's upper tiers to the plan env's leaves: s4 = {s0, s1} and
// s5 = {s2, s3} at tier 2, s6 = {s4, s5} at tier 3.
func (e *planEnv) seedTree() {
	e.cache.SetHyperNode(hntesting.MakeHyperNode("s4").Tier(2).Children("s0", "s1").Obj())
	e.cache.SetHyperNode(hntesting.MakeHyperNode("s5").Tier(2).Children("s2", "s3").Obj())
	e.cache.SetHyperNode(hntesting.MakeHyperNode("s6").Tier(3).Children("s4", "s5").Obj())
}

// occupy puts a pod that uses all of node's CPU on it, as a pod of higher priority that the
// plan's nominations do not hold back would.
func (e *planEnv) occupy(t *testing.T, node string) {
	t.Helper()
	ni, err := e.snapshot.NodeInfos().Get(node)
	if err != nil {
		t.Fatal(err)
	}
	ni.(*framework.NodeInfo).AddPod(st.MakePod().Namespace("ns").Name("hog-" + node).UID("hog-" + node).Node(node).
		Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj())
}

// failCycle runs a member's cycle up to PostFilter: PreFilter, Filter on the narrowed nodes
// (each of which must refuse it), then NetworkTopologyAware's PostFilter.
func (e *planEnv) failCycle(t *testing.T, pod *v1.Pod) (*fwk.PostFilterResult, *fwk.Status) {
	t.Helper()
	state, nodes := e.preFilter(t, pod)
	statuses := framework.NewDefaultNodeToStatus()
	for _, node := range nodes {
		ni, err := e.snapshot.NodeInfos().Get(node)
		if err != nil {
			t.Fatal(err)
		}
		s := e.fw.RunFilterPluginsWithNominatedPods(e.ctx, state, pod, ni)
		if s.IsSuccess() {
			t.Fatalf("%s fits its planned node %s", pod.Name, node)
		}
		statuses.Set(node, s)
	}
	return e.plugin.PostFilter(e.ctx, state, pod, statuses)
}

// TestRelocateInsideTheDomain: a gang of three planned into s4 (s0 holds two members, s1
// one) loses a node of s0 to a pod the nominations did not stop. The member planned there
// moves to the one node of s4 that no member holds, the plan keeps its other members, and
// the member's next cycle is narrowed to its new leaf. When no node of the domain has room,
// the plan is dropped.
func TestRelocateInsideTheDomain(t *testing.T) {
	e := newPlanEnv(t, nil)
	e.seedTree()
	e.registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "pg-a",
			Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":2}`}},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 3},
	})
	for i := range 3 {
		e.registry.SetPod(nil, e.pod("a", i))
	}
	e.preFilter(t, e.pod("a", 0))
	plan := e.plan("a")
	if plan == nil || plan.Domain != "s4" {
		t.Fatalf("gang a planned into %+v, want s4", plan)
	}
	// Which member sits where depends on rank order; find the one planned alone on its node
	// in the leaf that holds two, and the node of s4 nobody holds.
	members := map[string][]string{}
	for name, leaf := range plan.PodLeaf {
		members[leaf] = append(members[leaf], name)
	}
	var full string
	for leaf, names := range members {
		if len(names) == 2 {
			full = leaf
		}
	}
	if diff := cmp.Diff(map[string]int{"s0": 2, "s1": 1}, e.promised("a")); diff != "" {
		t.Fatalf("promised (-want,+got):\n%s", diff)
	}
	var moving, taken, free string
	for _, node := range []string{"node-0", "node-1", "node-2", "node-3"} {
		switch nominated := e.nominated(node); {
		case len(nominated) == 0:
			free = node
		case full == "s0" && (node == "node-0"):
			moving, taken = nominated[0], node
		}
	}
	if moving == "" || free == "" {
		t.Fatalf("no member planned on node-0 (%v) or no free node in s4", members)
	}
	e.occupy(t, taken)

	result, status := e.failCycle(t, e.podNamed(moving))
	if !status.IsSuccess() {
		t.Fatalf("PostFilter(%s) = %v, want Success", moving, status)
	}
	freeLeaf := "s1"
	want := "gang ns/a: no room for member " + moving + " in its planned node " + taken + " now; it moves to node " + free + " in HyperNode " + freeLeaf + ", inside s4"
	if diff := cmp.Diff(want, status.Message()); diff != "" {
		t.Errorf("message (-want,+got):\n%s", diff)
	}
	if result != nil {
		t.Errorf("PostFilter result %+v, want none: the nomination stays in memory", result)
	}
	if e.plan("a") != plan {
		t.Error("the relocation replaced the gang's plan")
	}
	if diff := cmp.Diff(map[string]int{"s0": 1, "s1": 2}, e.promised("a")); diff != "" {
		t.Errorf("promised after the relocation (-want,+got):\n%s", diff)
	}
	// The scheduler ends the failed attempt by dropping the member's nomination; the pod's
	// next update (the attempt's condition) nominates it on its new node.
	e.fw.DeleteNominatedPodIfExists(e.podNamed(moving))
	e.plugin.renominate(klog.Background(), podgroup.Key{Namespace: "ns", Name: "a"}, e.podNamed(moving), false)
	if diff := cmp.Diff([]string{moving}, e.nominated(free)); diff != "" {
		t.Errorf("nominated on %s after the pod's update (-want,+got):\n%s", free, diff)
	}
	// Its next attempt consumes the relocation and keeps the nomination.
	e.fw.DeleteNominatedPodIfExists(e.podNamed(moving))
	if _, nodes := e.preFilter(t, e.podNamed(moving)); !cmp.Equal(nodes, []string{free}) {
		t.Errorf("%s narrowed to %v after the relocation, want its new node %s", moving, nodes, free)
	}
	if diff := cmp.Diff([]string{moving}, e.nominated(free)); diff != "" {
		t.Errorf("nominated on %s at the next attempt (-want,+got):\n%s", free, diff)
	}
	if n := e.plugin.relocations.Load(); n != 0 {
		t.Errorf("%d relocations wait for their next attempt, want 0", n)
	}

	// The free node is gone too: nothing in s4 has room, and the gang plans again.
	e.occupy(t, free)
	if _, status := e.failCycle(t, e.podNamed(moving)); status.IsSuccess() {
		t.Fatalf("PostFilter(%s) = Success with no room in s4", moving)
	}
	if e.plan("a") != nil {
		t.Error("the plan survived a member that has no room in its domain")
	}
}

// podNamed returns the registry's member of gang a by name.
func (e *planEnv) podNamed(name string) *v1.Pod {
	for _, m := range e.registry.Gang(podgroup.Key{Namespace: "ns", Name: "a"}).Pending {
		if m.Pod.Name == name {
			return m.Pod
		}
	}
	return nil
}

func TestRelocationLeavesAndDomain(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	cache := hypernode.NewCache(logger, nil)
	for i, leaf := range []string{"s0", "s1", "s2", "s3"} {
		cache.SetHyperNode(hntesting.MakeHyperNode(leaf).Tier(1).Nodes("node-" + string(rune('0'+i))).Obj())
	}
	cache.SetHyperNode(hntesting.MakeHyperNode("s4").Tier(2).Children("s0", "s1").Obj())
	cache.SetHyperNode(hntesting.MakeHyperNode("s5").Tier(2).Children("s2", "s3").Obj())
	cache.SetHyperNode(hntesting.MakeHyperNode("s6").Tier(3).Children("s4", "s5").Obj())
	tree := cache.Snapshot()

	leaves := []struct {
		name           string
		used           []string
		includePlanned bool
		want           []string
	}{
		{name: "used leaves first, then the nearest", used: []string{"s0", "s2"}, want: []string{"s2", "s1", "s3"}},
		{name: "a member held to one node tries its own leaf first", used: []string{"s0", "s3"}, includePlanned: true, want: []string{"s0", "s3", "s1", "s2"}},
	}
	for _, tt := range leaves {
		t.Run(tt.name, func(t *testing.T) {
			got := relocationLeaves(tree, "s6", "s0", sets.New(tt.used...), tt.includePlanned)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("leaves (-want,+got):\n%s", diff)
			}
		})
	}

	registry := podgroup.New()
	registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", Annotations: map[string]string{
			podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":3}`,
			podgroup.SubGroupPolicyAnnotation: `[{"name":"tp","subGroupSize":2,"labelSelector":{"matchLabels":{"role":"tp"}},"matchLabelKeys":["partition"],"networkTopology":{"mode":"hard","highestTierAllowed":1}},` +
				`{"name":"pp","subGroupSize":2,"labelSelector":{"matchLabels":{"role":"pp"}},"matchLabelKeys":["partition"],"networkTopology":{"mode":"hard","highestTierAllowed":2}},` +
				`{"name":"dp","subGroupSize":2,"labelSelector":{"matchLabels":{"role":"dp"}},"matchLabelKeys":["partition"],"networkTopology":{"mode":"soft","highestTierAllowed":1}}]`,
		}},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2},
	})
	info := registry.Info(podgroup.Key{Namespace: "ns", Name: "job"})
	if info.SubGroupErr != nil {
		t.Fatal(info.SubGroupErr)
	}
	member := func(role string) *v1.Pod {
		pod := st.MakePod().Namespace("ns").Name("m").Label(schedulingv1alpha1.PodGroupLabel, "job").Label("partition", "0").Obj()
		if role != "" {
			pod.Labels["role"] = role
		}
		return pod
	}
	domains := []struct {
		name, role, want string
	}{
		{name: "no sub-group: the gang's domain", want: "s6"},
		{name: "a hard sub-group of one leaf stays in its leaf", role: "tp", want: "s0"},
		{name: "a hard sub-group of tier 2 stays below its tier-2 HyperNode", role: "pp", want: "s4"},
		{name: "a soft sub-group: the gang's domain", role: "dp", want: "s6"},
	}
	for _, tt := range domains {
		t.Run(tt.name, func(t *testing.T) {
			if got := relocationDomain(tree, "s6", "s0", member(tt.role), info); got != tt.want {
				t.Errorf("domain = %s, want %s", got, tt.want)
			}
		})
	}
}
