package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// TestTopologyGangMakesLowerGangYield: a low-priority topology gang holds the only leaf's room
// while it waits in Permit for a member that never comes (timeout 10 minutes). A
// high-priority hard tier-1 gang that fits only in that leaf makes it yield and binds there at
// once, instead of waiting out the lower gang's timeout; the lower gang binds nothing.
func TestTopologyGangMakesLowerGangYield(t *testing.T) {
	e := newTopoEnv(t, nodesWithCPU("1", "node-0", "node-1", "node-2"), nil,
		hntesting.MakeHyperNode("s0").Tier(1).Nodes("node-0", "node-1", "node-2").Obj())
	ctx := context.Background()
	e.priorityClass("training-high", 1000)
	startScheduler(t, nil)
	tier1 := map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`}

	low := util.PodGroup(e.ns, "low", 3, tier1)
	low.Spec.ScheduleTimeoutSeconds = ptrTo(int32(600))
	if err := util.CreatePodGroup(ctx, e.c.scheduling, low); err != nil {
		t.Fatal(err)
	}
	lowPods := util.GangPods(e.ns, "low", plugins.SchedulerName, "1", 3)
	lowPods[2].Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/never"}}
	if _, err := util.CreatePods(ctx, e.c.kube, lowPods...); err != nil {
		t.Fatal(err)
	}
	created, err := e.c.scheduling.SchedulingV1alpha1().PodGroups(e.ns).Get(ctx, "low", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Two members of the low gang hold two of s0's three CPUs in Permit; the third is promised
	// to its gated member.
	waitForObjectEvent(t, e.c, e.ns, "PodGroup", created.UID, "GangWaiting", plugins.SchedulerName, "wait in Permit")

	if err := util.CreatePodGroup(ctx, e.c.scheduling, util.PodGroup(e.ns, "high", 2, tier1)); err != nil {
		t.Fatal(err)
	}
	highPods := util.GangPods(e.ns, "high", plugins.SchedulerName, "1", 2)
	for _, p := range highPods {
		p.Spec.PriorityClassName = "training-high"
	}
	names, err := util.CreatePods(ctx, e.c.kube, highPods...)
	if err != nil {
		t.Fatal(err)
	}
	got := e.waitBound(names)
	if len(got) != 2 || got["high-0"] == got["high-1"] {
		t.Errorf("high gang placements %v, want its two pods on two nodes of s0", got)
	}
	waitForObjectEvent(t, e.c, e.ns, "PodGroup", created.UID, "GangRejected", plugins.SchedulerName, "yielded its room in s0 to gang "+e.ns+"/high")
	bound := e.bound()
	for _, name := range names {
		delete(bound, name)
	}
	if diff := cmp.Diff(map[string]string{}, bound); diff != "" {
		t.Errorf("low gang members bound (-want,+got):\n%s", diff)
	}
	// The room came from the yield alone: nobody was evicted or deleted for the high gang,
	// which was never told it failed.
	pods, err := e.c.kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "scheduling.x-k8s.io/pod-group=low"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 3 {
		t.Errorf("%d members of the low gang exist, want all 3", len(pods.Items))
	}
	events := e.eventsByReason()
	for _, reason := range []string{"GangPreempting", "PreemptionNotHelpful", "GangPreemptionFailed"} {
		if len(events[reason]) > 0 {
			t.Errorf("%s Events: %q", reason, events[reason])
		}
	}
	// (The low gang's own GangRejected Events, from the yield and its members' Unreserve,
	// may come in any order.)
	for _, note := range events["GangRejected"] {
		if strings.HasPrefix(note, "gang "+e.ns+"/high:") {
			t.Errorf("GangRejected Event for the high gang: %q", note)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
