package inspect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	schedfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"

	topologyfake "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned/fake"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices/devicestest"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// TestExplainSubGroupConstraintOnly: a gang whose only constraints are its sub-groups' is not
// called a plain gang.
func TestExplainSubGroupConstraintOnly(t *testing.T) {
	e := Explanation{PodGroup: "team-a/stages", Status: "Pending", MinMember: 8,
		SubGroups: &SubGroupsReport{Policies: []SubGroupPolicyReport{{Name: "stage", SubGroupSize: 4, MinSubGroups: 2, Constraint: "hard topology (tier<=1)"}}}}
	var buf bytes.Buffer
	if err := WriteExplanation(&buf, e); err != nil {
		t.Fatal(err)
	}
	const want = "  network topology: none for the whole job (its sub-groups' constraints are\n    placed by topology, the job anywhere)\n"
	if !strings.Contains(buf.String(), want) {
		t.Errorf("explain output:\n%s\nwant it to contain:\n%s", buf.String(), want)
	}
}

// TestExplainVerdictBinPacks: the verdict names the candidate the scheduler's default
// bin-pack picks, the fuller leaf b, not the first by name; also when the pods request only
// GPUs, which the default weighs, and for a gang of two shapes (a launcher and workers).
func TestExplainVerdictBinPacks(t *testing.T) {
	gpusOnly := func(p *v1.Pod) {
		gpus := v1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: gpus, Limits: gpus}
	}
	launcher := func(p *v1.Pod) {
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}
	}
	tests := []struct {
		name string
		// requests changes every pod's request; first changes job-0's after it.
		requests, first func(*v1.Pod)
		demand          int
	}{
		{name: "cpu, memory and GPUs", demand: 2},
		{name: "GPUs only", requests: gpusOnly, demand: 2},
		{name: "a launcher and GPU workers", first: launcher, demand: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := func(name, group, node string) *v1.Pod {
				p := memberPod("team-x", name, group, node, nil)
				if tc.requests != nil {
					tc.requests(p)
				}
				if name == "job-0" && tc.first != nil {
					tc.first(p)
				}
				return p
			}
			kube := []runtime.Object{gpuNode("a-n0"), gpuNode("a-n1"), gpuNode("b-n0"), gpuNode("b-n1"),
				pod("busy-0", "busy", "b-n0"), pod("busy-1", "busy", "b-n1")}
			for i := range tc.demand {
				kube = append(kube, pod(fmt.Sprintf("job-%d", i), "job", ""))
			}
			topology := []runtime.Object{
				hntesting.MakeHyperNode("a").Tier(1).Nodes("a-n0", "a-n1").Obj(),
				hntesting.MakeHyperNode("b").Tier(1).Nodes("b-n0", "b-n1").Obj(),
			}
			tier1 := map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`}
			scheduling := []runtime.Object{podGroup("team-x", "busy", 2, nil), podGroup("team-x", "job", int32(tc.demand), tier1)}
			c := loadObjects(t, kube, topology, scheduling)
			e, err := c.Explain("team-x", "job", "")
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("it fits now: the planner would place the %d pending pods in b (tier 1)", tc.demand)
			if e.Search == nil || e.Search.Verdict != want {
				t.Errorf("verdict %+v, want %q", e.Search, want)
			}
		})
	}
}

// TestExplainSoftGangShowsEveryTier: a soft gang may be placed up to the whole cluster, so
// every tier is listed, the whole cluster last.
func TestExplainSoftGangShowsEveryTier(t *testing.T) {
	kube := []runtime.Object{gpuNode("a-n0"), gpuNode("a-n1"), gpuNode("b-n0"), gpuNode("b-n1")}
	for i := range 6 {
		kube = append(kube, memberPod("team-x", fmt.Sprintf("job-%d", i), "job", "", nil))
	}
	topology := []runtime.Object{
		hntesting.MakeHyperNode("a").Tier(1).Nodes("a-n0", "a-n1").Obj(),
		hntesting.MakeHyperNode("b").Tier(1).Nodes("b-n0", "b-n1").Obj(),
		hntesting.MakeHyperNode("s").Tier(2).Children("a", "b").Obj(),
	}
	soft := map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"soft","highestTierAllowed":1}`}
	c := loadObjects(t, kube, topology, []runtime.Object{podGroup("team-x", "job", 6, soft)})
	e, err := c.Explain("team-x", "job", "")
	if err != nil {
		t.Fatal(err)
	}
	var tiers []int
	for _, tr := range e.Search.Tiers {
		tiers = append(tiers, tr.Tier)
	}
	if diff := cmp.Diff([]int{1, 2, 3}, tiers); diff != "" {
		t.Errorf("tiers listed (-want,+got):\n%s", diff)
	}
}

// TestExplainShapesThatDoNotFitTogether: two workers that each fill a node and a launcher:
// each shape counted alone fits the leaf, packed together they do not, and the candidate
// says so instead of "has room".
func TestExplainShapesThatDoNotFitTogether(t *testing.T) {
	eightCPU := func(n *v1.Node) { n.Status.Allocatable[v1.ResourceCPU] = resource.MustParse("8") }
	request := func(p *v1.Pod, gpu, cpu string) *v1.Pod {
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: v1.ResourceList{
			"nvidia.com/gpu": resource.MustParse(gpu), v1.ResourceCPU: resource.MustParse(cpu)}}
		return p
	}
	kube := []runtime.Object{gpuNode("a-n0", eightCPU), gpuNode("a-n1", eightCPU),
		request(memberPod("team-x", "job-0", "job", "", nil), "8", "8"),
		request(memberPod("team-x", "job-1", "job", "", nil), "8", "8"),
		request(memberPod("team-x", "job-launcher", "job", "", nil), "0", "1"),
	}
	topology := []runtime.Object{hntesting.MakeHyperNode("a").Tier(1).Nodes("a-n0", "a-n1").Obj()}
	tier1 := map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`}
	c := loadObjects(t, kube, topology, []runtime.Object{podGroup("team-x", "job", 3, tier1)})
	e, err := c.Explain("team-x", "job", "")
	if err != nil {
		t.Fatal(err)
	}
	got := e.Search.Tiers[0].Candidates[0]
	if got.Name != "a" || got.Fits || !strings.HasPrefix(got.Reason, "room for each shape counted alone, but the 3 pods (") {
		t.Errorf("candidate %+v; want a, not fitting, room for each shape alone but not together", got)
	}
	if e.Search.Fits {
		t.Errorf("verdict %q: the planner placed shapes that do not fit together", e.Search.Verdict)
	}
}

// TestExplainRunsTheSchedulersFallbacks: a job that can run with fewer members than it has is
// explained as the scheduler plans it, with the members it can do without left to wait: an
// elastic gang with as many members as fit, a job of sub-groups without those minSubGroups
// lets it drop. The candidate the planner picks says for how many pods.
func TestExplainRunsTheSchedulersFallbacks(t *testing.T) {
	kube, topology, scheduling := testObjects()
	for i := range 5 {
		kube = append(kube, memberPod("team-d", fmt.Sprintf("elastic-%d", i), "elastic", "",
			map[string]string{podgroup.RankAnnotation: fmt.Sprint(i)}))
	}
	for i := range 9 {
		kube = append(kube, memberPod("team-d", fmt.Sprintf("stages-%d", i), "stages", "",
			map[string]string{"stage": fmt.Sprint(i / 3)}))
	}
	for i := range 6 {
		kube = append(kube, memberPod("team-d", fmt.Sprintf("halves-%d", i), "halves", "",
			map[string]string{"half": fmt.Sprint(i / 3)}))
	}
	scheduling = append(scheduling,
		podGroup("team-d", "halves", 3, map[string]string{
			podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":2}`,
			podgroup.SubGroupPolicyAnnotation:  `[{"name":"half","subGroupSize":3,"minSubGroups":1,"matchLabelKeys":["half"],"networkTopology":{"mode":"hard","highestTierAllowed":1}}]`,
		}),
		podGroup("team-d", "elastic", 3, map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`}),
		podGroup("team-d", "stages", 3, map[string]string{
			podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":2}`,
			podgroup.SubGroupPolicyAnnotation:  `[{"name":"stage","subGroupSize":3,"minSubGroups":1,"matchLabelKeys":["stage"],"networkTopology":{"mode":"hard","highestTierAllowed":1}}]`,
		}))
	c := loadObjects(t, kube, topology, scheduling)
	for _, tc := range []struct {
		podGroup string
		want     []string // the search's lines, from the first tier to the verdict
		deferred int
	}{
		{podGroup: "elastic", deferred: 1, want: []string{
			"  tier 1 (leaf), allowed:",
			"    s2  4/5  the planner picks it for 4 of the 5 pods; the rest wait for room",
			"    s1  3/5  free nvidia.com/gpu 12, 4 per pod",
			"    s3  2/5  free nvidia.com/gpu 8, 4 per pod; 1 node: cordoned",
			"    (+1 more)",
			"  tier 2 (spine), above the allowed tier 1, not used:",
			"    s5  5/5  has room, but its tier is above the allowed one",
			"    s4  4/5  free nvidia.com/gpu 16, 4 per pod",
			"  nodes that take no member: loose-0 (not ready), s3-n0 (cordoned)",
			"  planner on this data: it fits now without all its members: the planner would",
			"    place 4 of the 5 pending pods in s2 (tier 1); the remaining 1 waits for room",
			"    (the gang runs with its minMember 3)",
		}},
		// s5 holds the six pods counted alone, not their two sub-groups.
		{podGroup: "halves", deferred: 3, want: []string{
			"  tier 1 (leaf), allowed:",
			"    s2  4/6  free nvidia.com/gpu 16, 4 per pod",
			"    s1  3/6  the planner picks it for 3 of the 6 pods; the rest wait for room",
			"    s3  2/6  free nvidia.com/gpu 8, 4 per pod; 1 node: cordoned",
			"    (+1 more)",
			"  tier 2 (spine), allowed:",
			"    s5  6/6  has room for the job, not for its sub-groups (see the planner",
			"             below)",
			"    s4  4/6  free nvidia.com/gpu 16, 4 per pod",
			"  tier 3 (core), above the allowed tier 2, not used:",
			"    s6  6/6  has room, but its tier is above the allowed one",
			"  nodes that take no member: loose-0 (not ready), s3-n0 (cordoned)",
			"  planner on this data: it fits now without all its members: the planner would",
			"    place 3 of the 6 pending pods in s1 (tier 1); the remaining 3 wait for room:",
			"    the job runs without sub-group half-1 (its minMember and minSubGroups allow",
			"    it)",
		}},
		// One sub-group of three fits in a leaf of either spine, two in none.
		{podGroup: "stages", deferred: 6, want: []string{
			"  tier 1 (leaf), allowed:",
			"    s2  4/9  free nvidia.com/gpu 16, 4 per pod",
			"    s1  3/9  the planner picks it for 3 of the 9 pods; the rest wait for room",
			"    s3  2/9  free nvidia.com/gpu 8, 4 per pod; 1 node: cordoned",
			"    (+1 more)",
			"  tier 2 (spine), allowed:",
			"    s5  6/9  free nvidia.com/gpu 24, 4 per pod; 1 node: cordoned",
			"    s4  4/9  free nvidia.com/gpu 16, 4 per pod",
			"  tier 3 (core), above the allowed tier 2, not used:",
			"    s6  9/9  has room, but its tier is above the allowed one",
			"  nodes that take no member: loose-0 (not ready), s3-n0 (cordoned)",
			"  planner on this data: it fits now without all its members: the planner would",
			"    place 3 of the 9 pending pods in s1 (tier 1); the remaining 6 wait for room:",
			"    the job runs without sub-groups stage-1, stage-2 (its minMember and",
			"    minSubGroups allow it)",
		}},
	} {
		t.Run(tc.podGroup, func(t *testing.T) {
			e, err := c.Explain("team-d", tc.podGroup, "")
			if err != nil {
				t.Fatal(err)
			}
			if e.Search == nil || !e.Search.Fits || e.Search.Deferred != tc.deferred {
				t.Fatalf("search %+v: want it to fit with %d pods deferred", e.Search, tc.deferred)
			}
			for _, tier := range e.Search.Tiers {
				for _, cand := range tier.Candidates {
					if strings.HasPrefix(cand.Reason, "the planner picks it") && !cand.Fits {
						t.Errorf("the picked candidate %s does not fit in the JSON", cand.Name)
					}
				}
			}
			var buf bytes.Buffer
			if err := WriteExplanation(&buf, e); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			from, to := strings.Index(out, "  tier 1"), strings.Index(out, "  (the scheduler also runs")
			if from < 0 || to < from {
				t.Fatalf("no search in:\n%s", out)
			}
			if diff := cmp.Diff(lines(tc.want...), out[from:to]); diff != "" {
				t.Errorf("search (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestExplainSaysWhatHoldsTheMembersBack: members the scheduler keeps out of scheduling (too
// few for minMember, a member without its sub-group label, members whose claims do not exist
// yet) are not called placeable, whatever the capacity: the verdict is the scheduler's reason.
func TestExplainSaysWhatHoldsTheMembersBack(t *testing.T) {
	kube, topology, scheduling := testObjects()
	for i := range 3 {
		kube = append(kube, memberPod("team-f", fmt.Sprintf("short-%d", i), "short", "", nil))
	}
	for i := range 3 {
		labels := map[string]string{"part": "0"}
		if i == 2 {
			labels = nil
		}
		kube = append(kube, memberPod("team-f", fmt.Sprintf("unlabelled-%d", i), "unlabelled", "", labels))
	}
	// Two workers whose claims from a template the controller has not created, one that has.
	for i := range 3 {
		w := devicestest.FromTemplate(memberPod("team-f", fmt.Sprintf("claiming-%d", i), "claiming", "", nil))
		if i == 0 {
			w = devicestest.ClaimCreated(w)
		}
		kube = append(kube, w)
	}
	scheduling = append(scheduling,
		podGroup("team-f", "claiming", 3, nil),
		podGroup("team-f", "short", 4, nil),
		podGroup("team-f", "unlabelled", 3, map[string]string{
			podgroup.SubGroupPolicyAnnotation: `[{"name":"part","subGroupSize":3,"matchLabelKeys":["part"]}]`,
		}))
	c := loadObjects(t, kube, topology, scheduling)
	for name, want := range map[string]string{
		"short":      "the scheduler holds the members back before it plans: waiting for PodGroup team-f/short to have 4 members (minMember); 3 exist",
		"unlabelled": `the scheduler holds the members back before it plans: PodGroup team-f/unlabelled: member unlabelled-2: sub-group policy "part" needs its label(s) part, which it does not have`,
		"claiming":   "the scheduler holds the members back before it plans: waiting for the ResourceClaims of 2 pending members of PodGroup team-f/claiming to be created from their ResourceClaimTemplates",
	} {
		e, err := c.Explain("team-f", name, "")
		if err != nil {
			t.Fatal(err)
		}
		if e.Search == nil || e.Search.Fits || e.Search.Verdict != want {
			t.Fatalf("%s: search %+v, want it not to fit with the verdict %q", name, e.Search, want)
		}
		for _, tier := range e.Search.Tiers {
			for _, cand := range tier.Candidates {
				if strings.Contains(cand.Reason, "planner picks") {
					t.Errorf("%s: candidate %s: %q while the members are held back", name, cand.Name, cand.Reason)
				}
			}
		}
	}
}

// TestExplainLeavesOutEventsOfEarlierObjects: Events of an earlier PodGroup or pod of the same
// name (deleted and created again) are not the scheduler's words about this one.
func TestExplainLeavesOutEventsOfEarlierObjects(t *testing.T) {
	kube, topology, scheduling := testObjects()
	pod := memberPod("team-g", "again-0", "again", "", nil)
	pod.UID = "pod-new"
	pg := podGroup("team-g", "again", 1, nil)
	pg.UID = "pg-new"
	withUID := func(e *v1.Event, uid types.UID) *v1.Event { e.InvolvedObject.UID = uid; return e }
	kube = append(kube, pod,
		withUID(event("team-g", "e1", "PodGroup", "again", v1.EventTypeWarning, "TopologyUnsatisfiable", "about the earlier PodGroup", time.Hour, 1), "pg-old"),
		withUID(event("team-g", "e2", "PodGroup", "again", v1.EventTypeNormal, "GangWaiting", "about this PodGroup", time.Minute, 1), "pg-new"),
		withUID(event("team-g", "e3", "Pod", "again-0", v1.EventTypeWarning, "FailedScheduling", "about the earlier pod", time.Hour, 1), "pod-old"),
		withUID(event("team-g", "e4", "Pod", "again-0", v1.EventTypeWarning, "FailedScheduling", "about this pod", 2*time.Minute, 1), "pod-new"),
		event("team-g", "e5", "Pod", "again-0", v1.EventTypeNormal, "Nominated", "without a UID", 3*time.Minute, 1))
	c := loadObjects(t, kube, topology, append(scheduling, pg))
	e, err := c.Explain("team-g", "again", "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range e.Scheduler.Events {
		got = append(got, ev.Message)
	}
	if diff := cmp.Diff([]string{"about this PodGroup", "about this pod", "without a UID"}, got); diff != "" {
		t.Errorf("Events (-want,+got):\n%s", diff)
	}
}

// TestExplainLeavesOutWhatDRAProvides: GPUs that a DeviceClass provides through DRA are in no
// node's allocatable; capacity is counted from the other requests and the report says which
// resource it left out. When DeviceClasses cannot be read, explain warns instead.
func TestExplainLeavesOutWhatDRAProvides(t *testing.T) {
	// objects are two nodes without GPUs in their allocatable and two members requesting
	// 4 GPUs by the given name.
	objects := func(gpu v1.ResourceName) []runtime.Object {
		var objs []runtime.Object
		for _, name := range []string{"d0", "d1"} {
			n := gpuNode(name)
			delete(n.Status.Allocatable, "nvidia.com/gpu")
			objs = append(objs, n)
		}
		for _, name := range []string{"dra-0", "dra-1"} {
			p := memberPod("team-h", name, "dra", "", nil)
			requests := p.Spec.Containers[0].Resources.Requests
			delete(requests, "nvidia.com/gpu")
			requests[gpu] = resource.MustParse("4")
			p.Spec.Containers[0].Resources.Limits = v1.ResourceList{gpu: resource.MustParse("4")}
			objs = append(objs, p)
		}
		return objs
	}
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.nvidia.com"},
		Spec: resourcev1.DeviceClassSpec{ExtendedResourceName: ptr.To("nvidia.com/gpu")}}
	for _, tc := range []struct {
		name       string
		gpu        v1.ResourceName
		forbidden  bool
		notCounted []string
		holds      int
		warning    string
	}{
		{name: "DeviceClasses read", gpu: "nvidia.com/gpu", notCounted: []string{"nvidia.com/gpu"}, holds: 2},
		// A class also answers to its implicit name.
		{name: "the class's implicit name", gpu: "deviceclass.resource.kubernetes.io/gpu.nvidia.com",
			notCounted: []string{"deviceclass.resource.kubernetes.io/gpu.nvidia.com"}, holds: 2},
		{name: "DeviceClasses forbidden", gpu: "nvidia.com/gpu", forbidden: true, holds: 0,
			warning: "no node has nvidia.com/gpu in its allocatable, and DeviceClasses could not be read to tell whether DRA provides it (then its capacity figures are wrong): deviceclasses.resource.k8s.io is forbidden: RBAC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := kubefake.NewClientset(append(objects(tc.gpu), class)...)
			if tc.forbidden {
				kube.PrependReactor("list", "deviceclasses", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "resource.k8s.io", Resource: "deviceclasses"}, "", errors.New("RBAC"))
				})
			}
			c, err := Load(context.Background(), Clients{Kube: kube,
				Topology:   topologyfake.NewSimpleClientset(hntesting.MakeHyperNode("leaf").Tier(1).Nodes("d0", "d1").Obj()),
				Scheduling: schedfake.NewSimpleClientset(podGroup("team-h", "dra", 2, map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`}))})
			if err != nil {
				t.Fatal(err)
			}
			e, err := c.Explain("team-h", "dra", "cpu")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.notCounted, e.Search.NotCounted); diff != "" {
				t.Errorf("not counted (-want,+got):\n%s", diff)
			}
			if got := e.Search.Tiers[0].Candidates[0].Holds; got != tc.holds {
				t.Errorf("the leaf holds %d of the 2 pods, want %d", got, tc.holds)
			}
			var warnings []string
			if tc.warning != "" {
				warnings = []string{tc.warning}
			}
			if diff := cmp.Diff(warnings, e.Warnings); diff != "" {
				t.Errorf("warnings (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestExplainJudgesNodesAsTheSchedulerDoes: a node takes members unless kube-scheduler's
// NodeUnschedulable or TaintToleration filter keeps them off, so members that tolerate a
// cordon or a not-ready taint count it, and a Ready condition alone refuses nobody.
func TestExplainJudgesNodesAsTheSchedulerDoes(t *testing.T) {
	readyFalseUntainted := func(n *v1.Node) { n.Status.Conditions[0].Status = v1.ConditionFalse }
	tainted := func(key string, effect v1.TaintEffect) func(*v1.Node) {
		return func(n *v1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Value: "x", Effect: effect})
		}
	}
	nodes := []runtime.Object{
		gpuNode("cordoned", cordoned), gpuNode("not-ready", notReady),
		gpuNode("unreachable", tainted(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute)),
		gpuNode("gpu-taint", tainted("nvidia.com/gpu", v1.TaintEffectNoSchedule)),
		gpuNode("prefer", tainted("spot", v1.TaintEffectPreferNoSchedule)),
		gpuNode("ready-false", readyFalseUntainted),
	}
	all := []string{"cordoned", "gpu-taint", "not-ready", "prefer", "ready-false", "unreachable"}
	for _, tc := range []struct {
		name        string
		tolerations []v1.Toleration
		want        []NodeReason
		// holds is the leaf's capacity: two members of 4 GPUs per node that takes them.
		holds int
	}{{
		name:  "no toleration",
		holds: 4,
		want: []NodeReason{{"cordoned", "cordoned"}, {"gpu-taint", "taint nvidia.com/gpu=x:NoSchedule not tolerated"},
			{"not-ready", "not ready"}, {"unreachable", "unreachable"}},
	}, {
		name: "the cordon and the not-ready taint tolerated",
		tolerations: []v1.Toleration{
			{Key: v1.TaintNodeUnschedulable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
			{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists},
		},
		want:  []NodeReason{{"gpu-taint", "taint nvidia.com/gpu=x:NoSchedule not tolerated"}, {"unreachable", "unreachable"}},
		holds: 8,
	}, {
		name:        "everything tolerated",
		tolerations: []v1.Toleration{{Operator: v1.TolerationOpExists}},
		holds:       12,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			kube := append([]runtime.Object{}, nodes...)
			for i := range 12 {
				p := memberPod("team-t", fmt.Sprintf("job-%d", i), "job", "", nil)
				p.Spec.Tolerations = tc.tolerations
				kube = append(kube, p)
			}
			topology := []runtime.Object{hntesting.MakeHyperNode("leaf").Tier(1).Nodes(all...).Obj()}
			scheduling := []runtime.Object{podGroup("team-t", "job", 12, map[string]string{
				podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`})}
			e, err := loadObjects(t, kube, topology, scheduling).Explain("team-t", "job", "")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, e.Search.UnusableNodes); diff != "" {
				t.Errorf("nodes that take no member (-want +got):\n%s", diff)
			}
			if got := e.Search.Tiers[0].Candidates[0].Holds; got != tc.holds {
				t.Errorf("leaf holds %d members, want %d", got, tc.holds)
			}
		})
	}
}

// TestExplainTakesTheSchedulersDefault: a PodGroup without a constraint is a plain gang
// unless the user says the scheduler sets a default (--default-network-topology); then it is
// explained as the scheduler places it, under that default, and says where it came from.
func TestExplainTakesTheSchedulersDefault(t *testing.T) {
	kube := []runtime.Object{gpuNode("a-n0"), gpuNode("a-n1"), gpuNode("b-n0"), gpuNode("b-n1"),
		memberPod("team-x", "busy-0", "busy", "b-n0", nil), memberPod("team-x", "busy-1", "busy", "b-n1", nil),
		memberPod("team-x", "job-0", "job", "", nil), memberPod("team-x", "job-1", "job", "", nil)}
	topology := []runtime.Object{
		hntesting.MakeHyperNode("a").Tier(1).Nodes("a-n0", "a-n1").Obj(),
		hntesting.MakeHyperNode("b").Tier(1).Nodes("b-n0", "b-n1").Obj(),
	}
	scheduling := []runtime.Object{podGroup("team-x", "busy", 2, nil), podGroup("team-x", "job", 2, nil)}

	c := loadObjects(t, kube, topology, scheduling)
	plain, err := c.Explain("team-x", "job", "")
	if err != nil {
		t.Fatal(err)
	}
	if plain.NetworkTopology != nil {
		t.Errorf("without a default: network topology %+v, want none", plain.NetworkTopology)
	}

	c = loadObjects(t, kube, topology, scheduling)
	c.DefaultTopology = &podgroup.NetworkTopology{Mode: podgroup.ModeHard, HighestTierAllowed: ptr.To(1)}
	e, err := c.Explain("team-x", "job", "")
	if err != nil {
		t.Fatal(err)
	}
	want := &ConstraintReport{Parsed: c.DefaultTopology, Default: true, MaxTier: 1,
		Description: "hard topology (tier<=1) (the scheduler's defaultNetworkTopology)"}
	if diff := cmp.Diff(want, e.NetworkTopology); diff != "" {
		t.Errorf("network topology (-want,+got):\n%s", diff)
	}
	const verdict = "it fits now: the planner would place the 2 pending pods in b (tier 1)"
	if e.Search == nil || e.Search.Verdict != verdict {
		t.Errorf("verdict %+v, want %q", e.Search, verdict)
	}
}

// TestTreeAndExplainShowHolds: the domain a PodGroup's record says the scheduler holds for it
// shows on its HyperNode in the tree and in the gang's explanation; an unusable hold-after
// annotation is explained, with the field.
func TestTreeAndExplainShowHolds(t *testing.T) {
	kube, topology, scheduling := testObjects()
	record := (&podgroup.HoldRecord{Domain: "s5", Tier: 2, Nodes: []string{"s2-n0", "s2-n1", "s3-n1"}, Priority: 10, Since: now.Add(-3 * time.Minute)}).Encode()
	for _, obj := range scheduling {
		if pg := obj.(*schedulingv1alpha1.PodGroup); pg.Name == "big" {
			pg.Annotations[podgroup.HoldAnnotation] = record
		}
	}
	scheduling = append(scheduling, podGroup("team-a", "bad-hold", 1, map[string]string{podgroup.HoldAfterAnnotation: "soon"}))
	c := loadObjects(t, kube, topology, scheduling)

	var tree bytes.Buffer
	if err := WriteTree(&tree, c.Tree("")); err != nil {
		t.Fatal(err)
	}
	if want := "    s5     2 spine    3/4     32    24  yes    ufm\n      held for: team-a/big (3 nodes, for 3m)\n"; !strings.Contains(tree.String(), want) {
		t.Errorf("tree:\n%s\nwant it to contain:\n%s", tree.String(), want)
	}

	e, err := c.Explain("team-a", "big", "")
	if err != nil {
		t.Fatal(err)
	}
	want := &HoldReport{PodGroup: "team-a/big", Domain: "s5", Tier: 2, Nodes: []string{"s2-n0", "s2-n1", "s3-n1"}, Priority: 10, Since: now.Add(-3 * time.Minute), Age: "3m"}
	if diff := cmp.Diff(want, e.Hold); diff != "" {
		t.Errorf("hold (-want,+got):\n%s", diff)
	}
	var text bytes.Buffer
	if err := WriteExplanation(&text, e); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"Hold: the scheduler holds s5 (tier 2) for this gang, for 3m (since",
		"  nodes: s2-n0, s2-n1, s3-n1",
	} {
		if !strings.Contains(text.String(), line) {
			t.Errorf("explanation:\n%s\nwant it to contain %q", text.String(), line)
		}
	}

	e, err = c.Explain("team-a", "bad-hold", "")
	if err != nil {
		t.Fatal(err)
	}
	if want := `metadata.annotations[hypernode.dev/hold-after]: Invalid value: "soon": must be a duration of 0s or more, such as "90s" or "5m", or "never"`; e.HoldError != want {
		t.Errorf("hold error %q, want %q", e.HoldError, want)
	}
}
