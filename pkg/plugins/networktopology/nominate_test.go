package networktopology

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// nominated lists the pods nominated on node, sorted.
func (e *planEnv) nominated(node string) []string {
	var out []string
	for _, pi := range e.fw.NominatedPodsForNode(node) {
		out = append(out, pi.GetPod().Name)
	}
	sort.Strings(out)
	return out
}

// fitsWithNominations runs the Filter plugins for pod on node as kube-scheduler does, with
// the nominated pods of equal or higher priority counted.
func (e *planEnv) fitsWithNominations(t *testing.T, pod *v1.Pod, node string) bool {
	t.Helper()
	state := framework.NewCycleState()
	if _, s, _ := e.fw.RunPreFilterPlugins(e.ctx, state, pod); !s.IsSuccess() && !s.IsSkip() {
		t.Fatalf("PreFilter(%s): %v", pod.Name, s)
	}
	ni, err := e.snapshot.NodeInfos().Get(node)
	if err != nil {
		t.Fatal(err)
	}
	return e.fw.RunFilterPluginsWithNominatedPods(e.ctx, state, pod, ni).IsSuccess()
}

// TestPlanNominatesItsMembers: a plan nominates each planned member on its node, so a plain
// pod of the same priority does not take the slot; the next gang plans around them; dropping
// the plan withdraws the nominations and the slot is free again.
func TestPlanNominatesItsMembers(t *testing.T) {
	e := newPlanEnv(t, map[string]int{"a": 2, "b": 2})
	web := st.MakePod().Namespace("ns").Name("web").UID("web").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()
	if !e.fitsWithNominations(t, web, "node-0") {
		t.Fatal("a plain pod does not fit an empty node")
	}
	e.preFilter(t, e.pod("a", 0))
	for node, want := range map[string][]string{"node-0": {"a-0"}, "node-1": {"a-1"}, "node-2": nil} {
		if diff := cmp.Diff(want, e.nominated(node)); diff != "" {
			t.Errorf("nominated on %s (-want,+got):\n%s", node, diff)
		}
	}
	if e.fitsWithNominations(t, web, "node-0") {
		t.Error("a plain pod of the same priority fits node-0, which gang a's plan holds")
	}
	if _, nodes := e.preFilter(t, e.pod("b", 0)); !cmp.Equal(nodes, []string{"node-2"}) {
		t.Errorf("gang b's first member narrowed to %v, want node-2 of s1, around gang a's nominations", nodes)
	}
	e.plugin.invalidate(klog.Background(), podgroup.Key{Namespace: "ns", Name: "a"})
	if got := e.nominated("node-0"); len(got) != 0 {
		t.Errorf("gang a's plan was dropped but %v stay nominated on node-0", got)
	}
	if !e.fitsWithNominations(t, web, "node-0") {
		t.Error("node-0 is free again, but a plain pod does not fit")
	}
}

// TestPromisesInRealRequests: a gang of four 1-GPU pods plans onto node-0 (8 GPUs); a gang
// of one 4-GPU pod planned next sees exactly the 4 GPUs the first plan holds there, so it
// plans into the same leaf, onto the same node, and the node is then exactly full. Counted
// in the first gang's slots, the leaf would have looked full to it.
func TestPromisesInRealRequests(t *testing.T) {
	e := newPlanEnvWith(t, nil, func(n *v1.Node) {
		n.Status.Capacity["nvidia.com/gpu"] = resourceQuantity("8")
		n.Status.Allocatable["nvidia.com/gpu"] = resourceQuantity("8")
	})
	gpuPod := func(group string, i int, gpus string) *v1.Pod {
		return st.MakePod().Namespace("ns").Name(group+"-"+string(rune('0'+i))).UID(group+"-"+string(rune('0'+i))).
			Label(schedulingv1alpha1.PodGroupLabel, group).Req(map[v1.ResourceName]string{"nvidia.com/gpu": gpus}).Obj()
	}
	for group, size := range map[string]int{"small": 4, "big": 1} {
		e.registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: group, UID: types.UID("pg-" + group),
				Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: `{"highestTierAllowed":1}`}},
			Spec: schedulingv1alpha1.PodGroupSpec{MinMember: int32(size)},
		})
	}
	var small []*v1.Pod
	for i := range 4 {
		small = append(small, gpuPod("small", i, "1"))
		e.registry.SetPod(nil, small[i])
	}
	big := gpuPod("big", 0, "4")
	e.registry.SetPod(nil, big)

	if _, nodes := e.preFilter(t, small[0]); !cmp.Equal(nodes, []string{"node-0"}) {
		t.Fatalf("gang small's first member narrowed to %v, want node-0 of s0", nodes)
	}
	if diff := cmp.Diff([]string{"small-0", "small-1", "small-2", "small-3"}, e.nominated("node-0")); diff != "" {
		t.Fatalf("nominated on node-0 (-want,+got):\n%s", diff)
	}
	if _, nodes := e.preFilter(t, big); !cmp.Equal(nodes, []string{"node-0"}) {
		t.Errorf("gang big narrowed to %v, want node-0 next to gang small", nodes)
	}
	if diff := cmp.Diff([]string{"big-0", "small-0", "small-1", "small-2", "small-3"}, e.nominated("node-0")); diff != "" {
		t.Errorf("nominated on node-0 (-want,+got):\n%s", diff)
	}
	// 4 + 4 GPUs nominated: one more GPU does not fit node-0.
	if e.fitsWithNominations(t, gpuPod("extra", 0, "1"), "node-0") {
		t.Error("node-0 is over-committed: a 1-GPU pod still fits next to 8 nominated GPUs")
	}
}

var _ fwk.PodNominator = (*testNominator)(nil)

func resourceQuantity(q string) resource.Quantity { return resource.MustParse(q) }

// TestOwnNominationsDoNotCountAgainstThePlan: a gang's members nominated on s0's nodes (as a
// preemption nominates them, in memory and in their status, which kube-scheduler restores on
// every pod update) hold s0 for the gang, not against it: the gang plans there. Another
// gang's plan still goes around them.
func TestOwnNominationsDoNotCountAgainstThePlan(t *testing.T) {
	e := newPlanEnv(t, map[string]int{"a": 2, "b": 2})
	for i, node := range []string{"node-0", "node-1"} {
		pi, err := framework.NewPodInfo(e.pod("a", i))
		if err != nil {
			t.Fatal(err)
		}
		e.fw.AddNominatedPod(klog.Background(), pi, &fwk.NominatingInfo{NominatedNodeName: node, NominatingMode: fwk.ModeOverride})
	}
	if _, nodes := e.preFilter(t, e.pod("a", 0)); !cmp.Equal(nodes, []string{"node-0"}) {
		t.Errorf("gang a's first member narrowed to %v, want node-0 of s0, where its own members are nominated", nodes)
	}
	if _, nodes := e.preFilter(t, e.pod("b", 0)); !cmp.Equal(nodes, []string{"node-2"}) {
		t.Errorf("gang b's first member narrowed to %v, want node-2 of s1, around gang a's nominations", nodes)
	}
}

// TestNominationUpdateLeavesPreemptionsAlone: a rewrite or clear of status.nominatedNodeName
// queued by a plan is not written while a running gang preemption holds the member's
// nomination (its own write may have landed first, and a clear would make kube-scheduler drop
// the nomination); a field that is empty is never added to.
func TestNominationUpdateLeavesPreemptionsAlone(t *testing.T) {
	p, _ := newTestPlugin(t)
	withNomination := func(node string) *v1.Pod {
		pod := member("hard", 0)
		pod.Status.NominatedNodeName = node
		return pod
	}
	if got := p.nominationUpdate(withNomination(""), "node-1"); got != nil {
		t.Errorf("empty field: wrote %v, want nothing", got.NominatedNodeName)
	}
	for _, wish := range []string{"", "node-1"} {
		if got := p.nominationUpdate(withNomination("node-7"), wish); got == nil || got.NominatedNodeName != wish {
			t.Errorf("not held, wish %q: wrote %v, want %q", wish, got, wish)
		}
	}
	// A preemption for the gang nominated the member on node-7; its victim terminates.
	p.gangs.Lock()
	p.gangs.StartPreemptionLocked(podgroup.Key{Namespace: "ns", Name: "hard"}, &gangstate.Preemption{
		Victims: []*v1.Pod{st.MakePod().Namespace("ns").Name("victim").UID("victim").Node("node-7").Obj()},
		Nodes:   map[types.UID]string{member("hard", 0).UID: "node-7"}})
	p.gangs.Unlock()
	for _, wish := range []string{"", "node-1"} {
		if got := p.nominationUpdate(withNomination("node-7"), wish); got != nil {
			t.Errorf("held by a preemption, wish %q: wrote %q, want nothing", wish, got.NominatedNodeName)
		}
	}
}
