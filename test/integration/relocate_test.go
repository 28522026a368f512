package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// plannedWithGatedMember sets up the cluster of the tests below (seed 001's tree; 8-GPU
// nodes; s5 full; s0 a little fuller than s1; node-0 labelled for a pod that must go there),
// starts the scheduler and creates the gang train (three 8-GPU members, hard at tier 2) with
// train-0 held by a scheduling gate. It returns once the gang is planned: train-0 in s0 on
// node-0, train-1 on node-1, train-2 in s1.
func plannedWithGatedMember(t *testing.T) (*topoEnv, []string) {
	ctx := context.Background()
	gpu := v1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	e := newTopoEnv(t, nodesWithCPU("8", "node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"), gpu, seedHyperNodes(t)...)
	node0, err := e.c.kube.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node0.Labels == nil {
		node0.Labels = map[string]string{}
	}
	node0.Labels["hypernode.dev/test-hog"] = "ok"
	if _, err := e.c.kube.CoreV1().Nodes().Update(ctx, node0, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"node-4", "node-5", "node-6", "node-7"} {
		e.usedBy(n, cpuGPU("1", "8"))
	}
	e.filler("node-0", "1")
	e.filler("node-1", "1")
	e.priorityClass("relocate-high", 1000)
	startScheduler(t, nil)

	names := e.gang("train", 3, `{"mode":"hard","highestTierAllowed":2}`, cpuGPU("1", "8"), func(p *v1.Pod) {
		if p.Name == "train-0" {
			p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "hypernode.dev/test-hold"}}
		}
	})
	planned := e.waitEvent("TopologyPlanned")
	if want := fmt.Sprintf("gang %s/train planned in s4 (tier 2): 3 pending members over leaves [s0 s1]", e.ns); planned.Note != want {
		t.Fatalf("plan %q, want %q", planned.Note, want)
	}
	return e, names
}

// ungate lets a member held by a scheduling gate be scheduled.
func (e *topoEnv) ungate(name string) {
	e.t.Helper()
	ctx := context.Background()
	pod, err := e.c.kube.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	pod.Spec.SchedulingGates = nil
	if _, err := e.c.kube.CoreV1().Pods(e.ns).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// gpuPodOnNode0 is a full-GPU pod that only node-0 admits (its node selector).
func (e *topoEnv) gpuPodOnNode0(name, priorityClass string) *v1.Pod {
	pod := util.Pod(e.ns, name, plugins.SchedulerName, "", nil)
	pod.Spec.Containers[0].Resources.Requests = cpuGPU("1", "8")
	pod.Spec.Containers[0].Resources.Limits = cpuGPU("1", "8")
	pod.Spec.PriorityClassName = priorityClass
	pod.Spec.NodeSelector = map[string]string{"hypernode.dev/test-hog": "ok"}
	return pod
}

// A plan holds node-0 for train-0, which is held by a scheduling gate. A plain pod of the
// same priority that only node-0 admits stays pending: the plan's nomination counts on the
// node. train-0 then binds there.
func TestPlainPodDoesNotTakeAPromisedNode(t *testing.T) {
	e, names := plannedWithGatedMember(t)
	if _, err := util.CreatePods(context.Background(), e.c.kube, e.gpuPodOnNode0("web", "")); err != nil {
		t.Fatal(err)
	}
	e.waitCondition("web", v1.PodReasonUnschedulable, "1 Insufficient nvidia.com/gpu")
	e.ungate("train-0")
	got := e.waitBound(names)
	want := map[string]string{"train-0": "node-0", "train-1": "node-1"}
	if got["train-0"] != want["train-0"] || got["train-1"] != want["train-1"] || (got["train-2"] != "node-2" && got["train-2"] != "node-3") {
		t.Errorf("placements %v: want train-0 on node-0, train-1 on node-1, train-2 in s1", got)
	}
}

// A gang of three full-GPU pods, hard at tier 2, is planned into s4: train-0 and train-1 in
// s0 (node-0, node-1: the fuller leaf), train-2 in s1 (node-2 or node-3); s5 is full.
// train-0 is held by a scheduling gate. A pod of higher priority, which does not see the plan's nominations, then takes node-0 (its
// node selector allows only that node). When train-0 comes, its planned leaf has no room for
// it: it moves to the free node of s1, and the gang binds without a rejection, a second plan
// or an eviction.
func TestMemberRelocatesInsideItsDomain(t *testing.T) {
	ctx := context.Background()
	e, names := plannedWithGatedMember(t)
	if _, err := util.CreatePods(ctx, e.c.kube, e.gpuPodOnNode0("hog", "relocate-high")); err != nil {
		t.Fatal(err)
	}
	e.waitBound([]string{"hog"})

	e.ungate("train-0")
	got := e.waitBound(append(names, "hog"))
	// train-2 was planned in s1 and may take either of its nodes (a plan of one shape narrows
	// a member to its leaf); train-0 takes the other.
	s1 := []string{got["train-0"], got["train-2"]}
	slices.Sort(s1)
	if got["hog"] != "node-0" || got["train-1"] != "node-1" || !slices.Equal(s1, []string{"node-2", "node-3"}) {
		t.Errorf("placements %v: want the hog on node-0, train-1 on node-1, train-0 and train-2 on node-2 and node-3", got)
	}
	relocated := e.waitEvent("MemberRelocated")
	wantNote := fmt.Sprintf("gang %s/train: no room for member train-0 in its planned node node-0 now; it moves to node %s in HyperNode s1, inside s4", e.ns, got["train-0"])
	if relocated.Note != wantNote {
		t.Errorf("MemberRelocated %q, want %q", relocated.Note, wantNote)
	}
	events := e.eventsByReason()
	if n := len(events["MemberRelocated"]); n != 1 {
		t.Errorf("%d MemberRelocated events, want 1", n)
	}
	if n := len(events["TopologyPlanned"]); n != 1 {
		t.Errorf("%d TopologyPlanned events, want 1: the gang kept its plan", n)
	}
	for _, reason := range []string{"GangRejected", "TopologyUnsatisfiable", "Preempted"} {
		if len(events[reason]) > 0 {
			t.Errorf("%s: %v", reason, events[reason])
		}
	}
}

// waitEvent waits for the first Event of the namespace with the reason.
func (e *topoEnv) waitEvent(reason string) eventsv1.Event {
	e.t.Helper()
	var found eventsv1.Event
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, boundTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := e.c.kube.EventsV1().Events(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range list.Items {
			if ev.Reason == reason {
				found = ev
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		e.t.Fatalf("no %s Event: %v", reason, err)
	}
	return found
}

// eventsByReason returns the notes of the namespace's Events by reason, an Event repeated in
// a series once per occurrence.
func (e *topoEnv) eventsByReason() map[string][]string {
	e.t.Helper()
	list, err := e.c.kube.EventsV1().Events(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string][]string{}
	for _, ev := range list.Items {
		n := 1
		if ev.Series != nil {
			n = int(ev.Series.Count)
		}
		for range n {
			out[ev.Reason] = append(out[ev.Reason], ev.Note)
		}
	}
	return out
}

// eventsOnceCounted waits until the namespace has want Events of reason (they are written
// asynchronously, and may land after what the test waited for) and returns their notes; it
// returns whatever there is after a few seconds, for the caller's comparison to report.
func (e *topoEnv) eventsOnceCounted(reason string, want int) []string {
	e.t.Helper()
	var notes []string
	_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		notes = e.eventsByReason()[reason]
		return len(notes) == want, nil
	})
	return notes
}
