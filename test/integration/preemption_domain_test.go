package integration

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// TestGangUsesTheRoomItPreempted: seed 004's tree (spine-0: node-0..4, spine-1: node-5..8,
// spine-2: node-9..11). A high-priority gang of four 8-CPU pods, hard at tier 2. Pods of its
// own priority take half of node-0 and all of node-5; a low-priority pod that takes an hour to
// stop fills node-1. Only spine-0 can be made to fit: low-node-1 is evicted. While it
// terminates, node-5's pod goes, and spine-1 fits the gang with no eviction, tighter than
// spine-0 (BinPack would choose it). The gang still binds in spine-0, on the room its
// eviction paid for; spine-1 stays free. This is the fault run's "wasted eviction", driven.
func TestGangUsesTheRoomItPreempted(t *testing.T) {
	e := newTopoEnv(t, nodesWithCPU("8", seed004Nodes()...), nil, util.Seed004Tree()...)
	e.priorityClasses()
	peer := func(node, cpus string) string {
		name := "peer-" + node
		e.boundPod(name, node, cpu(cpus), func(p *v1.Pod) { p.Spec.PriorityClassName = e.ns + "-never" })
		return name
	}
	peer("node-0", "4")
	blocker := peer("node-5", "8")
	e.lowPodWithGrace("node-1", 3600)
	startScheduler(t, nil)

	names := e.gang("train", 4, `{"mode":"hard","highestTierAllowed":2}`, cpu("8"), func(p *v1.Pod) {
		p.Spec.PriorityClassName = e.ns + "-high"
	})
	e.waitConditionOnAny(names, v1.PodReasonUnschedulable, fmt.Sprintf("/train: evicting 1 pod(s) of lower priority in spine-0 so that 4 members fit: %s/low-node-1", e.ns))
	if diff := cmp.Diff([]string{"low-node-1"}, e.waitTerminating("low-", 1)); diff != "" {
		t.Fatalf("terminating victims (-want,+got):\n%s", diff)
	}
	// Room frees in spine-1 before the victim is gone: the gang is planned only after.
	e.deletePodNow(blocker)
	e.deletePodNow("low-node-1")

	got := e.waitBound(names)
	if diff := cmp.Diff([]string{"node-1", "node-2", "node-3", "node-4"}, nodeSet(got)); diff != "" {
		t.Errorf("gang nodes (-want,+got):\n%s", diff)
	}
	if n := len(e.eventsOnceCounted("Preempted", 1)); n != 1 {
		t.Errorf("%d Preempted events, want 1", n)
	}
	if diff := cmp.Diff([]string{"peer-node-0"}, e.remaining("peer-")); diff != "" {
		t.Errorf("pods of the gang's priority left (-want,+got):\n%s", diff)
	}
}
