package inspect

import (
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	schedfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"

	topologyfake "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned/fake"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/jobspec"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

// nativeGroup is a native gang pod group of minCount with a topology key ("" for none) and
// annotations.
func nativeGroup(namespace, name string, minCount int32, key string, annotations map[string]string) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: annotations},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}}}
	if key != "" {
		pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: key}}}
	}
	return pg
}

// TestExplainNativePodGroup: a native pod group is explained as a PodGroup is, its tier
// label topology key read as the hard constraint it means; a foreign key is said to be
// beyond explain; the tree counts native members as a gang's.
func TestExplainNativePodGroup(t *testing.T) {
	kube := []runtime.Object{gpuNode("a-n0"), gpuNode("a-n1"), gpuNode("b-n0"), gpuNode("b-n1")}
	for _, group := range []string{"tiered", "racked"} {
		for i := range 3 {
			p := memberPod("team-x", fmt.Sprintf("%s-%d", group, i), "", "", nil)
			delete(p.Labels, "scheduling.x-k8s.io/pod-group")
			p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
			kube = append(kube, p)
		}
	}
	running := memberPod("team-x", "ran-0", "", "b-n0", nil)
	delete(running.Labels, "scheduling.x-k8s.io/pod-group")
	running.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("ran")}
	kube = append(kube, running,
		nativeGroup("team-x", "tiered", 3, "hypernode.dev/tier-1", nil),
		nativeGroup("team-x", "racked", 3, "example.com/rack", nil),
		nativeGroup("team-x", "ran", 1, "", nil))
	topology := []runtime.Object{
		hntesting.MakeHyperNode("a").Tier(1).Nodes("a-n0", "a-n1").Obj(),
		hntesting.MakeHyperNode("b").Tier(1).Nodes("b-n0", "b-n1").Obj(),
		hntesting.MakeHyperNode("s").Tier(2).Children("a", "b").Obj(),
	}
	c := loadObjects(t, kube, topology, nil)

	e, err := c.Explain("team-x", "tiered", "")
	if err != nil {
		t.Fatal(err)
	}
	got := []string{e.API, e.NetworkTopology.Annotation, e.NetworkTopology.TopologyKey, e.NetworkTopology.Description, fmt.Sprint(e.MinMember), e.Search.Verdict}
	want := []string{NativeAPI, "", "hypernode.dev/tier-1", "hard topology (tier<=1)", "3", e.Search.Verdict}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("explain tiered (-want +got):\n%s", diff)
	}
	if !e.Search.Fits || e.Search.Tiers[0].Tier != 1 {
		t.Errorf("search %+v, want a fit at tier 1", e.Search)
	}
	var text strings.Builder
	if err := WriteExplanation(&text, e); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"Pod group (scheduling.k8s.io/v1beta1) team-x/tiered: ", "network topology: hard topology (tier<=1) (schedulingConstraints topology key"} {
		if !strings.Contains(text.String(), line) {
			t.Errorf("explain text lacks %q:\n%s", line, text.String())
		}
	}

	e, err = c.Explain("team-x", "racked", "")
	if err != nil {
		t.Fatal(err)
	}
	wantWarning := "its topology key example.com/rack is not a HyperNode tier label (hypernode.dev/tier-N): the scheduler places it in one domain of that label, which explain does not analyse"
	if !contains(e.Warnings, wantWarning) {
		t.Errorf("warnings %q, want %q", e.Warnings, wantWarning)
	}

	if diff := cmp.Diff([]PodGroupCount{{PodGroup: "team-x/ran", Pods: 1}}, c.Tree("").Root.PodGroups); diff != "" {
		t.Errorf("tree occupants (-want +got):\n%s", diff)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestPlanNativeJob: a Job with spec.scheduling is planned as the Job controller's native gang
// (its tier label key hard at tier 1) where the cluster serves native pod groups, and refused
// where it does not.
func TestPlanNativeJob(t *testing.T) {
	objs, err := jobspec.ReadBytes([]byte(`apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: team-a}
spec:
  parallelism: 4
  completionMode: Indexed
  scheduling:
    schedulingPolicy: {gang: {minCount: 4}}
    schedulingConstraints: {topology: [{key: hypernode.dev/tier-1}]}
  template:
    spec:
      schedulerName: hypernode-scheduler
      containers:
      - name: c
        image: x
        resources: {requests: {nvidia.com/gpu: "4", cpu: "8", memory: 32Gi}}
`))
	if err != nil {
		t.Fatal(err)
	}
	job, err := jobspec.Derive(objs, "team-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := loadTestCluster(t)
	r, err := c.Plan(job, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{fmt.Sprint(r.Native, r.Placed), r.PodGroupFrom, r.NetworkTopology.Description, r.Placement.Domain}
	// The test cluster's only leaf with 16 free GPUs is s2.
	if diff := cmp.Diff([]string{"true true", jobspec.FromController, "hard topology (tier<=1)", "s2"}, got); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	var text strings.Builder
	if err := WritePlan(&text, r); err != nil {
		t.Fatal(err)
	}
	if want := "Native pod group team-a/train (as the job's controller will create it),"; !strings.Contains(text.String(), want) {
		t.Errorf("plan text lacks %q:\n%s", want, text.String())
	}

	c.NativeServed = false
	_, err = c.Plan(job, PlanOptions{})
	want := "Job train is a native pod group (scheduling.k8s.io/v1beta1), which this cluster does not serve: turn on the GenericWorkload and TopologyAwareWorkloadScheduling gates " +
		`(docs/user-guide.md, "Native pod groups"), or use a PodGroup (scheduling.x-k8s.io/v1alpha1)`
	if err == nil || err.Error() != want {
		t.Errorf("plan where native pod groups are not served: %v, want %q", err, want)
	}
}

// TestNativeServedReadFromTheCluster: a cluster whose apiserver does not serve native pod
// groups (the list is NotFound) is recorded as such, without a warning.
func TestNativeServedReadFromTheCluster(t *testing.T) {
	kube := kubefake.NewClientset()
	kube.PrependReactor("list", "podgroups", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schedulingv1beta1.Resource("podgroups"), "")
	})
	c, err := Load(t.Context(), Clients{Kube: kube, Topology: topologyfake.NewSimpleClientset(), Scheduling: schedfake.NewSimpleClientset()})
	if err != nil {
		t.Fatal(err)
	}
	if c.NativeServed || len(c.Warnings) != 0 {
		t.Errorf("NativeServed %v, warnings %q; want false and none", c.NativeServed, c.Warnings)
	}
	if served := loadTestCluster(t).NativeServed; !served {
		t.Errorf("a cluster that lists native pod groups: NativeServed false")
	}
}
