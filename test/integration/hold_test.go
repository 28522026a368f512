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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// holdEnv is two spines of two leaves of two 4-CPU nodes (spine-0: n-0..n-3, spine-1:
// n-4..n-7), small jobs running on them (2-CPU pods, two per node), and the scheduler with
// Gang's hold args: a gang that waited holds a spine (docs/design.md, "Holds").
type holdEnv struct {
	*topoEnv
	stop func()
	args map[string]map[string]any
}

const spineGang = `{"mode":"hard","highestTierAllowed":2}`

var (
	spine0 = []string{"n-0", "n-1", "n-2", "n-3"}
	spine1 = []string{"n-4", "n-5", "n-6", "n-7"}
)

func holdTree() []*topologyv1alpha1.HyperNode {
	leaf := func(name string, nodes ...string) *topologyv1alpha1.HyperNode {
		return hntesting.MakeHyperNode(name).Tier(1).Nodes(nodes...).Obj()
	}
	return []*topologyv1alpha1.HyperNode{
		leaf("leaf-0", "n-0", "n-1"), leaf("leaf-1", "n-2", "n-3"),
		leaf("leaf-2", "n-4", "n-5"), leaf("leaf-3", "n-6", "n-7"),
		hntesting.MakeHyperNode("spine-0").Tier(2).Children("leaf-0", "leaf-1").Obj(),
		hntesting.MakeHyperNode("spine-1").Tier(2).Children("leaf-2", "leaf-3").Obj(),
	}
}

// newHoldEnv starts the scheduler with hold args (waitSeconds 1 unless given) over the two
// spines, with the running jobs: one on n-0 and two on every other node (7 in spine-0, 8 in
// spine-1), named job-<node>-<i>.
func newHoldEnv(t *testing.T, hold map[string]any) *holdEnv {
	t.Helper()
	args := map[string]any{"waitSeconds": 1}
	for k, v := range hold {
		args[k] = v
	}
	e := &holdEnv{topoEnv: newTopoEnv(t, nodesWithCPU("4", append(append([]string{}, spine0...), spine1...)...), nil, holdTree()...),
		args: map[string]map[string]any{"Gang": {"hold": args}}}
	for _, node := range append(append([]string{}, spine0...), spine1...) {
		jobs := 2
		if node == "n-0" {
			jobs = 1
		}
		for i := range jobs {
			e.running(fmt.Sprintf("job-%s-%d", node, i), node)
		}
	}
	// A PodGroup outliving its test would hand its hold record to the next test's scheduler.
	t.Cleanup(func() {
		if err := e.c.scheduling.SchedulingV1alpha1().PodGroups(e.ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Error(err)
		}
	})
	e.stop = startScheduler(t, e.args)
	return e
}

// running binds a small job's pod (2 CPU) to a node, as if it had been scheduled earlier.
func (e *holdEnv) running(name, node string) {
	e.t.Helper()
	pod := util.Pod(e.ns, name, plugins.SchedulerName, "2", nil)
	pod.Spec.NodeName = node
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	if _, err := util.CreatePods(context.Background(), e.c.kube, pod); err != nil {
		e.t.Fatal(err)
	}
}

// arrive creates a small job (2 CPU) for the scheduler, with a PriorityClass or none.
func (e *holdEnv) arrive(name, priorityClass string) {
	e.t.Helper()
	pod := util.Pod(e.ns, name, plugins.SchedulerName, "2", nil)
	pod.Spec.PriorityClassName = priorityClass
	if _, err := util.CreatePods(context.Background(), e.c.kube, pod); err != nil {
		e.t.Fatal(err)
	}
}

// finish deletes the jobs' pods (they finished) and waits until they are gone.
func (e *holdEnv) finish(names ...string) {
	e.t.Helper()
	for _, name := range names {
		e.deletePodNow(name)
	}
}

// bigGang creates a gang of four 4-CPU members that needs a whole spine.
func (e *holdEnv) bigGang(name string, annotations map[string]string) []string {
	e.t.Helper()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[podgroup.NetworkTopologyAnnotation] = spineGang
	return e.gangOf(util.PodGroup(e.ns, name, 4, annotations), 4, cpu("4"))
}

// record waits until the PodGroup's hold record satisfies ok, and returns it (nil: none).
func (e *holdEnv) record(group string, ok func(*podgroup.HoldRecord) bool) *podgroup.HoldRecord {
	e.t.Helper()
	var last *podgroup.HoldRecord
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, boundTimeout, true, func(ctx context.Context) (bool, error) {
		pg, err := e.c.scheduling.SchedulingV1alpha1().PodGroups(e.ns).Get(ctx, group, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if last, err = podgroup.ParseHoldRecord(pg.Annotations); err != nil {
			return false, err
		}
		return ok(last), nil
	})
	if err != nil {
		e.t.Fatalf("PodGroup %s: hold record %+v: %v", group, last, err)
	}
	return last
}

// heldOn waits until the gang's record holds the nodes of the domain.
func (e *holdEnv) heldOn(group, domain string, nodes []string) *podgroup.HoldRecord {
	e.t.Helper()
	return e.record(group, func(r *podgroup.HoldRecord) bool {
		return r != nil && r.Domain == domain && cmp.Equal(r.Nodes, nodes)
	})
}

// keptOff waits until the pod's condition says the gang's hold keeps it off its nodes.
func (e *holdEnv) keptOff(pod, group string) {
	e.t.Helper()
	e.waitCondition(pod, v1.PodReasonUnschedulable, fmt.Sprintf("node(s) held for gang %s/%s, which comes before this pod in queue order", e.ns, group))
}

// onSpine asserts that every pod named is bound inside the spine's nodes.
func (e *holdEnv) onSpine(placements map[string]string, nodes []string) {
	e.t.Helper()
	if !within(placements, nodes...) {
		e.t.Errorf("placements %v, want all within %v", placements, nodes)
	}
}

// TestHoldDrainsASpineForABigGang: a gang that needs a whole spine, among small jobs of its
// priority that keep arriving, holds the spine with the fewest pods in the way (spine-0: 7);
// the jobs that arrive after it never take room there, while spine-1 keeps running them, and
// the gang binds on spine-0 once its last job finished.
func TestHoldDrainsASpineForABigGang(t *testing.T) {
	e := newHoldEnv(t, nil)
	members := e.bigGang("big", nil)
	_, condition := e.waitConditionOnAny(members, "", "holding spine-0 (tier 2) for this gang")
	want := fmt.Sprintf("holding spine-0 (tier 2) for this gang: 0/4 nodes free, waiting for 7 pods to finish: %[1]s/job-n-0-0, %[1]s/job-n-1-0, %[1]s/job-n-1-1, +4 more", e.ns)
	if !strings.Contains(condition, want) {
		t.Errorf("condition %q, want it to say %q", condition, want)
	}
	e.heldOn("big", "spine-0", spine0)
	ev := e.waitEvent("GangHolding")
	if !strings.Contains(ev.Note, "not chosen: spine-1 waits for 8 pod(s)") {
		t.Errorf("GangHolding %q does not explain the choice", ev.Note)
	}

	// n-0 has room for a small job, held for the gang: a job that arrives waits.
	e.arrive("late-0", "")
	e.keptOff("late-0", "big")
	// Jobs finish in both spines; new ones arrive and run in spine-1 only.
	spine0Jobs := []string{"job-n-0-0", "job-n-1-0", "job-n-1-1", "job-n-2-0", "job-n-2-1", "job-n-3-0", "job-n-3-1"}
	spine1Jobs := []string{"job-n-4-0", "job-n-4-1", "job-n-5-0", "job-n-5-1", "job-n-6-0", "job-n-6-1", "job-n-7-0"}
	var late []string
	for i, job := range spine0Jobs[:6] {
		e.finish(job, spine1Jobs[i])
		name := fmt.Sprintf("late-%d", i+1)
		e.arrive(name, "")
		late = append(late, name)
		// One of the two waiting jobs runs in the room freed in spine-1.
		waitBoundCount(e.topoEnv, append([]string{"late-0"}, late...), i+1)
	}
	placed := e.bound()
	for _, name := range append([]string{"late-0"}, late...) {
		if node, ok := placed[name]; ok && !within(map[string]string{name: node}, spine1...) {
			t.Errorf("%s bound to %s, in the held spine", name, node)
		}
	}
	e.finish(spine0Jobs[6])
	e.onSpine(e.waitBound(members), spine0)
	e.record("big", func(r *podgroup.HoldRecord) bool { return r == nil })
}

// waitBoundCount waits until exactly n of the pods are bound.
func waitBoundCount(e *topoEnv, pods []string, n int) {
	e.t.Helper()
	var bound int
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, boundTimeout, true, func(context.Context) (bool, error) {
		placed := e.bound()
		bound = 0
		for _, p := range pods {
			if _, ok := placed[p]; ok {
				bound++
			}
		}
		return bound == n, nil
	})
	if err != nil {
		e.t.Fatalf("%d of %v bound, want %d", bound, pods, n)
	}
}

// TestHoldYieldsToHigherPriority: a small job of higher priority than the gang takes the
// held room at once; the gang, which cannot fit there any more, holds the other spine.
func TestHoldYieldsToHigherPriority(t *testing.T) {
	e := newHoldEnv(t, nil)
	e.priorityClasses()
	members := e.bigGang("big", nil)
	e.waitConditionOnAny(members, "", "holding spine-0 (tier 2) for this gang")
	e.heldOn("big", "spine-0", spine0)
	e.arrive("vip", e.ns+"-high")
	if got := e.waitBound([]string{"vip"}); got["vip"] != "n-0" {
		t.Errorf("vip bound to %q, want n-0 (the held room)", got["vip"])
	}
	e.heldOn("big", "spine-1", spine1)
	e.finish("job-n-4-0")
	e.arrive("late", "")
	e.keptOff("late", "big")
}

// TestTwoGangsHoldTwoSpines: two gangs that each need a spine hold one each, in queue order
// (the older one the spine with fewer pods in the way), and each binds in its own.
func TestTwoGangsHoldTwoSpines(t *testing.T) {
	e := newHoldEnv(t, map[string]any{"maxNodesPercent": 100})
	first := e.bigGang("a-first", nil)
	second := e.bigGang("b-second", nil)
	e.heldOn("a-first", "spine-0", spine0)
	e.heldOn("b-second", "spine-1", spine1)
	var jobs []string
	for _, node := range append(append([]string{}, spine0...), spine1...) {
		jobs = append(jobs, "job-"+node+"-0")
		if node != "n-0" {
			jobs = append(jobs, "job-"+node+"-1")
		}
	}
	e.finish(jobs...)
	e.onSpine(e.waitBound(first), spine0)
	e.onSpine(e.waitBound(second), spine1)
}

// TestHoldSurvivesARestart: a new scheduler process goes on with the hold its PodGroup
// records (same domain, same start), keeps the room drained so far, and the gang binds there.
func TestHoldSurvivesARestart(t *testing.T) {
	e := newHoldEnv(t, nil)
	members := e.bigGang("big", nil)
	before := e.heldOn("big", "spine-0", spine0)
	e.finish("job-n-1-0", "job-n-1-1") // n-1 drained
	e.stop()
	startScheduler(t, e.args)
	e.arrive("late", "")
	e.keptOff("late", "big")
	e.finish("job-n-0-0", "job-n-2-0", "job-n-2-1", "job-n-3-0")
	after := e.heldOn("big", "spine-0", spine0)
	if !after.Since.Equal(before.Since) {
		t.Errorf("the restarted scheduler began a new hold at %v, want the one of %v", after.Since, before.Since)
	}
	e.finish("job-n-3-1")
	e.onSpine(e.waitBound(members), spine0)
	if placed := e.bound(); placed["late"] != "" && within(map[string]string{"late": placed["late"]}, spine0...) {
		t.Errorf("late bound to %s, in the held spine", placed["late"])
	}
}

// TestDeletedGangReleasesItsHold: the room held for a gang whose PodGroup is deleted is free
// at once for the job waiting on it.
func TestDeletedGangReleasesItsHold(t *testing.T) {
	e := newHoldEnv(t, nil)
	e.bigGang("big", nil)
	e.heldOn("big", "spine-0", spine0)
	e.arrive("late", "")
	e.keptOff("late", "big")
	if err := e.c.scheduling.SchedulingV1alpha1().PodGroups(e.ns).Delete(context.Background(), "big", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := e.waitBound([]string{"late"}); got["late"] != "n-0" {
		t.Errorf("late bound to %q, want n-0", got["late"])
	}
}

// TestImpossibleGangHoldsNothing: a gang that needs more than a spine, hard at the spine
// tier, holds nothing and says so; the small jobs keep both spines.
func TestImpossibleGangHoldsNothing(t *testing.T) {
	e := newHoldEnv(t, nil)
	members := e.gangOf(util.PodGroup(e.ns, "huge", 5, map[string]string{podgroup.NetworkTopologyAnnotation: spineGang}), 5, cpu("4"))
	e.waitConditionOnAny(members, "", fmt.Sprintf("gang %s/huge holds nothing: no domain can host 5 members even when every pod of its priority or lower finishes (leaf-0 2/5, leaf-1 2/5, leaf-2 2/5, leaf-3 2/5, spine-0 4/5, spine-1 4/5)", e.ns))
	e.waitEvent("HoldImpossible")
	e.arrive("late", "")
	if got := e.waitBound([]string{"late"}); got["late"] != "n-0" {
		t.Errorf("late bound to %q, want n-0", got["late"])
	}
	if r := e.record("huge", func(*podgroup.HoldRecord) bool { return true }); r != nil {
		t.Errorf("an impossible gang holds %+v", r)
	}
}

// TestInvalidHoldAnnotationIsRefused: a hold-after annotation that is not a duration or
// "never" holds the gang back with the field named, on its members and in an Event.
func TestInvalidHoldAnnotationIsRefused(t *testing.T) {
	e := newHoldEnv(t, nil)
	members := e.bigGang("bad", map[string]string{podgroup.HoldAfterAnnotation: "soon"})
	want := fmt.Sprintf(`PodGroup %s/bad: metadata.annotations[hypernode.dev/hold-after]: Invalid value: "soon": must be a duration of 0s or more, such as "90s" or "5m", or "never"`, e.ns)
	e.waitConditionOnAny(members, "", want)
	if ev := e.waitEvent("InvalidHoldAnnotation"); ev.Note != want {
		t.Errorf("Event %q, want %q", ev.Note, want)
	}
	placed := e.bound()
	for _, m := range members {
		if node, ok := placed[m]; ok {
			t.Errorf("%s bound to %s although its PodGroup is invalid", m, node)
		}
	}
}

// TestPlainGangHolds: a gang without a topology constraint, refused for its remembered failure
// when it becomes due (Gang's PreFilter first, the cycle's state half built), holds where it
// fits soonest: spine-0 (7 jobs in the way, as many as the whole cluster's best four nodes,
// and the lower tier); a job that arrives is kept off n-0's free room, and the gang binds on
// the held nodes once their jobs finished.
func TestPlainGangHolds(t *testing.T) {
	e := newHoldEnv(t, nil)
	members := e.gangOf(util.PodGroup(e.ns, "plain", 4, nil), 4, cpu("4"))
	e.heldOn("plain", "spine-0", spine0)
	e.waitConditionOnAny(members, "", "holding spine-0 (tier 2) for this gang: 0/4 nodes free, waiting for 7 pods to finish")
	e.arrive("late", "")
	e.keptOff("late", "plain")
	// n-0 free: a member reserves it, the gang fails, and the members wait for room. Their
	// condition is the scheduler's own (not a PostFilter plugin's failure on a cycle that
	// Gang's PreFilter refused: DynamicResources' "not found").
	e.finish("job-n-0-0")
	if _, condition := e.waitConditionOnAny(members, "", "could not be placed when last tried"); strings.Contains(condition, "not found") {
		t.Errorf("a waiting member's condition reports an error: %q", condition)
	}
	e.finish("job-n-1-0", "job-n-1-1", "job-n-2-0", "job-n-2-1", "job-n-3-0", "job-n-3-1")
	placed := e.waitBound(members)
	var nodes []string
	for _, m := range members {
		nodes = append(nodes, placed[m])
	}
	slices.Sort(nodes)
	if diff := cmp.Diff(spine0, nodes); diff != "" {
		t.Errorf("members' nodes (-held,+bound):\n%s", diff)
	}
	if notes := e.eventsByReason()["HoldImpossible"]; len(notes) > 0 {
		t.Errorf("HoldImpossible Events for a gang that holds: %q", notes)
	}
}
