package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/demo"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/inspect"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/localcluster"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
)

// nativeFabric is sp0 {l0: n0 n1, l1: n2 n3} and sp1 {l2: n4 n5, l3: n6 n7}.
const nativeFabric = `
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: l0}
spec: {tier: 1, members: [{type: Node, selector: {exactMatch: {name: n0}}}, {type: Node, selector: {exactMatch: {name: n1}}}]}
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: l1}
spec: {tier: 1, members: [{type: Node, selector: {exactMatch: {name: n2}}}, {type: Node, selector: {exactMatch: {name: n3}}}]}
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: l2}
spec: {tier: 1, members: [{type: Node, selector: {exactMatch: {name: n4}}}, {type: Node, selector: {exactMatch: {name: n5}}}]}
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: l3}
spec: {tier: 1, members: [{type: Node, selector: {exactMatch: {name: n6}}}, {type: Node, selector: {exactMatch: {name: n7}}}]}
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: sp0}
spec: {tier: 2, members: [{type: HyperNode, selector: {exactMatch: {name: l0}}}, {type: HyperNode, selector: {exactMatch: {name: l1}}}]}
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: sp1}
spec: {tier: 2, members: [{type: HyperNode, selector: {exactMatch: {name: l2}}}, {type: HyperNode, selector: {exactMatch: {name: l3}}}]}
`

// TestNativeJobInOneLeaf: on a control plane with Kubernetes' own pod groups turned on
// (GenericWorkload, TopologyAwareWorkloadScheduling, WorkloadWithJob), the real Job controller
// creates the Workload and PodGroup of a Job with spec.scheduling (a gang of 4, topology key
// hypernode.dev/tier-1), and our scheduler, in the pod-group cycle, places it in the one leaf
// that holds it: l3, whose nodes the per-pod scores avoid (PreferNoSchedule), while one CPU is
// taken on a node of every other leaf.
func TestNativeJobInOneLeaf(t *testing.T) {
	ctx := t.Context()
	c, err := localcluster.Start(ctx, localcluster.Options{RepoRoot: repoRoot, Log: os.Stderr, NativePodGroups: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	t.Cleanup(func() { assertSchedulerAuthorized(t, c.Dir) })

	var nodes []*v1.Node
	for i := range 8 {
		n := localcluster.SimulatedNode(fmt.Sprintf("n%d", i), nil, v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("10")})
		if i >= 6 {
			n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: "example.com/cold", Effect: v1.TaintEffectPreferNoSchedule})
		}
		nodes = append(nodes, n)
	}
	if err := c.AddNodes(ctx, nodes...); err != nil {
		t.Fatal(err)
	}
	objs, err := localcluster.Decode([]byte(nativeFabric))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Applier.Apply(ctx, objs, "", false); err != nil {
		t.Fatal(err)
	}
	const ns = "default"
	for _, n := range []string{"n0", "n2", "n4"} {
		busy := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "busy-" + n}, Spec: v1.PodSpec{NodeName: n,
			Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}}}}
		if _, err := c.Kube.CoreV1().Pods(ns).Create(ctx, busy, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train"}, Spec: batchv1.JobSpec{
		Parallelism: ptr.To[int32](4), Completions: ptr.To[int32](4), CompletionMode: ptr.To(batchv1.IndexedCompletion),
		Scheduling: &batchv1.JobSchedulingConfiguration{
			SchedulingPolicy: &schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy{
				Gang: &schedulingv1alpha3.WorkloadPodGroupGangSchedulingPolicy{MinCount: ptr.To[int32](4)}},
			SchedulingConstraints: &schedulingv1alpha3.WorkloadPodGroupSchedulingConstraints{
				Topology: []schedulingv1alpha3.TopologyConstraint{{Key: "hypernode.dev/tier-1"}}},
		},
		Template: v1.PodTemplateSpec{Spec: v1.PodSpec{SchedulerName: plugins.SchedulerName, RestartPolicy: v1.RestartPolicyNever,
			Containers: []v1.Container{{Name: "worker", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}}}},
	}}
	if _, err := c.Kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The Job controller's objects: one Workload and one PodGroup, a gang of 4 with the key.
	var podGroup string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pgs, err := c.Kube.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(pgs.Items) == 0 {
			return false, err
		}
		pg := pgs.Items[0]
		minCount := int32(0)
		if g := pg.Spec.SchedulingPolicy.Gang; g != nil {
			minCount = g.MinCount
		}
		var keys []string
		if sc := pg.Spec.SchedulingConstraints; sc != nil {
			for _, tc := range sc.Topology {
				keys = append(keys, tc.Key)
			}
		}
		podGroup = fmt.Sprintf("%d PodGroup(s), %s: minCount %d, topology keys %v", len(pgs.Items), pg.Name, minCount, keys)
		return true, nil
	}); err != nil {
		t.Fatalf("the Job controller created no PodGroup: %v", err)
	}
	if want := "1 PodGroup(s), "; len(podGroup) < len(want) || podGroup[:len(want)] != want {
		t.Errorf("PodGroups: %s; want one", podGroup)
	}
	if !strings.HasSuffix(podGroup, ": minCount 4, topology keys [hypernode.dev/tier-1]") {
		t.Errorf("the Job controller's PodGroup: %s; want minCount 4 and the key hypernode.dev/tier-1", podGroup)
	}
	wls, err := c.Kube.SchedulingV1beta1().Workloads(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(wls.Items) != 1 {
		t.Fatalf("Workloads: %v, %v; want the Job controller's one", wls, err)
	}

	bound := map[string]string{}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=train"})
		if err != nil {
			return false, err
		}
		clear(bound)
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound[p.Name] = p.Spec.NodeName
			}
		}
		return len(bound) == 4, nil
	}); err != nil {
		t.Fatalf("the Job's pods bound: %v (%s); want 4", bound, podGroup)
	}
	var placed []string
	for _, n := range bound {
		placed = append(placed, n)
	}
	sort.Strings(placed)
	if diff := cmp.Diff([]string{"n6", "n6", "n7", "n7"}, placed); diff != "" {
		t.Errorf("the Job's nodes (-want +got):\n%s\n(%s)", diff, podGroup)
	}

	// The demo's native scene on the same control plane: its Job in one leaf of the 64-node
	// fabric, explained as a native pod group.
	runner, err := demo.NewRunner(c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	scene := demo.NativeScene()
	if err := runner.Setup(ctx, scene); err != nil {
		t.Fatal(err)
	}
	for _, j := range scene.Jobs {
		res, err := runner.Submit(ctx, scene, j)
		if err != nil {
			t.Fatal(err)
		}
		e, err := runner.ReportJob(ctx, scene.Namespace, j)
		if err != nil {
			t.Fatal(err)
		}
		if err := demo.Check(res, e); err != nil {
			t.Error(err)
		}
		if e.API != inspect.NativeAPI || e.Placement == nil || e.Placement.Tier != 1 || e.NetworkTopology.TopologyKey != "hypernode.dev/tier-1" {
			t.Errorf("the demo's native job explained as %+v; want a native pod group placed at tier 1 by its key", e)
		}
	}
}
