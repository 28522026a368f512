package simulate

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	schedfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"

	schedulerconfig "github.com/hypernode-dev/hypernode-scheduler/manifests/scheduler"
	topologyfake "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned/fake"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/inspect"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/jobspec"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func node(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"),
			v1.ResourceCPU: resource.MustParse("32"), v1.ResourceMemory: resource.MustParse("128Gi"), v1.ResourcePods: resource.MustParse("110")},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}}}
}

// pod asks for a whole node's 8 GPUs; it runs on node ("" pending) at priority, in group.
func pod(namespace, name, group, nodeName string, priority int32) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(namespace + "-" + name), Labels: map[string]string{"app": name}},
		Spec: v1.PodSpec{NodeName: nodeName, SchedulerName: plugins.SchedulerName, Priority: &priority,
			Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), v1.ResourceCPU: resource.MustParse("1")},
				Limits:   v1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, StartTime: &metav1.Time{Time: now.Add(-time.Hour)}}}
	if group != "" {
		p.Labels[schedulingv1alpha1.PodGroupLabel] = group
	}
	if nodeName == "" {
		p.Status = v1.PodStatus{Phase: v1.PodPending}
	}
	return p
}

// cluster: leaves l0 and l1 (two 8-GPU nodes each) under spine sp. Gang team-a/low (2 pods,
// priority 0) fills l0; on l1, web (priority 0, a PodDisruptionBudget allowing no eviction)
// and batch (priority 500).
func cluster(t *testing.T) *inspect.Cluster {
	kube := []runtime.Object{node("l0-n0"), node("l0-n1"), node("l1-n0"), node("l1-n1"),
		pod("team-a", "low-0", "low", "l0-n0", 0), pod("team-a", "low-1", "low", "l0-n1", 0),
		pod("team-b", "web", "", "l1-n0", 0), pod("team-b", "batch", "", "l1-n1", 500),
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "web"},
			Spec:   policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0, ExpectedPods: 1, CurrentHealthy: 1, DesiredHealthy: 1}},
	}
	topology := []runtime.Object{
		hntesting.MakeHyperNode("l0").Tier(1).TierName("leaf").Nodes("l0-n0", "l0-n1").Obj(),
		hntesting.MakeHyperNode("l1").Tier(1).TierName("leaf").Nodes("l1-n0", "l1-n1").Obj(),
		hntesting.MakeHyperNode("sp").Tier(2).TierName("spine").Children("l0", "l1").Obj(),
	}
	pgs := []runtime.Object{&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "low", UID: "low"},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}}}
	c, err := inspect.LoadWith(context.Background(), inspect.Clients{Kube: kubefake.NewClientset(kube...),
		Topology: topologyfake.NewSimpleClientset(topology...), Scheduling: schedfake.NewSimpleClientset(pgs...)},
		inspect.LoadOptions{SkipEvents: true, PriorityClasses: true, PodDisruptionBudgets: true})
	if err != nil {
		t.Fatal(err)
	}
	c.Now = now
	return c
}

// job is 2 members of 8 GPUs, hard inside one leaf.
func job() *jobspec.Job {
	pg := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-x", Name: "new",
		Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`}},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}}
	j := &jobspec.Job{Kind: "PodGroup", Namespace: "team-x", Name: "new", PodGroup: pg, PodGroupFrom: jobspec.FromFile}
	for i := range 2 {
		p := pod("team-x", fmt.Sprintf("new-%d", i), "new", "", 0)
		p.Spec.Priority = nil
		j.Members = append(j.Members, p)
	}
	return j
}

// TestPreemptionAsGangPreemptionDecides runs the plugin on the copy: at priority 100 only
// l0's gang can go (batch's 500 keeps l1 too small); at 1000 both leaves can be emptied and
// l0 wins, as l1 would evict a pod its PodDisruptionBudget protects; at 0 nothing helps.
func TestPreemptionAsGangPreemptionDecides(t *testing.T) {
	c := cluster(t)
	prof, err := Profile(schedulerconfig.Config, plugins.SchedulerName)
	if err != nil {
		t.Fatal(err)
	}
	l0 := []inspect.VictimReport{
		{Pod: "team-a/low-0", Node: "l0-n0", Priority: 0, Gang: "team-a/low", Age: "60m"},
		{Pod: "team-a/low-1", Node: "l0-n1", Priority: 0, Gang: "team-a/low", Age: "60m"},
	}
	tests := []struct {
		priority int32
		want     *inspect.PreemptionReport
	}{{
		priority: 100,
		want: &inspect.PreemptionReport{Priority: 100, Config: "shipped", Helps: true, Domain: "l0", Tier: 1, TierName: "leaf", Victims: l0, Why: ChosenBy,
			NotChosen: []string{"too small even with every pod of lower priority evicted: l1 1/2"}},
	}, {
		priority: 1000,
		want: &inspect.PreemptionReport{Priority: 1000, Config: "shipped", Helps: true, Domain: "l0", Tier: 1, TierName: "leaf", Victims: l0, Why: ChosenBy,
			NotChosen: []string{"l1 would evict 2 pod(s) up to priority 500, 1 against a PodDisruptionBudget, 0 member(s) to spare"}},
	}, {
		priority: 0,
		want: &inspect.PreemptionReport{Priority: 0, Config: "shipped",
			Refusal: "gang team-x/new cannot fit even if every pod of lower priority were evicted: no domain holds 2 members (l0 0/2, l1 0/2); nothing was evicted"},
	}}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.priority), func(t *testing.T) {
			admitted, value, err := c.Admit(job(), &tc.priority)
			if err != nil {
				t.Fatal(err)
			}
			w, err := Preemption(t.Context(), c, admitted, prof)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, Report(c, w, value, "shipped")); diff != "" {
				t.Errorf("preemption (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProfileFindsGangPreemptionAsTheFrameworkExpandsIt(t *testing.T) {
	const head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: hypernode-scheduler\n  plugins:\n"
	for config, runs := range map[string]bool{
		head + "    multiPoint: {enabled: [{name: GangPreemption}, {name: Gang}], disabled: [{name: DefaultPreemption}]}\n":                                            true,
		head + "    multiPoint: {enabled: [{name: GangPreemption}, {name: Gang}], disabled: [{name: DefaultPreemption}]}\n    postFilter: {disabled: [{name: '*'}]}\n": false,
	} {
		_, err := Profile([]byte(config), plugins.SchedulerName)
		if got := err == nil; got != runs {
			t.Errorf("Profile(%q): %v, want it to run GangPreemption: %v", config, err, runs)
		}
	}
}

func TestProfileRefusesWhatCannotPreempt(t *testing.T) {
	for config, want := range map[string]string{
		"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n":                                                  "the scheduler configuration has no profile hypernode-scheduler (it has [default-scheduler])",
		"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: hypernode-scheduler\n": "profile hypernode-scheduler does not run GangPreemption: gangs do not preempt there",
		"kind: Pod\n": "decoding the scheduler configuration: Object 'apiVersion' is missing in 'kind: Pod\n'",
	} {
		if _, err := Profile([]byte(config), plugins.SchedulerName); err == nil || err.Error() != want {
			t.Errorf("Profile(%q) = %v, want %q", config, err, want)
		}
	}
}
