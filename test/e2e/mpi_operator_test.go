package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/localcluster"
)

var mpiJobs = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v2beta1", Resource: "mpijobs"}

// mpiJobYAML is an MPIJob of a 1-CPU launcher and workers of 8 GPUs (a whole node each),
// whose PodGroup asks for minAvailable members.
func mpiJobYAML(name string, workers, minAvailable int) string {
	return fmt.Sprintf(`
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: %[1]s
spec:
  slotsPerWorker: 8
  runPolicy:
    schedulingPolicy:
      minAvailable: %[3]d
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: launcher
            image: registry.example.com/mpi-launcher:latest
            resources:
              requests:
                cpu: "1"
    Worker:
      replicas: %[2]d
      template:
        spec:
          containers:
          - name: worker
            image: registry.example.com/mpi-worker:latest
            resources:
              limits:
                nvidia.com/gpu: "8"
`, name, workers, minAvailable)
}

// TestMPIOperatorCreatesTheGang: Kubeflow's mpi-operator, built from its module and run with
// --gang-scheduling=hypernode-scheduler, creates an MPIJob's PodGroup and pods (4 workers,
// and the launcher through a batch Job); the user adds the topology annotation to the
// PodGroup the operator made, as the user guide says: the MPIJob starts with a minAvailable
// one above its size, so that its members wait (nothing binds) while the annotation is
// added, then minAvailable is set to the size. All five pods land in one leaf of the 64-node
// fabric, the launcher next to a worker, and the operator kept the annotation.
func TestMPIOperatorCreatesTheGang(t *testing.T) {
	const ns, job, workers = "mpi", "pi", 4
	restartScene(t, ns)
	ctx := t.Context()
	dyn := startMPIOperator(t, ns, job)
	applyYAML(t, ns, mpiJobYAML(job, workers, workers+2))
	// Held: the operator made the PodGroup and all five pods, and the gang waits for a sixth.
	var created *schedulingv1alpha1.PodGroup
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pg, err := runner.Clients.Scheduling.SchedulingV1alpha1().PodGroups(ns).Get(ctx, job, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		created = pg
		uids, _, err := podsOf(ctx, ns, job)
		return err == nil && len(uids) == workers+1, nil
	}); err != nil {
		t.Fatalf("the operator did not create the PodGroup and the %d pods: %v", workers+1, err)
	}
	if !metav1.IsControlledBy(created, &metav1.ObjectMeta{UID: mustUID(t, dyn, ns, job)}) {
		t.Errorf("PodGroup %s is not controlled by the MPIJob: %v", job, created.OwnerReferences)
	}
	if _, nodes, err := podsOf(ctx, ns, job); err != nil || len(nodes) != 0 {
		t.Fatalf("members bound while the gang is held: %v %v", nodes, err)
	}
	annotation := `{"metadata":{"annotations":{"hypernode.dev/network-topology":"{\"mode\":\"hard\",\"highestTierAllowed\":1}"}}}`
	if _, err := runner.Clients.Scheduling.SchedulingV1alpha1().PodGroups(ns).Patch(ctx, job, types.MergePatchType, []byte(annotation), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	applyYAML(t, ns, mpiJobYAML(job, workers, workers+1))

	_, nodes := waitGangBound(t, ns, job, workers+1, 2*time.Minute)
	assertOneDomain(t, nodes, 8)
	launcher, workerNodes := "", map[string]bool{}
	for pod, node := range nodes {
		if strings.HasPrefix(pod, job+"-launcher") {
			launcher = node
			continue
		}
		workerNodes[node] = true
	}
	if len(workerNodes) != workers || !workerNodes[launcher] {
		t.Errorf("placements %v: want the %d workers on %d nodes and the launcher next to one of them", nodes, workers, workers)
	}
	// Placed by the plan of both shapes in a leaf, not by luck as a plain gang.
	waitObjectEvent(t, ns, "PodGroup", job, "TopologyPlanned", "gang mpi/pi planned in leaf-")
	pg, err := runner.Clients.Scheduling.SchedulingV1alpha1().PodGroups(ns).Get(ctx, job, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pg.Annotations["hypernode.dev/network-topology"]; got != `{"mode":"hard","highestTierAllowed":1}` {
		t.Errorf("the operator dropped the PodGroup's topology annotation: %q", got)
	}
	if pg.Spec.MinMember != workers+1 {
		t.Errorf("PodGroup minMember %d, want %d", pg.Spec.MinMember, workers+1)
	}
}

// mustUID returns the MPIJob's UID.
func mustUID(t *testing.T, dyn dynamic.Interface, ns, name string) types.UID {
	t.Helper()
	obj, err := dyn.Resource(mpiJobs).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj.GetUID()
}

// startMPIOperator installs the MPIJob CRD and runs mpi-operator on namespace ns until the
// test ends; then it deletes the MPIJob job and its launcher Job.
func startMPIOperator(t *testing.T, ns, job string) dynamic.Interface {
	t.Helper()
	ctx := t.Context()
	if _, err := cluster.Applier.ApplyFile(ctx, filepath.Join(repoRoot, "bin", "mpijob-crd.yaml"), ""); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cluster.Admin)
	if err != nil {
		t.Fatal(err)
	}
	// The operator exits at start when the MPIJob API is not served yet.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(mpiJobs).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the MPIJob CRD is not served: %v", err)
	}
	operator, err := cluster.StartWorkloadController("mpi-operator",
		"--kubeConfig="+localcluster.KubeconfigArg, "--gang-scheduling=hypernode-scheduler",
		"--namespace="+ns, "--lock-namespace="+ns, "--monitoring-port=0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Before the scene's teardown, or the operator and the Job controller would
		// recreate the pods it deletes.
		if err := operator.Stop(10 * time.Second); err != nil {
			t.Errorf("stopping mpi-operator: %v", err)
		}
		ctx := context.Background()
		_ = dyn.Resource(mpiJobs).Namespace(ns).Delete(ctx, job, metav1.DeleteOptions{})
		_ = cluster.Kube.BatchV1().Jobs(ns).Delete(ctx, job+"-launcher", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	})

	return dyn
}
