package integration

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

// TestGangPreemptsWithItsLowestPriority: an MPI-style gang of a high-priority launcher and two
// workers of default priority (0), on four nodes full of priority-1000 pods. The launcher's
// cycle comes first (higher priority first in the queue); preempting with its priority would
// evict pods for workers of lower priority than theirs. The gang preempts with its lowest
// member's priority, so nothing is evicted.
func TestGangPreemptsWithItsLowestPriority(t *testing.T) {
	e := newTopoEnv(t, nodesWithCPU("8", "node-0", "node-1", "node-2", "node-3"), nil)
	e.priorityClasses()
	for _, n := range []string{"node-0", "node-1", "node-2", "node-3"} {
		e.lowPodOn(n)
	}
	startScheduler(t, nil)
	names := e.gang("mpi", 3, "", cpu("8"), func(p *v1.Pod) {
		if p.Name == "mpi-0" {
			p.Spec.PriorityClassName = e.ns + "-high"
			// New lists: the members share the one they were created with.
			p.Spec.Containers[0].Resources.Requests = cpu("1")
			p.Spec.Containers[0].Resources.Limits = cpu("1")
		}
	})
	e.waitConditionOnAny(names, v1.PodReasonUnschedulable, "cannot fit even if every pod of lower priority were evicted")
	if diff := cmp.Diff([]string{"low-node-0", "low-node-1", "low-node-2", "low-node-3"}, e.remaining("low-")); diff != "" {
		t.Errorf("low-priority pods left (-want,+got):\n%s", diff)
	}
	if preempted := e.eventsByReason()["Preempted"]; len(preempted) != 0 {
		t.Errorf("Preempted events %v, want none", preempted)
	}
}
