package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/gang"
)

// TestImpossibleGangWaitsBehindOneMember: a hard tier-1 gang that no leaf can hold is retried
// through one member. The others are held by GangRetryGate, which kube-scheduler counts in
// scheduler_unschedulable_pods{plugin="GangRetryGate"}: four of five, none bound. When an
// admin adds a node to a leaf, that one member plans for all of them, the hold ends, and the
// whole gang binds inside that leaf.
func TestImpossibleGangWaitsBehindOneMember(t *testing.T) {
	e := newTopoEnv(t, nodesWithCPU("4", "node-0", "node-1", "node-2", "node-3", "node-4"), nil,
		hntesting.MakeHyperNode("s0").Tier(1).Nodes("node-0", "node-1").Obj(),
		hntesting.MakeHyperNode("s1").Tier(1).Nodes("node-2", "node-3").Obj())
	startScheduler(t, nil)
	before := heldByRetryGate(t)

	// A leaf holds four members of 2 CPUs (two 4-CPU nodes); the gang has five.
	names := e.gang("train", 5, `{"mode":"hard","highestTierAllowed":1}`, cpu("2"))
	for _, n := range names {
		e.waitCondition(n, v1.PodReasonUnschedulable, "hard topology (tier<=1): no HyperNode can host 5 pods; tier 1: s0 4/5, s1 4/5.")
	}
	waitHeldByRetryGate(t, before+4)
	e.expectNoneBound()

	updateHyperNode(t, e.c, "s0", hntesting.MakeHyperNode("s0").Tier(1).Nodes("node-0", "node-1", "node-4").Obj().Spec.Members)
	got := e.waitBound(names)
	if !within(got, "node-0", "node-1", "node-4") || len(got) != 5 {
		t.Errorf("placements %v: want all five in s0 (node-0, node-1, node-4)", got)
	}
	waitHeldByRetryGate(t, before)
}

// heldByRetryGate reads how many pods kube-scheduler counts as held by GangRetryGate.
func heldByRetryGate(t *testing.T) int {
	t.Helper()
	v, err := testutil.GetGaugeMetricValue(schedmetrics.UnschedulableReason(gang.RetryGateName, plugins.SchedulerName))
	if err != nil {
		t.Fatal(err)
	}
	return int(v)
}

// waitHeldByRetryGate polls until GangRetryGate holds want pods.
func waitHeldByRetryGate(t *testing.T, want int) {
	t.Helper()
	got := -1
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, boundTimeout, true, func(context.Context) (bool, error) {
		got = heldByRetryGate(t)
		return got == want, nil
	})
	if err != nil {
		t.Fatalf("GangRetryGate holds %d pods, want %d", got, want)
	}
}

// TestUnconstrainedGangWaitsQuietlyForRoom: a gang of two without a topology constraint on a
// cluster with one free node. One member reserves it, the other finds no room, and the round
// is rejected. Before, the rejected reservation requeued the failed member, which reserved
// the freed node, and so on: hundreds of cycles a second, each with a preemption
// simulation. Now the gang waits behind the failed member with no cycle at all until room
// is freed; then it binds.
func TestUnconstrainedGangWaitsQuietlyForRoom(t *testing.T) {
	e := newTopoEnv(t, nodesWithCPU("8", "node-0", "node-1", "node-2", "node-3"), nil)
	for _, n := range []string{"node-0", "node-2", "node-3"} {
		e.filler(n, "8")
	}
	startScheduler(t, nil)
	names := e.gang("train", 2, "", cpu("8"))
	e.waitConditionOnAny(names, v1.PodReasonUnschedulable, "could not be placed when last tried")
	// Nothing happens in the cluster now, so no member is tried again: no scheduling cycle
	// (a cycle refused in PreFilter counts too, and preemption is not tried in those), for
	// longer than kube-scheduler's longest back-off (10 s), so that a loop through the
	// back-off shows too. Counted from when the failed round's cycles are over (no cycle for
	// 2 s; a fast spin never gets there).
	quiet := scheduleAttempts(t)
	settled := time.Now()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, boundTimeout, true, func(context.Context) (bool, error) {
		if now := scheduleAttempts(t); now != quiet {
			quiet, settled = now, time.Now()
		}
		return time.Since(settled) >= 2*time.Second, nil
	}); err != nil {
		t.Fatalf("the gang's members kept being tried (%v scheduling attempts)", quiet)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 11*time.Second, true, func(context.Context) (bool, error) {
		return scheduleAttempts(t) != quiet, nil
	})
	if err == nil {
		t.Errorf("the gang was tried again (%v scheduling attempts, %v before) while nothing changed", scheduleAttempts(t), quiet)
	}
	for pod, node := range e.bound() {
		if strings.HasPrefix(pod, "train-") {
			t.Errorf("%s bound to %s while its gang cannot fit", pod, node)
		}
	}
	e.deletePodNow("filler-node-2")
	if diff := cmp.Diff([]string{"node-1", "node-2"}, nodeSet(e.waitBound(names))); diff != "" {
		t.Errorf("gang nodes (-want,+got):\n%s", diff)
	}
}

// scheduleAttempts sums kube-scheduler's scheduler_schedule_attempts_total of our profile, over
// its results: one per scheduling cycle.
func scheduleAttempts(t *testing.T) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != "scheduler_schedule_attempts_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "profile" && l.GetValue() == plugins.SchedulerName {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}
