package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/demo"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/localcluster"
)

// podGroupYAML is a PodGroup, hard at tier.
func podGroupYAML(name string, minMember, tier int) string {
	return fmt.Sprintf(`
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: %[1]s
  annotations:
    hypernode.dev/network-topology: '{"mode":"hard","highestTierAllowed":%[3]d}'
spec:
  minMember: %[2]d
  scheduleTimeoutSeconds: 300
`, name, minMember, tier)
}

// gangJobYAML is a PodGroup and a Job of 8-GPU workers; parallelism may be below minMember.
func gangJobYAML(name string, minMember, parallelism, tier int) string {
	return podGroupYAML(name, minMember, tier) + "---" + jobYAML(name, parallelism, "", ourScheduler)
}

// restartScene is the 64-node fabric of the demo in a namespace of its own, with no jobs.
func restartScene(t *testing.T, namespace string) demo.Scene {
	t.Helper()
	var scene demo.Scene
	for _, s := range demo.Scenes() {
		if s.Namespace == "fabric-64" {
			scene = s
		}
	}
	scene.Namespace, scene.Jobs = namespace, nil
	if err := runner.Setup(t.Context(), scene); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever happened, the next test needs a running scheduler and an empty cluster.
		ctx := context.Background()
		if exited, _ := cluster.Scheduler().Exited(); exited {
			if err := cluster.StartScheduler(ctx); err != nil {
				t.Errorf("restarting the scheduler: %v", err)
			}
		}
		if err := runner.Teardown(ctx, scene); err != nil {
			t.Errorf("teardown: %v", err)
		}
		assertSchedulerAuthorized(t, cluster.Dir)
	})
	return scene
}

func applyYAML(t *testing.T, namespace, doc string) {
	t.Helper()
	objs, err := localcluster.Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Applier.Apply(t.Context(), objs, namespace, false); err != nil {
		t.Fatal(err)
	}
}

// podsOf lists a gang's live pods: name -> UID and name -> node.
func podsOf(ctx context.Context, namespace, group string) (uids map[string]types.UID, nodes map[string]string, err error) {
	pods, err := cluster.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: demo.PodGroupLabel + "=" + group})
	if err != nil {
		return nil, nil, err
	}
	uids, nodes = map[string]types.UID{}, map[string]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		uids[p.Name] = p.UID
		if p.Spec.NodeName != "" {
			nodes[p.Name] = p.Spec.NodeName
		}
	}
	return uids, nodes, nil
}

// watchMaxBound counts, from now until stop is called, the largest number of the gang's pods
// bound at any moment, from a watch (every binding is an event).
func watchMaxBound(t *testing.T, namespace, group string) (maxBound func() int64, stop func()) {
	t.Helper()
	w, err := cluster.Kube.CoreV1().Pods(namespace).Watch(t.Context(), metav1.ListOptions{LabelSelector: demo.PodGroupLabel + "=" + group})
	if err != nil {
		t.Fatal(err)
	}
	var max atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		bound := map[string]bool{}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*v1.Pod)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted {
				delete(bound, p.Name)
			} else if p.Spec.NodeName != "" {
				bound[p.Name] = true
			}
			if n := int64(len(bound)); n > max.Load() {
				max.Store(n)
			}
		}
	}()
	return max.Load, func() { w.Stop(); <-done }
}

// waitGangBound waits until want members of the gang are bound and returns the live members'
// UIDs and the bound members' nodes.
func waitGangBound(t *testing.T, ns, group string, want int, timeout time.Duration) (map[string]types.UID, map[string]string) {
	t.Helper()
	var uids map[string]types.UID
	var nodes map[string]string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		uids, nodes, err = podsOf(ctx, ns, group)
		return err == nil && len(nodes) == want, nil
	})
	if err != nil {
		t.Fatalf("gang %s/%s: %d of %d members bound: %v", ns, group, len(nodes), want, err)
	}
	return uids, nodes
}

// assertOneDomain fails the test unless every node is in the same domain of the 64-node fabric
// (nodesPerDomain 8: a leaf; 32: a spine).
func assertOneDomain(t *testing.T, nodes map[string]string, nodesPerDomain int) {
	t.Helper()
	domains := map[int]bool{}
	for pod, node := range nodes {
		var idx int
		if _, err := fmt.Sscanf(node, "gpu-%d", &idx); err != nil {
			t.Fatalf("pod %s on unexpected node %s", pod, node)
		}
		domains[idx/nodesPerDomain] = true
	}
	if len(domains) != 1 {
		t.Errorf("the gang spans %d domains of %d nodes: %v", len(domains), nodesPerDomain, nodes)
	}
}

// killAndRestart records the gang's live members, kills the scheduler with SIGKILL as a crash
// would, starts a new one and waits until it leads; it returns the members' UIDs from before.
func killAndRestart(t *testing.T, ns, group string) map[string]types.UID {
	t.Helper()
	uids, _, err := podsOf(t.Context(), ns, group)
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.StopScheduler(true); err != nil {
		t.Fatal(err)
	}
	if err := cluster.StartScheduler(t.Context()); err != nil {
		t.Fatal(err)
	}
	return uids
}

// metricValue returns the value of the metric line that starts with prefix ("" if none).
func metricValue(metrics, prefix string) string {
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, prefix) {
			return strings.TrimSpace(strings.TrimPrefix(line, prefix))
		}
	}
	return ""
}

// TestSchedulerKilledWhileGangWaitsForMembers: three members of a gang of four exist and wait
// for the fourth. The scheduler is killed (SIGKILL) and restarted; the new one holds the same
// three back, nothing is bound, no pod is lost or replaced; once the fourth member exists, all
// four bind in one leaf.
func TestSchedulerKilledWhileGangWaitsForMembers(t *testing.T) {
	ctx := t.Context()
	const ns, group = "restart-waits", "waiter"
	restartScene(t, ns)
	maxBound, stopWatch := watchMaxBound(t, ns, group)
	defer stopWatch()
	applyYAML(t, ns, gangJobYAML(group, 4, 3, 1))

	gated := `scheduler_pending_pods{queue="gated"} `
	waitGated := func(what string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			m, err := cluster.SchedulerMetrics(ctx)
			return err == nil && metricValue(m, gated) == "3", nil
		})
		if err != nil {
			m, _ := cluster.SchedulerMetrics(ctx)
			t.Fatalf("%s: the scheduler does not hold 3 gated pods (gated=%q): %v", what, metricValue(m, gated), err)
		}
	}
	waitGated("before the kill")
	uidsBefore := killAndRestart(t, ns, group)
	waitGated("after the restart")
	uidsAfter, nodes, err := podsOf(ctx, ns, group)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 0 || maxBound() != 0 {
		t.Fatalf("before the gang is complete, %d pods are bound now and %d were at most; want none", len(nodes), maxBound())
	}
	if fmt.Sprint(uidsAfter) != fmt.Sprint(uidsBefore) {
		t.Fatalf("the waiting pods changed across the restart: before %v, after %v", uidsBefore, uidsAfter)
	}

	// The fourth member: all four bind, in one leaf.
	if _, err := cluster.Kube.BatchV1().Jobs(ns).Patch(ctx, group, types.MergePatchType, []byte(`{"spec":{"parallelism":4}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	_, nodes = waitGangBound(t, ns, group, 4, time.Minute)
	assertOneDomain(t, nodes, 8)
	for pod := range nodes {
		if uid, ok := uidsBefore[pod]; ok && uidsAfter[pod] != uid {
			t.Errorf("pod %s was replaced", pod)
		}
	}
}

// TestSchedulerKilledWhileGangBinds: the scheduler is killed (SIGKILL) as soon as the first
// member of a 32-pod gang is bound (hard, tier 2: exactly one spine's 32 nodes). Bindings
// are separate API calls, so the kill may leave the gang partly bound; the restarted
// scheduler must complete it in the same spine, and nothing is lost.
func TestSchedulerKilledWhileGangBinds(t *testing.T) {
	ctx := t.Context()
	const ns, group = "restart-binds", "binder"
	restartScene(t, ns)
	w, err := cluster.Kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: demo.PodGroupLabel + "=" + group})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	applyYAML(t, ns, gangJobYAML(group, 32, 32, 2))
	deadline := time.After(2 * time.Minute)
waitFirstBinding:
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the pod watch ended")
			}
			if p, isPod := ev.Object.(*v1.Pod); isPod && p.Spec.NodeName != "" {
				break waitFirstBinding
			}
		case <-deadline:
			t.Fatal("no member of the gang was bound within 2 minutes")
		}
	}
	if err := cluster.StopScheduler(true); err != nil {
		t.Fatal(err)
	}
	uidsAtKill, boundAtKill, err := podsOf(ctx, ns, group)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the scheduler with %d of 32 members bound", len(boundAtKill))
	if err := cluster.StartScheduler(ctx); err != nil {
		t.Fatal(err)
	}
	uids, nodes := waitGangBound(t, ns, group, 32, 2*time.Minute)
	assertOneDomain(t, nodes, 32)
	for pod, node := range nodes {
		if before, ok := boundAtKill[pod]; ok && before != node {
			t.Errorf("pod %s moved from %s to %s", pod, before, node)
		}
	}
	for pod, uid := range uidsAtKill {
		if uids[pod] != uid {
			t.Errorf("pod %s was lost or replaced across the restart", pod)
		}
	}
	if len(uids) != 32 {
		t.Errorf("%d members exist, want 32", len(uids))
	}
}

// TestSchedulerKilledWhileGangWaitsInPermit: four members exist, the fourth held by a
// scheduling gate, so three are reserved and wait in Permit (the GangWaiting Event says so)
// when the scheduler is killed (SIGKILL). Reservations live in the scheduler's memory only:
// nothing is bound, then or after the restart, until the gate is lifted; then all four bind in
// one leaf.
func TestSchedulerKilledWhileGangWaitsInPermit(t *testing.T) {
	ctx := t.Context()
	const ns, group = "restart-permit", "permit"
	restartScene(t, ns)
	maxBound, stopWatch := watchMaxBound(t, ns, group)
	defer stopWatch()
	var pods strings.Builder
	for i := range 4 {
		gate := ""
		if i == 3 {
			gate = "\n  schedulingGates:\n  - name: example.com/hold"
		}
		fmt.Fprintf(&pods, `---
apiVersion: v1
kind: Pod
metadata:
  name: %[1]s-%[2]d
  labels:
    scheduling.x-k8s.io/pod-group: %[1]s
spec:
  schedulerName: hypernode-scheduler%[3]s
  containers:
  - name: trainer
    image: registry.example.com/trainer:latest
    resources:
      limits:
        nvidia.com/gpu: "8"
`, group, i, gate)
	}
	applyYAML(t, ns, podGroupYAML(group, 4, 1)+pods.String())

	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		events, err := cluster.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Regarding.Kind == "PodGroup" && e.Regarding.Name == group && e.Reason == "GangWaiting" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no GangWaiting Event on PodGroup %s/%s: %v", ns, group, err)
	}
	uidsBefore := killAndRestart(t, ns, group)
	if _, nodes, err := podsOf(ctx, ns, group); err != nil || len(nodes) != 0 || maxBound() != 0 {
		t.Fatalf("before the gate is lifted, %d pods are bound now and %d were at most (%v); want none", len(nodes), maxBound(), err)
	}
	if _, err := cluster.Kube.CoreV1().Pods(ns).Patch(ctx, group+"-3", types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/schedulingGates"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	uids, nodes := waitGangBound(t, ns, group, 4, time.Minute)
	assertOneDomain(t, nodes, 8)
	if fmt.Sprint(uids) != fmt.Sprint(uidsBefore) {
		t.Errorf("pods changed across the restart: before %v, after %v", uidsBefore, uids)
	}
}
