package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/metrics"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/metrics/metricstest"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/gangpreemption"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// priorityClasses creates <namespace>-low (1000), <namespace>-high (1000000) and
// <namespace>-never (1000000, preemptionPolicy Never): names of the test's own, since a
// deleted PriorityClass may linger into the next test.
func (e *topoEnv) priorityClasses() {
	e.t.Helper()
	e.priorityClass(e.ns+"-low", 1000)
	e.priorityClass(e.ns+"-high", 1000000)
	e.priorityClass(e.ns+"-never", 1000000, v1.PreemptNever)
	// Priority admission reads PriorityClasses from its informer: wait until it has them all
	// (a dry-run pod creation passes admission without creating anything).
	for _, class := range []string{e.ns + "-low", e.ns + "-high", e.ns + "-never"} {
		if err := util.WaitPriorityClassAdmitted(context.Background(), e.c.kube, e.ns, class, boundTimeout); err != nil {
			e.t.Fatal(err)
		}
	}
}

// lowPodOn binds a low-priority pod that fills an 8-CPU node, without a scheduler; it goes at
// once when evicted (grace period 0, as there is no kubelet).
func (e *topoEnv) lowPodOn(node string) string { return e.lowPodWithGrace(node, 0) }

// lowPodWithGrace is lowPodOn for a pod that stays terminating for graceSeconds when evicted
// (until the test deletes it for good).
func (e *topoEnv) lowPodWithGrace(node string, graceSeconds int64) string {
	e.t.Helper()
	pod := util.Pod(e.ns, "low-"+node, "no-scheduler", "8", nil)
	pod.Spec.NodeName = node
	pod.Spec.PriorityClassName = e.ns + "-low"
	pod.Spec.TerminationGracePeriodSeconds = ptr.To(graceSeconds)
	if _, err := util.CreatePods(context.Background(), e.c.kube, pod); err != nil {
		e.t.Fatal(err)
	}
	return pod.Name
}

// remaining lists the pods of the namespace with the prefix that exist and are not being
// deleted, by name.
func (e *topoEnv) remaining(prefix string) []string { return e.podsNamed(prefix, false) }

// terminating lists the pods of the namespace with the prefix that are being deleted.
func (e *topoEnv) terminating(prefix string) []string { return e.podsNamed(prefix, true) }

// waitTerminating waits until n pods named with prefix terminate, and returns them: a gang
// preemption evicts after the cycle that wrote its decision in the member's condition.
func (e *topoEnv) waitTerminating(prefix string, n int) []string {
	e.t.Helper()
	var got []string
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, boundTimeout, true, func(context.Context) (bool, error) {
		got = e.terminating(prefix)
		return len(got) >= n, nil
	}); err != nil {
		e.t.Fatalf("terminating pods %v, want %d", got, n)
	}
	return got
}

func (e *topoEnv) podsNamed(prefix string, deleting bool) []string {
	e.t.Helper()
	list, err := e.c.kube.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, prefix) && (p.DeletionTimestamp != nil) == deleting {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out
}

// TestGangPreemptionSeed004Example2: seed 004, example 2. Low-priority pods fill node-0,
// node-1 and node-5; a high-priority gang of four 8-CPU pods must be inside one spine. No
// spine has four free nodes. Evicting one pod frees a spine in spine-0 (node-0 or node-1) and
// in spine-1 (node-5): the same cost, and spine-1 is the tighter fit, so exactly the pod on
// node-5 goes and the gang binds on node-5..node-8.
func TestGangPreemptionSeed004Example2(t *testing.T) {
	e := newTopoEnv(t, nodesWithCPU("8", seed004Nodes()...), nil, util.Seed004Tree()...)
	e.priorityClasses()
	for _, n := range []string{"node-0", "node-1", "node-5"} {
		e.lowPodOn(n)
	}
	before, err := metricstest.GangPreemptionEvictions(nil)
	if err != nil {
		t.Fatal(err)
	}
	evictions := func() map[string]uint64 {
		counts, err := metricstest.GangPreemptionEvictions(before)
		if err != nil {
			t.Fatal(err)
		}
		return counts
	}
	startScheduler(t, nil)

	names := e.gang("train", 4, `{"mode":"hard","highestTierAllowed":2}`, cpu("8"), func(p *v1.Pod) {
		p.Spec.PriorityClassName = e.ns + "-high"
	})
	got := e.waitBound(names)
	if diff := cmp.Diff([]string{"node-5", "node-6", "node-7", "node-8"}, nodeSet(got)); diff != "" {
		t.Errorf("gang nodes (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"low-node-0", "low-node-1"}, e.remaining("low-")); diff != "" {
		t.Errorf("low-priority pods left (-want,+got):\n%s", diff)
	}
	preempting := e.waitEvent(gangpreemption.EventGangPreempting)
	want := fmt.Sprintf("gang %s/train: evicting 1 pod(s) of lower priority in spine-1 so that 4 members fit: %s/low-node-5; "+
		"not chosen: spine-0 would evict 1 pod(s) up to priority 1000, 1 member(s) to spare; "+
		"too small even with every pod of lower priority evicted: block-0 3/4, block-1 2/4, block-2 2/4, +3 more", e.ns, e.ns)
	if preempting.Note != want {
		t.Errorf("GangPreempting %q, want %q", preempting.Note, want)
	}
	if n := len(e.eventsByReason()[gangpreemption.EventGangPreempting]); n != 1 {
		t.Errorf("%d GangPreempting events, want 1", n)
	}
	// The evictions' goroutine records the metric after its last call returned, which may
	// come after the victim's deletion has let the gang bind.
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		return evictions()[metrics.ResultEvicted] > 0, nil
	}); err != nil {
		t.Errorf("no eviction recorded by hypernode_gang_preemption_eviction_duration_seconds")
	}
	if diff := cmp.Diff(map[string]uint64{metrics.ResultEvicted: 1, metrics.ResultFailed: 0, metrics.ResultStopped: 0}, evictions()); diff != "" {
		t.Errorf("hypernode_gang_preemption_eviction_duration_seconds counts since the start (-want,+got):\n%s", diff)
	}
}

// seed004Nodes are the nodes of util.Seed004Tree: node-0..node-11.
func seed004Nodes() []string {
	nodes := make([]string, 0, 12)
	for i := range 12 {
		nodes = append(nodes, fmt.Sprintf("node-%d", i))
	}
	return nodes
}

// TestPlainGangPreemptsAllOrNothing: four 8-CPU nodes full of low-priority pods. A gang of
// five never fits, so nothing is evicted (kube-scheduler's per-pod preemption would evict for
// each member); a gang of three evicts exactly three pods and binds; a gang of the same
// priority as the pods evicts nothing.
func TestPlainGangPreemptsAllOrNothing(t *testing.T) {
	allLow := []string{"low-node-0", "low-node-1", "low-node-2", "low-node-3"}
	for _, tc := range []struct {
		name     string
		size     int
		priority string
		// bound: the gang binds, on the nodes of the evicted pods; left: the low-priority pods
		// that remain. Equal victims are given back in name order, so low-node-0 stays.
		bound bool
		left  []string
		// message is part of the members' condition when nothing is evicted.
		message string
		// annotation is the PodGroup's topology constraint ("": none).
		annotation string
	}{
		{name: "five on four: nothing evicted", size: 5, priority: "-high", left: allLow,
			message: "preemption: gang %s/train cannot fit even if every pod of lower priority were evicted: no domain holds 5 members (the cluster 4/5); nothing was evicted"},
		{name: "three on four: exactly three evicted", size: 3, priority: "-high", bound: true, left: []string{"low-node-0"}},
		{name: "soft topology gang: exactly three evicted", size: 3, priority: "-high", bound: true, left: []string{"low-node-0"},
			annotation: `{"mode":"soft","highestTierAllowed":1}`},
		{name: "equal priority: spared", size: 3, priority: "-low", left: allLow,
			message: "preemption: gang %s/train cannot fit even if every pod of lower priority were evicted: no domain holds 3 members (the cluster 0/3); nothing was evicted"},
		{name: "preemptionPolicy Never: nothing evicted", size: 3, priority: "-never", left: allLow,
			message: "preemption: gang %s/train does not preempt (preemptionPolicy: Never)"},
		{name: "invalid constraint: nothing evicted", size: 3, priority: "-high", left: allLow, annotation: `{"mode":"firm","highestTierAllowed":1}`,
			message: `preemption: gang %s/train has an invalid constraint: annotation hypernode.dev/network-topology: mode "firm" is not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTopoEnv(t, nodesWithCPU("8", "node-0", "node-1", "node-2", "node-3"), nil)
			e.priorityClasses()
			for _, n := range []string{"node-0", "node-1", "node-2", "node-3"} {
				e.lowPodOn(n)
			}
			startScheduler(t, nil)
			names := e.gang("train", tc.size, tc.annotation, cpu("8"), func(p *v1.Pod) { p.Spec.PriorityClassName = e.ns + tc.priority })
			if tc.bound {
				got := e.waitBound(names)
				if diff := cmp.Diff([]string{"node-1", "node-2", "node-3"}, nodeSet(got)); diff != "" {
					t.Errorf("gang nodes (-want,+got):\n%s", diff)
				}
			} else {
				for _, n := range names {
					e.waitCondition(n, v1.PodReasonUnschedulable, fmt.Sprintf(tc.message, e.ns))
				}
				for pod, node := range e.bound() {
					if strings.HasPrefix(pod, "train-") {
						t.Errorf("%s bound to %s although the gang cannot fit", pod, node)
					}
				}
			}
			if diff := cmp.Diff(tc.left, e.remaining("low-")); diff != "" {
				t.Errorf("low-priority pods left (-want,+got):\n%s", diff)
			}
			want := 4 - len(tc.left)
			if preempted := e.eventsOnceCounted("Preempted", want); len(preempted) != want {
				t.Errorf("Preempted events %v, want %d", preempted, want)
			}
		})
	}
}

// TestVictimGangEvictedWhole: a low-priority gang of two runs on node-0 and node-1, a
// low-priority pod on node-2, node-3 is free. A high-priority gang of three needs two more
// nodes. Evicting one member of the low gang would evict the whole gang anyway, so the
// cheapest set is the low gang alone (two pods); the lone pod is given back.
func TestVictimGangEvictedWhole(t *testing.T) {
	e := newTopoEnv(t, nodesWithCPU("8", "node-0", "node-1", "node-2", "node-3"), nil)
	e.priorityClasses()
	e.lowPodOn("node-2")
	e.lowPodOn("node-3") // only while the low gang is placed on node-0 and node-1
	startScheduler(t, nil)
	low := e.gang("batch", 2, "", cpu("8"), func(p *v1.Pod) {
		p.Spec.PriorityClassName = e.ns + "-low"
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	})
	if got := e.waitBound(low); !within(got, "node-0", "node-1") {
		t.Fatalf("low gang on %v, want node-0 and node-1", got)
	}
	e.deletePodNow("low-node-3")

	names := e.gang("train", 3, "", cpu("8"), func(p *v1.Pod) { p.Spec.PriorityClassName = e.ns + "-high" })
	got := e.waitBound(names)
	if diff := cmp.Diff([]string{"node-0", "node-1", "node-3"}, nodeSet(got)); diff != "" {
		t.Errorf("gang nodes (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"low-node-2"}, append(e.remaining("low-"), e.remaining("batch-")...)); diff != "" {
		t.Errorf("low-priority pods left (-want,+got):\n%s", diff)
	}
}

// TestNominatedNodesHeldWhileVictimsTerminate: the victims take their grace period (no kubelet
// here: they stay terminating until deleted for good). The gang waits without evicting more,
// and when the victims are gone, a pod of lower priority that arrived meanwhile does not take
// the freed nodes: the gang's nominations hold them, and the gang binds there.
func TestNominatedNodesHeldWhileVictimsTerminate(t *testing.T) {
	e, _, names, freed, preemptor := preemptTwoOfFour(t)
	// The other member, tried after the first preempted, waits for the victims.
	other := names[0]
	if other == preemptor {
		other = names[1]
	}
	e.waitCondition(other, v1.PodReasonUnschedulable, "waits for 2 of the 2 pods evicted for it in the cluster to terminate")
	terminating := e.waitTerminating("low-", 2)
	// A newcomer of lower priority than the gang arrives while the victims terminate.
	newcomer := util.Pod(e.ns, "newcomer", plugins.SchedulerName, "8", nil)
	newcomer.Spec.PriorityClassName = e.ns + "-low"
	if _, err := util.CreatePods(context.Background(), e.c.kube, newcomer); err != nil {
		t.Fatal(err)
	}
	for _, v := range terminating {
		e.deletePodNow(v)
	}
	got := e.waitBound(names)
	if diff := cmp.Diff([]string{freed[terminating[0]], freed[terminating[1]]}, nodeSet(got)); diff != "" {
		t.Errorf("gang nodes (-want,+got):\n%s", diff)
	}
	e.waitCondition("newcomer", v1.PodReasonUnschedulable, "Insufficient cpu")
	if n := len(e.eventsOnceCounted("Preempted", 2)); n != 2 {
		t.Errorf("%d Preempted events, want 2: no eviction beyond the gang's first", n)
	}
}

// TestWaitingMembersKeepTheirNodesDuringPreemption: a gang of four, two nodes free and two
// held by pods of lower priority that take an hour to stop. Two members reserve the free
// nodes and wait in Permit; the third preempts the other two nodes' pods. The waiting members
// keep their reservations while the victims terminate: a pod of lower priority that arrives
// meanwhile finds no room (released, the free nodes were its), and the gang binds on the
// four nodes with no eviction beyond its first two.
func TestWaitingMembersKeepTheirNodesDuringPreemption(t *testing.T) {
	waitingMembersDuringPreemption(t, 0, func(e *topoEnv) {
		if diff := cmp.Diff([]string{"low-node-2", "low-node-3"}, e.waitTerminating("low-", 2)); diff != "" {
			t.Fatalf("terminating victims (-want,+got):\n%s", diff)
		}
	})
}

// TestWaitingMembersOutlastTheirTimeoutDuringPreemption: the same gang with a timeout of 5 s,
// shorter than its victims take to stop (the test deletes them only once the timeout has
// passed). The members waiting in Permit keep node-0 and node-1 past the timeout while the
// victims terminate (GangDeadlineDeferred), the newcomer of lower priority finds no room, and
// the gang binds on the four nodes: nothing timed out, no eviction beyond the first two.
func TestWaitingMembersOutlastTheirTimeoutDuringPreemption(t *testing.T) {
	e := waitingMembersDuringPreemption(t, 5, func(e *topoEnv) {
		deferred := fmt.Sprintf("gang %s/train: its timeout (5s) passed while pods evicted for it terminate; its 2 reserved members keep their nodes until 5s after the preemption ends, at most 14m30s after the first one waited", e.ns)
		if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
			return slices.Contains(e.eventsByReason()["GangDeadlineDeferred"], deferred), nil
		}); err != nil {
			t.Fatalf("no GangDeadlineDeferred Event %q: %v; events %v", deferred, err, e.eventsByReason())
		}
	})
	if timedOut := e.eventsByReason()["GangTimedOut"]; len(timedOut) != 0 {
		t.Errorf("the gang timed out: %q", timedOut)
	}
}

// waitingMembersDuringPreemption is the scenario of the two tests above, with the PodGroup's
// scheduleTimeoutSeconds (0: the default) and a check run once the gang has preempted, while
// its victims terminate.
func waitingMembersDuringPreemption(t *testing.T, timeoutSeconds int32, whileTerminating func(e *topoEnv)) *topoEnv {
	t.Helper()
	e := newTopoEnv(t, nodesWithCPU("8", "node-0", "node-1", "node-2", "node-3"), nil)
	e.priorityClasses()
	for _, n := range []string{"node-2", "node-3"} {
		e.lowPodWithGrace(n, 3600)
	}
	startScheduler(t, nil)
	pg := util.PodGroup(e.ns, "train", 4, nil)
	if timeoutSeconds > 0 {
		pg.Spec.ScheduleTimeoutSeconds = ptr.To(timeoutSeconds)
	}
	members := e.gangOf(pg, 4, cpu("8"), func(p *v1.Pod) { p.Spec.PriorityClassName = e.ns + "-high" })
	e.waitConditionOnAny(members, v1.PodReasonUnschedulable, "/train: evicting 2 pod(s) of lower priority in the cluster so that 2 members fit: ")
	whileTerminating(e)
	newcomer := util.Pod(e.ns, "newcomer", plugins.SchedulerName, "8", nil)
	newcomer.Spec.PriorityClassName = e.ns + "-low"
	if _, err := util.CreatePods(context.Background(), e.c.kube, newcomer); err != nil {
		t.Fatal(err)
	}
	e.waitCondition("newcomer", v1.PodReasonUnschedulable, "Insufficient cpu")
	for _, v := range []string{"low-node-2", "low-node-3"} {
		e.deletePodNow(v)
	}
	got := e.waitBound(members)
	if diff := cmp.Diff([]string{"node-0", "node-1", "node-2", "node-3"}, nodeSet(got)); diff != "" {
		t.Errorf("gang nodes (-want,+got):\n%s", diff)
	}
	e.waitCondition("newcomer", v1.PodReasonUnschedulable, "Insufficient cpu")
	if n := len(e.eventsOnceCounted("Preempted", 2)); n != 2 {
		t.Errorf("%d Preempted events, want 2", n)
	}
	return e
}

// TestGangPreemptionAvoidsPDBViolations: a high-priority gang of two, hard at tier 1, fits in
// leaf-a by evicting the pod on node-0, or in leaf-b by evicting the pod on node-2: the same
// priority and count. A PodDisruptionBudget allows no disruption of the pod on node-0, so
// leaf-b is chosen (by name alone, leaf-a would be).
func TestGangPreemptionAvoidsPDBViolations(t *testing.T) {
	e := newTopoEnv(t, nodesWithCPU("8", "node-0", "node-1", "node-2", "node-3"), nil,
		hntesting.MakeHyperNode("leaf-a").Tier(1).Nodes("node-0", "node-1").Obj(),
		hntesting.MakeHyperNode("leaf-b").Tier(1).Nodes("node-2", "node-3").Obj())
	e.priorityClasses()
	for _, n := range []string{"node-0", "node-1", "node-2", "node-3"} {
		pod := util.Pod(e.ns, "low-"+n, "no-scheduler", "4", map[string]string{"app": "low-" + n})
		pod.Spec.NodeName = n
		pod.Spec.PriorityClassName = e.ns + "-low"
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
		if _, err := util.CreatePods(context.Background(), e.c.kube, pod); err != nil {
			t.Fatal(err)
		}
	}
	// node-0's pod is protected. No disruption controller runs here: the status keeps
	// disruptionsAllowed 0, which is what it would compute for one healthy pod.
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "protect-node-0"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "low-node-0"}},
		},
	}
	if _, err := e.c.kube.PolicyV1().PodDisruptionBudgets(e.ns).Create(context.Background(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startScheduler(t, nil)
	// Each member needs 6 CPUs: a node holds one only once its 4-CPU pod is gone.
	names := e.gang("train", 2, `{"mode":"hard","highestTierAllowed":1}`, cpu("6"), func(p *v1.Pod) {
		p.Spec.PriorityClassName = e.ns + "-high"
	})
	got := e.waitBound(names)
	if diff := cmp.Diff([]string{"node-2", "node-3"}, nodeSet(got)); diff != "" {
		t.Errorf("gang nodes (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"low-node-0", "low-node-1"}, e.remaining("low-")); diff != "" {
		t.Errorf("low-priority pods left (-want,+got):\n%s", diff)
	}
}

// preemptTwoOfFour fills four 8-CPU nodes with low-priority pods that take an hour to stop,
// and lets a high-priority gang of two preempt: it returns the running scheduler's stop, the
// gang's members, the nodes its two victims free, by victim, and the member that preempted.
func preemptTwoOfFour(t *testing.T) (e *topoEnv, stop func(), members []string, freed map[string]string, preemptor string) {
	e = newTopoEnv(t, nodesWithCPU("8", "node-0", "node-1", "node-2", "node-3"), nil)
	e.priorityClasses()
	for _, n := range []string{"node-0", "node-1", "node-2", "node-3"} {
		e.lowPodWithGrace(n, 3600)
	}
	stop = startScheduler(t, nil)
	members = e.gang("train", 2, "", cpu("8"), func(p *v1.Pod) { p.Spec.PriorityClassName = e.ns + "-high" })
	// Either member may have the first cycle, and so preempt for the gang.
	preemptor, _ = e.waitConditionOnAny(members, v1.PodReasonUnschedulable, "/train: evicting 2 pod(s) of lower priority in the cluster so that 2 members fit: ")
	freed = map[string]string{}
	for _, v := range e.waitTerminating("low-", 2) {
		freed[v] = strings.TrimPrefix(v, "low-")
	}
	if len(freed) != 2 {
		t.Fatalf("terminating victims %v, want 2", freed)
	}
	return e, stop, members, freed, preemptor
}

// waitNominated waits until the pods' status.nominatedNodeName are, together, the given
// nodes ("" for none), and returns them by pod.
func (e *topoEnv) waitNominated(pods []string, want []string) map[string]string {
	e.t.Helper()
	var got map[string]string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, boundTimeout, true, func(ctx context.Context) (bool, error) {
		got = map[string]string{}
		var nodes []string
		for _, name := range pods {
			p, err := e.c.kube.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			got[name] = p.Status.NominatedNodeName
			nodes = append(nodes, p.Status.NominatedNodeName)
		}
		slices.Sort(nodes)
		return slices.Equal(nodes, want), nil
	})
	if err != nil {
		e.t.Fatalf("nominated nodes %v, want %v: %v", got, want, err)
	}
	return got
}

// sortedValues returns the map's values, sorted.
func sortedValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// TestGangPreemptionResumesAfterRestart: the scheduler restarts while a gang's victims
// terminate. Every member is nominated in the API on a freed node; the new scheduler picks the
// preemption up from those nominations (the members wait for the same victims: no second
// GangPreempting, no other eviction) and the gang binds on the freed nodes.
func TestGangPreemptionResumesAfterRestart(t *testing.T) {
	e, stop, members, freed, _ := preemptTwoOfFour(t)
	nominated := e.waitNominated(members, sortedValues(freed))
	// The old scheduler records a victim's Preempted Event after its eviction call returned,
	// after the cycle: stopped earlier, it may never send it.
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, boundTimeout, true, func(context.Context) (bool, error) {
		return len(e.eventsByReason()["Preempted"]) == 2, nil
	}); err != nil {
		t.Fatalf("Preempted events before the restart: %v, want 2", e.eventsByReason()["Preempted"])
	}
	stop()
	// The members' conditions are the old scheduler's: mark them, to see the new one's.
	for _, name := range members {
		p, err := e.c.kube.CoreV1().Pods(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == v1.PodScheduled {
				p.Status.Conditions[i].Message = "before the restart"
			}
		}
		if _, err := e.c.kube.CoreV1().Pods(e.ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	startScheduler(t, nil)
	// Unschedulable from its cycle, or SchedulingGated once it waits out of the queue.
	e.waitCondition("train-0", "", "waits for 2 pod(s) that terminate after a preemption on its members' nominated nodes in the cluster")
	if diff := cmp.Diff(nominated, e.waitNominated(members, sortedValues(freed))); diff != "" {
		t.Errorf("nominations after the restart (-before,+after):\n%s", diff)
	}
	var victims []string
	for v := range freed {
		victims = append(victims, v)
	}
	slices.Sort(victims)
	if diff := cmp.Diff(victims, e.terminating("low-")); diff != "" {
		t.Errorf("terminating pods after the restart (-want,+got):\n%s", diff)
	}
	for _, v := range victims {
		e.deletePodNow(v)
	}
	// The gang plans again once the victims are gone; it binds on the freed nodes (which
	// member takes which is the plan's choice).
	got := e.waitBound(members)
	if diff := cmp.Diff(sortedValues(freed), nodeSet(got)); diff != "" {
		t.Errorf("gang nodes (-freed,+bound):\n%s", diff)
	}
	if n := len(e.eventsByReason()[gangpreemption.EventGangPreempting]); n != 1 {
		t.Errorf("%d GangPreempting events, want 1: the restarted scheduler must not preempt again", n)
	}
	if n := len(e.eventsOnceCounted("Preempted", 2)); n != 2 {
		t.Errorf("%d Preempted events, want 2", n)
	}
}

// TestGangPreemptionNominationsClearedWithPodGroup: when the PodGroup of a gang whose victims
// terminate is deleted, its members' nominations go (in the API too), so they hold no room.
func TestGangPreemptionNominationsClearedWithPodGroup(t *testing.T) {
	e, _, members, freed, _ := preemptTwoOfFour(t)
	e.waitNominated(members, sortedValues(freed))
	if err := e.c.scheduling.SchedulingV1alpha1().PodGroups(e.ns).Delete(context.Background(), "train", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitNominated(members, []string{"", ""})
}

// lowPodUsing binds a low-priority pod with the given requests to a node, without a
// scheduler; it goes at once when evicted.
func (e *topoEnv) lowPodUsing(node string, requests v1.ResourceList) {
	e.t.Helper()
	e.boundPod("low-"+node, node, requests, func(pod *v1.Pod) {
		pod.Spec.PriorityClassName = e.ns + "-low"
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	})
}

// TestGangPreemptionMixedShapes: an MPI job (an 8-GPU worker and a 7.5-CPU launcher, which
// cannot share an 8-CPU node) hard at tier 1, in two leaves of two 8-GPU nodes. In leaf-a,
// evicting the GPU pod on node-0 is enough: the launcher takes node-0, the worker node-1's free
// GPUs. Evicting node-1's CPU pod alone would not be (counting members of one shape would not
// see it). Leaf-b needs both its pods evicted. Exactly low-node-0 goes, whichever member is
// created (and so tried) first.
func TestGangPreemptionMixedShapes(t *testing.T) {
	for _, order := range [][]string{{"mpi-launcher", "mpi-worker"}, {"mpi-worker", "mpi-launcher"}} {
		t.Run(order[0]+" first", func(t *testing.T) { gangPreemptionMixedShapes(t, order) })
	}
}

func gangPreemptionMixedShapes(t *testing.T, order []string) {
	e := newTopoEnv(t, nodesWithCPU("8", "node-0", "node-1", "node-2", "node-3"),
		v1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
		hntesting.MakeHyperNode("leaf-a").Tier(1).Nodes("node-0", "node-1").Obj(),
		hntesting.MakeHyperNode("leaf-b").Tier(1).Nodes("node-2", "node-3").Obj())
	e.priorityClasses()
	e.lowPodUsing("node-0", cpuGPU("1", "8"))
	e.lowPodUsing("node-1", cpu("4"))
	e.lowPodUsing("node-2", cpuGPU("1", "8"))
	e.lowPodUsing("node-3", cpuGPU("1", "8"))
	startScheduler(t, nil)
	pg := util.PodGroup(e.ns, "mpi", 2, map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`})
	if err := util.CreatePodGroup(context.Background(), e.c.scheduling, pg); err != nil {
		t.Fatal(err)
	}
	shapes := map[string]v1.ResourceList{"mpi-launcher": cpu("7500m"), "mpi-worker": cpuGPU("1", "8")}
	var pods []*v1.Pod
	for _, name := range order {
		requests := shapes[name]
		p := util.Pod(e.ns, name, plugins.SchedulerName, "", map[string]string{util.PodGroupLabel: "mpi"})
		p.Spec.Containers[0].Resources.Requests = requests
		p.Spec.Containers[0].Resources.Limits = requests
		p.Spec.PriorityClassName = e.ns + "-high"
		pods = append(pods, p)
	}
	names, err := util.CreatePods(context.Background(), e.c.kube, pods...)
	if err != nil {
		t.Fatal(err)
	}
	got := e.waitBound(names)
	if diff := cmp.Diff(map[string]string{"mpi-launcher": "node-0", "mpi-worker": "node-1"}, got); diff != "" {
		t.Errorf("placements (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"low-node-1", "low-node-2", "low-node-3"}, e.remaining("low-")); diff != "" {
		t.Errorf("low-priority pods left (-want,+got):\n%s", diff)
	}
	preempting := e.waitEvent(gangpreemption.EventGangPreempting)
	want := fmt.Sprintf("gang %s/mpi: evicting 1 pod(s) of lower priority in leaf-a so that 2 members fit: %s/low-node-0; not chosen: leaf-b would evict 2 pod(s) up to priority 1000, 0 member(s) to spare", e.ns, e.ns)
	if preempting.Note != want {
		t.Errorf("GangPreempting %q,\nwant %q", preempting.Note, want)
	}
}

// TestGangPreemptionSubGroups: a job of two partitions of three 4-CPU members, each partition
// hard in one leaf, the job hard at tier 2 (seed 003's tree: leaves of four 4-CPU nodes).
// Low-priority pods fill node-0, node-1, node-4 and node-5 in t2-a and every node of t2-b.
// Two evictions in t2-a let the job run, but only one in each leaf: evicting node-4 and
// node-5 would free six nodes as well, with one leaf holding two. Exactly low-node-1 and
// low-node-5 go, and each partition binds inside one leaf.
func TestGangPreemptionSubGroups(t *testing.T) {
	nodes, hns, leafOf := seed003Tree()
	e := newTopoEnv(t, nodes, nil, hns...)
	e.priorityClasses()
	var want []string
	for i := range 16 {
		node := fmt.Sprintf("node-%d", i)
		switch node {
		case "node-2", "node-3", "node-6", "node-7":
			continue
		case "node-0", "node-4":
			want = append(want, "low-"+node)
		default:
			if i >= 8 {
				want = append(want, "low-"+node)
			}
		}
		e.lowPodUsing(node, cpu("4"))
	}
	slices.Sort(want)
	startScheduler(t, nil)
	annotations := map[string]string{
		podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":2}`,
		podgroup.SubGroupPolicyAnnotation:  `[{"name":"tp","subGroupSize":3,"minSubGroups":2,"matchLabelKeys":["partition"],"networkTopology":{"mode":"hard","highestTierAllowed":1}}]`,
	}
	if err := util.CreatePodGroup(context.Background(), e.c.scheduling, util.PodGroup(e.ns, "train", 6, annotations)); err != nil {
		t.Fatal(err)
	}
	pods := util.GangPods(e.ns, "train", plugins.SchedulerName, "4", 6)
	for i, p := range pods {
		p.Labels["partition"] = fmt.Sprint(i / 3)
		p.Spec.PriorityClassName = e.ns + "-high"
	}
	names, err := util.CreatePods(context.Background(), e.c.kube, pods...)
	if err != nil {
		t.Fatal(err)
	}
	got := e.waitBound(names)
	if diff := cmp.Diff(want, e.remaining("low-")); diff != "" {
		t.Errorf("low-priority pods left (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"node-1", "node-2", "node-3", "node-5", "node-6", "node-7"}, nodeSet(got)); diff != "" {
		t.Errorf("job nodes (-want,+got):\n%s", diff)
	}
	for _, partition := range [][]string{names[:3], names[3:]} {
		if leaves := leavesOf(got, leafOf, partition); len(leaves) != 1 {
			t.Errorf("partition %v spans leaves %v, want one", partition, leaves)
		}
	}
}
