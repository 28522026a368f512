package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/demo"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/inspect"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/jobspec"
)

const planNS = "plan"

// kubectlHypernode runs bin/kubectl-hypernode as the admin with stdin and returns its
// standard output, standard error and exit code.
func kubectlHypernode(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(repoRoot, "bin", "kubectl-hypernode"), append([]string{"--kubeconfig", cluster.AdminKubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return out.String(), errOut.String(), exit.ExitCode()
	case err != nil:
		t.Fatalf("kubectl-hypernode %v: %v", args, err)
	}
	return out.String(), errOut.String(), 0
}

// planOf runs plan -o json on a manifest in namespace ns and decodes the report.
func planOf(t *testing.T, ns, manifest string, extra ...string) inspect.PlanReport {
	t.Helper()
	out, errOut, code := kubectlHypernode(t, manifest, append([]string{"plan", "-f", "-", "-n", ns, "-o", "json"}, extra...)...)
	if code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errOut)
	}
	var r inspect.PlanReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, out)
	}
	if r.Note != inspect.NothingChanged {
		t.Errorf("plan note %q", r.Note)
	}
	return r
}

// allPods is every live pod of the namespace: name -> UID.
func allPods(t *testing.T) map[string]types.UID {
	t.Helper()
	pods, err := cluster.Kube.CoreV1().Pods(planNS).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]types.UID{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p.UID
		}
	}
	return out
}

// plannedLeaves is each planned member's leaf by rank ("" key: members without a rank, by
// name).
func plannedLeaves(t *testing.T, r inspect.PlanReport) map[string]string {
	t.Helper()
	if !r.Placed || r.Placement == nil {
		t.Fatalf("%s is not placed: %s", r.Job, r.Search.Verdict)
	}
	out := map[string]string{}
	for _, m := range r.Placement.Members {
		key := m.Pod
		if m.Rank != nil {
			key = "rank " + strconv.Itoa(*m.Rank)
		}
		out[key] = m.Leaf
	}
	return out
}

// boundLeaves is each bound member's leaf, keyed as plannedLeaves (pods of an Indexed Job by
// their completion index).
func boundLeaves(t *testing.T, group string, n int) map[string]string {
	t.Helper()
	waitGangBound(t, planNS, group, n, 2*time.Minute)
	pods, err := cluster.Kube.CoreV1().Pods(planNS).List(t.Context(), metav1.ListOptions{LabelSelector: demo.PodGroupLabel + "=" + group})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		key := p.Name
		if idx, ok := p.Labels["batch.kubernetes.io/job-completion-index"]; ok {
			key = "rank " + idx
		}
		out[key] = leafIn(t, "fabric-64", p.Spec.NodeName)
	}
	return out
}

// fillerYAML is a pod of priority 0 bound to node (nodeName: no scheduler involved) taking
// its 8 GPUs.
func fillerYAML(name, node string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  nodeName: %s
  containers:
  - name: c
    image: registry.example.com/busy:latest
    resources:
      limits:
        nvidia.com/gpu: "8"
`, name, node)
}

// capacityOf runs capacity --gpu 8 -o json and returns "largest@domain" per tier.
func capacityOf(t *testing.T) []string {
	t.Helper()
	out, errOut, code := kubectlHypernode(t, "", "capacity", "--gpu", "8", "-o", "json")
	if code != 0 {
		t.Fatalf("capacity: exit %d: %s", code, errOut)
	}
	var r inspect.CapacityReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tier := range r.Tiers {
		got = append(got, fmt.Sprintf("%d@%s", tier.Largest, tier.Domain))
	}
	return got
}

// TestPlanThenSubmit: on the 64-node fabric, plan says where each job goes, and the job,
// submitted next, lands exactly there: an Indexed Job in one leaf (each rank in the planned
// leaf), the demo's job with tensor-parallel sub-groups (each rank in its planned leaf), and
// a job of high priority that does not fit, whose plan names the victims that preemption
// then evicts, exactly. capacity is checked against hand-counted figures as the fabric fills.
func TestPlanThenSubmit(t *testing.T) {
	restartScene(t, planNS)
	ctx := t.Context()
	high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "plan-high"}, Value: 1000}
	if _, err := cluster.Kube.SchedulingV1().PriorityClasses().Create(ctx, high, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = cluster.Kube.SchedulingV1().PriorityClasses().Delete(ctx, high.Name, metav1.DeleteOptions{})
		err := cluster.Kube.BatchV1().Jobs(planNS).DeleteCollection(ctx,
			metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}, metav1.ListOptions{})
		if err != nil {
			t.Errorf("deleting the Jobs: %v", err)
		}
		// The victim's Preempted Event: the troubleshooting guide lists them cluster-wide.
		if err := cluster.Kube.CoreV1().Events(planNS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Errorf("deleting the Events: %v", err)
		}
	})

	// Empty: every leaf holds 8 pods of 8 GPUs, a spine 32, the core and the cluster 64.
	if diff := cmp.Diff([]string{"8@leaf-0", "32@spine-0", "64@core", "64@<cluster>"}, capacityOf(t)); diff != "" {
		t.Errorf("capacity of the empty fabric (-want +got):\n%s", diff)
	}
	// One pod of priority 0 on the last node of every leaf.
	for leaf := range 8 {
		applyYAML(t, planNS, fillerYAML(fmt.Sprintf("filler-%d", leaf), fmt.Sprintf("gpu-%02d", leaf*8+7)))
	}
	if diff := cmp.Diff([]string{"7@leaf-0", "28@spine-0", "56@core", "56@<cluster>"}, capacityOf(t)); diff != "" {
		t.Errorf("capacity with a filler per leaf (-want +got):\n%s", diff)
	}

	// An Indexed Job of 6 in one leaf.
	indexed := podGroupYAML("ranks", 6, 1) + "---" + strings.Replace(jobYAML("ranks", 6, "", ourScheduler),
		"  parallelism: 6\n", "  parallelism: 6\n  completions: 6\n  completionMode: Indexed\n", 1)
	before := allPods(t)
	r := planOf(t, planNS, indexed)
	if r.Kind != "Job" || r.PodGroup != "plan/ranks" || r.PodGroupFrom != "file" || r.Placement.Tier != 1 || r.Placement.Leaves != 1 || r.Placement.MinLeaves != 1 {
		t.Fatalf("plan of ranks: %+v", r)
	}
	if diff := cmp.Diff(before, allPods(t)); diff != "" {
		t.Fatalf("plan changed the pods (-before +after):\n%s", diff)
	}
	want := plannedLeaves(t, r)
	applyYAML(t, planNS, indexed)
	if diff := cmp.Diff(want, boundLeaves(t, "ranks", 6)); diff != "" {
		t.Errorf("ranks bound elsewhere than planned (-plan +bound):\n%s", diff)
	}

	// The demo's Indexed Job of two tensor-parallel sub-groups of 4, each in a leaf.
	partitions, err := os.ReadFile(filepath.Join(repoRoot, "manifests", "examples", "indexed-job-partitions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r = planOf(t, planNS, string(partitions))
	if r.SubGroups == nil || len(r.SubGroups.Policies) != 1 || r.Placement.Leaves != 2 {
		t.Fatalf("plan of llm-train: sub-groups %+v, placement %+v", r.SubGroups, r.Placement)
	}
	want = plannedLeaves(t, r)
	applyYAML(t, planNS, string(partitions))
	if diff := cmp.Diff(want, boundLeaves(t, "llm-train", 8)); diff != "" {
		t.Errorf("llm-train bound elsewhere than planned (-plan +bound):\n%s", diff)
	}

	// A job of 8 that needs a whole leaf: none is free. At priority 1000, preemption would
	// evict one filler (the cheapest leaf); the job, submitted with that priority, evicts
	// exactly that pod and lands in that leaf.
	urgent := podGroupYAML("urgent", 8, 1) + "---" + jobYAML("urgent", 8, "", ourScheduler+"      priorityClassName: plan-high\n")
	before = allPods(t)
	r = planOf(t, planNS, urgent, "--priority", "1000")
	if r.Placed || r.Preemption == nil || !r.Preemption.Helps || r.Preemption.Priority != 1000 {
		t.Fatalf("plan of urgent: placed %v, preemption %+v", r.Placed, r.Preemption)
	}
	if !strings.HasPrefix(r.Preemption.Config, "the running scheduler's configuration (ConfigMap hypernode-system/hypernode-scheduler-config)") &&
		!strings.HasPrefix(r.Preemption.Config, "the shipped configuration") {
		t.Errorf("preemption config %q", r.Preemption.Config)
	}
	var victims []string
	for _, v := range r.Preemption.Victims {
		victims = append(victims, strings.TrimPrefix(v.Pod, planNS+"/"))
		if v.Priority != 0 || v.PDBViolated || v.Gang != "" {
			t.Errorf("victim %+v", v)
		}
	}
	if len(victims) != 1 || !strings.HasPrefix(victims[0], "filler-") {
		t.Fatalf("plan's victims %v, want one filler", victims)
	}
	if r.WaitsFor == nil || len(r.WaitsFor.Occupants) != 1 || r.WaitsFor.Occupants[0].Name != planNS+"/"+victims[0] {
		t.Errorf("plan's waits-for %+v, want the filler %s", r.WaitsFor, victims[0])
	}
	if diff := cmp.Diff(before, allPods(t)); diff != "" {
		t.Fatalf("plan evicted or created pods (-before +after):\n%s", diff)
	}
	applyYAML(t, planNS, urgent)
	_, nodes := waitGangBound(t, planNS, "urgent", 8, 2*time.Minute)
	for pod, node := range nodes {
		if leaf := leafIn(t, "fabric-64", node); leaf != r.Preemption.Domain {
			t.Errorf("urgent's %s on %s in %s, plan said %s", pod, node, leaf, r.Preemption.Domain)
		}
	}
	after := allPods(t)
	var evicted []string
	for name, uid := range before {
		if after[name] != uid {
			evicted = append(evicted, name)
		}
	}
	sort.Strings(evicted)
	if diff := cmp.Diff(victims, evicted); diff != "" {
		t.Errorf("evicted pods (-plan +evicted):\n%s", diff)
	}
}

// TestPlanRefusesBadInput: the exact messages and exit codes of plan for input it cannot plan.
func TestPlanRefusesBadInput(t *testing.T) {
	const see = "See 'kubectl hypernode --help'.\n"
	for _, tc := range []struct {
		name, input, wantErr string
		wantCode             int
	}{{
		name:     "unknown kind",
		input:    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n",
		wantErr:  "error: unknown kind Deployment (apps/v1) of \"web\": plan knows PodGroup (scheduling.x-k8s.io/v1alpha1) with its Pods or a PodTemplate, PodGroup (scheduling.k8s.io/v1beta1) with its Pods, Job (batch/v1) with a PodGroup or spec.scheduling, PyTorchJob (kubeflow.org/v1), MPIJob (kubeflow.org/v2beta1), RayCluster (ray.io/v1)\n" + see,
		wantCode: 2,
	}, {
		name:     "malformed file",
		input:    "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n",
		wantErr:  "error: reading -: document 1: error converting YAML to JSON: yaml: line 3: did not find expected node content\n" + see,
		wantCode: 2,
	}, {
		name:     "Job without a PodGroup label",
		input:    jobYAML("lone", 2, "", ourScheduler),
		wantErr:  "error: Job lone: its pod template has no scheduling.x-k8s.io/pod-group label and the Job no spec.scheduling, so the scheduler places its pods one at a time, not as a gang; label the template with the name of its PodGroup, or give the Job spec.scheduling\n" + see,
		wantCode: 2,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.input = strings.ReplaceAll(tc.input, "        scheduling.x-k8s.io/pod-group: lone\n", "        team: a\n")
			out, errOut, code := kubectlHypernode(t, tc.input, "plan", "-f", "-", "-n", planNS)
			if code != tc.wantCode || out != "" {
				t.Errorf("exit %d, stdout %q; want %d and nothing", code, out, tc.wantCode)
			}
			if diff := cmp.Diff(tc.wantErr, errOut); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
	// An invalid annotation is the scheduler's refusal, not an error of the command line.
	out, _, code := kubectlHypernode(t, strings.Replace(podGroupYAML("bad", 2, 1), `"highestTierAllowed":1`, `"highestTierAllowed":"one"`, 1)+"---"+
		jobYAML("bad", 2, "", ourScheduler), "plan", "-f", "-", "-n", planNS, "--fail-if-pending")
	if code != 3 || !strings.Contains(strings.Join(strings.Fields(out), " "), "network topology: INVALID, the members stay pending: annotation hypernode.dev/network-topology: is not a valid") {
		t.Errorf("invalid annotation: exit %d, output:\n%s", code, out)
	}
}

// TestPlanDerivesTheMPIOperatorsGang: plan derives an MPIJob's gang as Kubeflow's mpi-operator
// (the real one) then creates it, compared field by field (the PodGroup's spec and
// annotations, each worker's name and labels, the launcher's name), and the gang lands in
// the leaf plan said, each pod where planned.
func TestPlanDerivesTheMPIOperatorsGang(t *testing.T) {
	const ns, job, workers = "mpi-plan", "pi", 4
	restartScene(t, ns)
	ctx := t.Context()
	startMPIOperator(t, ns, job)
	// mpi-operator copies no annotation: the user annotates the PodGroup it made, and tells
	// plan the constraint.
	const constraint = `{"mode":"hard","highestTierAllowed":1}`
	manifest := mpiJobYAML(job, workers, workers+1)
	objs, err := jobspec.ReadBytes([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	derived, err := jobspec.Derive(objs, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	derived.AnnotatePodGroup("hypernode.dev/network-topology", constraint)
	r := planOf(t, ns, manifest, "--network-topology", constraint)
	if !r.Placed || r.MinMember != workers+1 || r.Members != workers+1 || r.Placement.Leaves != 1 {
		t.Fatalf("plan of the MPIJob: %+v", r)
	}
	// As the user guide says: held one member short while the PodGroup is annotated.
	applyYAML(t, ns, mpiJobYAML(job, workers, workers+2))
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := runner.Clients.Scheduling.SchedulingV1alpha1().PodGroups(ns).Get(ctx, job, metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the operator made no PodGroup: %v", err)
	}
	annotation := `{"metadata":{"annotations":{"hypernode.dev/network-topology":"{\"mode\":\"hard\",\"highestTierAllowed\":1}"}}}`
	if _, err := runner.Clients.Scheduling.SchedulingV1alpha1().PodGroups(ns).Patch(ctx, job, types.MergePatchType, []byte(annotation), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	applyYAML(t, ns, manifest)
	_, nodes := waitGangBound(t, ns, job, workers+1, 2*time.Minute)

	assertOperatorGang(t, ns, job, derived, r, nodes)
}

// assertOperatorGang fails the test unless the gang the operator created for job is the one
// plan derived: the PodGroup's spec and annotations, every member by name (a launcher Job's
// pod, job-launcher-xxxxx, as job-launcher) with plan's labels and the requests the scheduler
// counts (init containers included), each bound (nodes) in the leaf the plan said, and no
// other pod.
func assertOperatorGang(t *testing.T, ns, job string, derived *jobspec.Job, r inspect.PlanReport, nodes map[string]string) {
	t.Helper()
	ctx := t.Context()
	pg, err := runner.Clients.Scheduling.SchedulingV1alpha1().PodGroups(ns).Get(ctx, job, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(derived.PodGroup.Spec, pg.Spec); diff != "" {
		t.Errorf("PodGroup spec (-plan +operator):\n%s", diff)
	}
	if diff := cmp.Diff(derived.PodGroup.Annotations, pg.Annotations); diff != "" {
		t.Errorf("PodGroup annotations (-plan +operator):\n%s", diff)
	}
	pods, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: demo.PodGroupLabel + "=" + job})
	if err != nil {
		t.Fatal(err)
	}
	planName := func(pod string) string {
		if strings.HasPrefix(pod, job+"-launcher-") {
			return job + "-launcher"
		}
		return pod
	}
	created, node := map[string]*v1.Pod{}, map[string]string{}
	for i, p := range pods.Items {
		created[planName(p.Name)] = &pods.Items[i]
		node[planName(p.Name)] = nodes[p.Name]
	}
	planned := map[string]string{}
	for _, m := range r.Placement.Members {
		planned[m.Pod] = m.Leaf
	}
	for _, want := range derived.Members {
		got, ok := created[want.Name]
		if !ok {
			t.Errorf("the operator created no pod %s (it created %v)", want.Name, names(created))
			continue
		}
		for k, v := range want.Labels {
			if got.Labels[k] != v {
				t.Errorf("pod %s: label %s=%q, plan derived %q", want.Name, k, got.Labels[k], v)
			}
		}
		if diff := cmp.Diff(resourcehelper.PodRequests(want, resourcehelper.PodResourcesOptions{}),
			resourcehelper.PodRequests(got, resourcehelper.PodResourcesOptions{})); diff != "" {
			t.Errorf("pod %s requests (-plan +operator):\n%s", want.Name, diff)
		}
		if leaf := leafIn(t, "fabric-64", node[want.Name]); leaf != planned[want.Name] {
			t.Errorf("%s bound on %s in %s, plan said %s", want.Name, node[want.Name], leaf, planned[want.Name])
		}
	}
	if len(created) != len(derived.Members) {
		t.Errorf("the operator created %v, plan derived %d members", names(created), len(derived.Members))
	}
}
