package networktopology

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	hnmetrics "github.com/hypernode-dev/hypernode-scheduler/pkg/metrics"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// TestFailedPlanIsReused: a gang that cannot fit is planned once; its other members reuse the
// failure until something that can change the answer happens, and even then only after the
// back-off. Capacity freed where the gang could never fit changes nothing.
func TestFailedPlanIsReused(t *testing.T) {
	// Leaves of two 1-CPU nodes: a hard tier-1 gang of three never fits, even in an empty leaf.
	e := newPlanEnv(t, map[string]int{"big": 3, "other": 1})
	key := podgroup.Key{Namespace: "ns", Name: "big"}
	const want = "hard topology (tier<=1): no HyperNode can host 3 pods; tier 1: s0 2/3, s1 2/3 (+2 more)"
	preFilter := func(i int) {
		t.Helper()
		_, status, _ := e.fw.RunPreFilterPlugins(e.ctx, framework.NewCycleState(), e.pod("big", i))
		if status.IsSuccess() || status.Message() != want {
			t.Fatalf("PreFilter(big-%d) = %v, want %q", i, status, want)
		}
	}
	hnmetrics.Register()
	planned := func() (plans, reused float64) {
		t.Helper()
		m := planMetrics(t)
		return m["plans_total/placed"] + m["plans_total/no_domain"] + m["plans_total/error"], m["plan_reuses_total/no_domain"]
	}
	plans0, reused0 := planned()
	counts := func(wantPlans, wantReused float64) {
		t.Helper()
		plans, reused := planned()
		if plans-plans0 != wantPlans || reused-reused0 != wantReused {
			t.Errorf("plans made %v, failures reused %v; want %v and %v", plans-plans0, reused-reused0, wantPlans, wantReused)
		}
	}
	for i := range 3 {
		preFilter(i)
	}
	counts(1, 2)

	// Room freed in a leaf that could never hold three members: not a reason to plan.
	e.plugin.freedOn("node-0", podgroup.Key{Namespace: "ns", Name: "other"}, "gone-0")
	e.plugin.gangs.Lock()
	if e.plugin.gangs.PlanFailureLocked(key).Stale {
		t.Error("freed capacity in s0 made the failure stale, though no leaf can hold the gang")
	}
	e.plugin.gangs.Unlock()
	e.plugin.promisesReleased(klog.Background(), []string{"s0"})
	e.plugin.gangs.Lock()
	if e.plugin.gangs.PlanFailureLocked(key).Stale {
		t.Error("promises released in s0 made the failure stale, though no leaf can hold the gang")
	}
	e.plugin.gangs.Unlock()
	preFilter(0)
	counts(1, 3)

	// A node added can help, but the back-off is still running: the failure is reused and
	// the member is woken when the back-off ends. (The back-off is set long here: a test
	// goroutine slower than the real 1 s back-off would plan again.)
	e.plugin.gangs.Lock()
	e.plugin.gangs.PlanFailureLocked(key).RetryAt = time.Now().Add(time.Hour)
	e.plugin.gangs.Unlock()
	e.plugin.markAllStale()
	preFilter(1)
	counts(1, 4)
	e.plugin.gangs.Lock()
	f := e.plugin.gangs.PlanFailureLocked(key)
	if f.Wake == nil {
		t.Error("no wake-up armed for the end of the back-off")
	}
	f.RetryAt = time.Now().Add(-time.Millisecond) // the back-off is over
	e.plugin.gangs.Unlock()
	preFilter(1)
	counts(2, 4)
	e.plugin.gangs.Lock()
	if f := e.plugin.gangs.PlanFailureLocked(key); f.Failures != 2 || time.Until(f.RetryAt) <= time.Second {
		t.Errorf("after two failures in a row: %d failures, retry in %v; want 2 and a 2s back-off", f.Failures, time.Until(f.RetryAt))
	}
	f = e.plugin.gangs.PlanFailureLocked(key)
	f.RetryAt = time.Now().Add(-time.Millisecond)
	e.plugin.gangs.Unlock()

	// Nothing changed since: reused even after the back-off.
	preFilter(2)
	counts(2, 5)
	// A tree change can change the answer (this one does not: the new spine is above tier 1).
	e.cache.SetHyperNode(hntesting.MakeHyperNode("spine").Tier(2).Children("s0", "s1").Obj())
	preFilter(2)
	counts(3, 5)
}

func TestBackoff(t *testing.T) {
	for failures, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 5: 16 * time.Second, 6: 30 * time.Second, 40: 30 * time.Second} {
		if got := backoff(failures); got != want {
			t.Errorf("backoff(%d) = %v, want %v", failures, got, want)
		}
	}
}

// TestFailedGangRetriedThroughOneMember: the member whose plan failed is the gang's scout; a
// sibling that reuses the failure in its first cycle is sent to GangRetryGate (activated, so
// that PreEnqueue holds it), the scout is not. A change of the tree retries the scout once, even when the
// queue's own HyperNode event came before the cache had the change. When the scout plans,
// the hold ends and every pending member is activated.
func TestFailedGangRetriedThroughOneMember(t *testing.T) {
	// Leaves of two 1-CPU nodes: a hard tier-1 gang of three fits none.
	e := newPlanEnv(t, map[string]int{"big": 3})
	e.gangs.EnableRetryGate(e.fw.ProfileName())
	preFilter := func(i int) *fwk.Status {
		_, status, _ := e.fw.RunPreFilterPlugins(e.ctx, framework.NewCycleState(), e.pod("big", i))
		return status
	}
	if status := preFilter(0); status.IsSuccess() {
		t.Fatal("big-0 planned: the gang should not fit")
	}
	// big-1 has had no cycle, so no condition that says why: it passes once.
	if retried, held := e.gangs.RetryGate(e.pod("big", 1)); held {
		t.Errorf("RetryGate(big-1) = %q, %v before its first cycle; want not held", retried, held)
	}
	preFilter(1)
	preFilter(0)
	if diff := cmp.Diff([][]string{{"big-1"}}, e.activated.take()); diff != "" {
		t.Errorf("activations after the siblings' attempts (-want,+got):\n%s", diff)
	}
	if retried, held := e.gangs.RetryGate(e.pod("big", 1)); !held || retried != "big-0" {
		t.Errorf("RetryGate(big-1) = %q, %v after its cycle; want held behind big-0", retried, held)
	}

	// The cache sees a change of the tree: the scout is retried, once.
	e.cache.SetHyperNode(hntesting.MakeHyperNode("s1").Tier(1).Nodes("node-3").Obj())
	e.plugin.treeChanged(klog.Background(), e.cache.Snapshot())
	e.plugin.treeChanged(klog.Background(), e.cache.Snapshot())
	if diff := cmp.Diff([][]string{{"big-0"}}, e.activated.take()); diff != "" {
		t.Errorf("activations after the tree changed (-want,+got):\n%s", diff)
	}

	// s0 gets a third node: the scout plans, the hold ends, every member is activated.
	e.cache.SetHyperNode(hntesting.MakeHyperNode("s0").Tier(1).Nodes("node-0", "node-1", "node-2").Obj())
	if status := preFilter(0); !status.IsSuccess() {
		t.Fatalf("big-0 after s0 grew: %v", status)
	}
	if diff := cmp.Diff([][]string{{"big-0", "big-1", "big-2"}}, e.activated.take()); diff != "" {
		t.Errorf("activations after the plan (-want,+got):\n%s", diff)
	}
	if _, held := e.gangs.RetryGate(e.pod("big", 1)); held {
		t.Error("big-1 still held after the gang planned")
	}
}

// TestFreedOnOncePerDeparture: kube-scheduler asks the hint of every waiting gang about one
// departure; the failures are marked stale in the first call only, and each call still
// answers for its own gang. A failure recorded since, or the same pod leaving another node
// (a rejected reservation is reported as a departure, the pod may bind elsewhere and leave
// again), is a new pass. Leaves: s0 = node-0,1; s1 = node-2,3.
func TestFreedOnOncePerDeparture(t *testing.T) {
	e := newPlanEnv(t, map[string]int{"a": 1, "b": 1})
	key := func(name string) podgroup.Key { return podgroup.Key{Namespace: "ns", Name: name} }
	record := func(name string, possible ...string) {
		e.plugin.recordFailure(key(name), e.pod(name, 0), fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "no room"),
			e.cache.Snapshot(), podgroup.Info{}, sets.New(possible...))
	}
	stale := func(name string) bool {
		e.plugin.gangs.Lock()
		defer e.plugin.gangs.Unlock()
		return e.plugin.gangs.PlanFailureLocked(key(name)).Stale
	}
	unmark := func(name string) {
		e.plugin.gangs.Lock()
		defer e.plugin.gangs.Unlock()
		e.plugin.gangs.PlanFailureLocked(key(name)).Stale = false
	}
	record("a", "s0")
	record("b", "s1")
	if !e.plugin.freedOn("node-0", key("a"), "x") || e.plugin.freedOn("node-0", key("b"), "x") {
		t.Error("room freed in s0: want it to help a (s0) and not b (s1)")
	}
	if !stale("a") || stale("b") {
		t.Errorf("after room freed in s0: a stale %v, b stale %v; want true, false", stale("a"), stale("b"))
	}
	// The same departure asked again: no second pass (white box: a's mark is not renewed).
	unmark("a")
	if helps := e.plugin.freedOn("node-0", key("a"), "x"); !helps || stale("a") {
		t.Errorf("the same departure again: helps a %v, a stale %v; want true, false (one pass per departure)", helps, stale("a"))
	}
	// A failure recorded since: the same departure marks it.
	record("b", "s0", "s1")
	if !e.plugin.freedOn("node-0", key("b"), "x") || !stale("b") {
		t.Error("a failure recorded after the first pass was not marked by the same departure")
	}
	// The same pod leaving a node of s1.
	record("b", "s1")
	e.plugin.freedOn("node-0", key("b"), "y")
	if stale("b") {
		t.Fatal("room freed in s0 made b (s1) stale")
	}
	if !e.plugin.freedOn("node-2", key("b"), "y") || !stale("b") {
		t.Error("the same pod leaving node-2 (s1) did not mark b stale")
	}
	// Every failure stale already: markAllStale needs no pass until one is recorded.
	e.plugin.markAllStale()
	unmark("a")
	e.plugin.markAllStale()
	if stale("a") {
		t.Error("markAllStale passed over the failures again with none recorded since")
	}
	record("a", "s0")
	e.plugin.markAllStale()
	if !stale("a") || !stale("b") {
		t.Error("markAllStale after a failure was recorded did not mark every failure")
	}
}

// BenchmarkFreedOnPerDeparture: one pod leaves a node while 1,000 gangs wait with a failed
// plan, and kube-scheduler asks each gang's hint about it (one op: the 1,000 calls).
func BenchmarkFreedOnPerDeparture(b *testing.B) {
	e := newPlanEnv(b, nil)
	const gangs = 1000
	keys := make([]podgroup.Key, gangs)
	for i := range keys {
		keys[i] = podgroup.Key{Namespace: "ns", Name: fmt.Sprintf("g%d", i)}
		scout := e.pod(keys[i].Name, 0)
		e.registry.SetPod(nil, scout)
		e.plugin.setFailure(keys[i], scout, &gangstate.PlanFailure{Possible: sets.New(fmt.Sprintf("s%d", i%4))})
	}
	b.ResetTimer()
	for n := range b.N {
		uid := types.UID(fmt.Sprint(n))
		for _, k := range keys {
			e.plugin.freedOn("node-0", k, uid)
		}
	}
}

// TestElasticFailureWaitsForItsMinimum: an elastic gang that cannot place even minMember
// members now is woken by room for minMember, not only by room for all of its members (no
// leaf holds all three, each holds two). Its failure also answers for at most failureMaxAge.
func TestElasticFailureWaitsForItsMinimum(t *testing.T) {
	var running []*v1.Pod
	for i := range 8 {
		running = append(running, st.MakePod().Namespace("other").Name(fmt.Sprintf("busy-%d", i)).UID(fmt.Sprintf("busy-%d", i)).
			Node(fmt.Sprintf("node-%d", i)).Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj())
	}
	e := newPlanEnvWithPods(t, nil, nil, running)
	// A spine above the leaves: the gang, hard at tier 1, cannot span the cluster.
	e.cache.SetHyperNode(hntesting.MakeHyperNode("spine").Tier(2).Children("s0", "s1", "s2", "s3").Obj())
	key := podgroup.Key{Namespace: "ns", Name: "elastic"}
	e.elasticGang("elastic", 2, 3)
	if _, status, _ := e.fw.RunPreFilterPlugins(e.ctx, framework.NewCycleState(), e.pod("elastic", 0)); status.IsSuccess() {
		t.Fatal("PreFilter(elastic-0) succeeded on a full cluster")
	}
	e.plugin.gangs.Lock()
	possible := sets.List(e.plugin.gangs.PlanFailureLocked(key).Possible)
	e.plugin.gangs.Unlock()
	if diff := cmp.Diff([]string{"s0", "s1", "s2", "s3"}, possible); diff != "" {
		t.Errorf("domains that can help the gang (-want,+got):\n%s", diff)
	}
	if !e.plugin.freedOn("node-4", key, "busy-4") {
		t.Error("room freed in s2, which holds minMember, does not help the gang")
	}

	// An old failure is planned again, though nothing the plugin hears of changed.
	e.plugin.gangs.Lock()
	f := e.plugin.gangs.PlanFailureLocked(key)
	f.Stale, f.RetryAt, f.Made = false, time.Now().Add(-time.Millisecond), time.Now().Add(-failureMaxAge)
	e.plugin.gangs.Unlock()
	if status := e.plugin.reuseFailure(klog.Background(), key, e.registry.Info(key), e.cache.Snapshot()); status != nil {
		t.Errorf("a failure %s old answered again: %v", failureMaxAge, status)
	}
}

// TestFailureOnAnOlderTreeRetries: a plan made on a tree that changed before its failure was
// recorded retries the gang at once; the tree's listener ran before the failure existed.
func TestFailureOnAnOlderTreeRetries(t *testing.T) {
	e := newPlanEnv(t, map[string]int{"big": 3})
	key := podgroup.Key{Namespace: "ns", Name: "big"}
	older := e.cache.Snapshot()
	e.cache.SetHyperNode(hntesting.MakeHyperNode("spine").Tier(2).Children("s0", "s1").Obj())
	e.activated.mu.Lock()
	e.activated.calls = nil
	e.activated.mu.Unlock()
	e.plugin.recordFailure(key, e.pod("big", 0), fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "no room"), older, e.registry.Info(key), nil)
	e.activated.mu.Lock()
	defer e.activated.mu.Unlock()
	if diff := cmp.Diff([][]string{{"big-0"}}, e.activated.calls); diff != "" {
		t.Errorf("activations (-want,+got):\n%s", diff)
	}
}

// TestRefusedConstraintRetriedWhenTheTreeChanges: a gang whose constraint names a tier no
// HyperNode carries is refused; the queue's HyperNode event may run a member before the cache
// has the HyperNode that fixes it, so the cache's change retries the gang (once), and a
// refusal judged on a tree older than the cache's retries the member at once.
func TestRefusedConstraintRetriedWhenTheTreeChanges(t *testing.T) {
	e := newPlanEnv(t, map[string]int{"big": 2})
	key := podgroup.Key{Namespace: "ns", Name: "big"}
	e.registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "big", UID: "pg-big",
			Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierName":"spine"}`}},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2},
	})
	_, status, _ := e.fw.RunPreFilterPlugins(e.ctx, framework.NewCycleState(), e.pod("big", 0))
	if status.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(status.Message(), `"spine"`) {
		t.Fatalf("PreFilter(big-0) = %v, want refused for the tier name", status)
	}
	e.activated.take()
	e.plugin.treeChanged(klog.Background(), e.cache.Snapshot())
	if got := e.activated.take(); len(got) != 0 {
		t.Errorf("activated on the same tree: %v", got)
	}
	e.cache.SetHyperNode(hntesting.MakeHyperNode("spine").Tier(2).TierName("spine").Children("s0", "s1").Obj())
	e.plugin.treeChanged(klog.Background(), e.cache.Snapshot())
	e.plugin.treeChanged(klog.Background(), e.cache.Snapshot())
	if diff := cmp.Diff([][]string{{"big-0"}}, e.activated.take()); diff != "" {
		t.Errorf("activations after the tree changed (-want,+got):\n%s", diff)
	}
	if _, status, _ := e.fw.RunPreFilterPlugins(e.ctx, framework.NewCycleState(), e.pod("big", 0)); !status.IsSuccess() {
		t.Errorf("PreFilter(big-0) on the fixed tree = %v", status)
	}
	// The plan brings back the member refused before it (no hold: nothing else would).
	if diff := cmp.Diff([][]string{{"big-1"}}, e.activated.take()); diff != "" {
		t.Errorf("activations after the plan (-want,+got):\n%s", diff)
	}

	older := e.cache.Snapshot()
	e.cache.SetHyperNode(hntesting.MakeHyperNode("s3").Tier(1).Nodes("node-6").Obj())
	e.activated.take()
	e.plugin.refuseConstraint(klog.Background(), &gangstate.View{Key: key, Pod: e.pod("big", 1), Info: e.registry.Info(key), Tree: older}, "refused on an older tree")
	if diff := cmp.Diff([][]string{{"big-1"}}, e.activated.take()); diff != "" {
		t.Errorf("activations after a refusal on an older tree (-want,+got):\n%s", diff)
	}
}

// TestPlanThatPlacesNobodyRetriedWhenTheTreeChanges: a plan that places nobody (the job's
// other sub-groups find no room next to its running members) no longer answers on a newer
// tree; the tree's change retries the gang through one member, once.
func TestPlanThatPlacesNobodyRetriedWhenTheTreeChanges(t *testing.T) {
	e, pod, _ := newRunningJobEnv(t, `[{"name":"tp","subGroupSize":1,"matchLabelKeys":["partition"]}]`)
	e.registry.SetPod(nil, pod(2))
	e.registry.SetPod(nil, pod(3))
	e.fw.RunPreFilterPlugins(e.ctx, framework.NewCycleState(), pod(2))
	if plan := e.plan("e"); plan == nil || !plan.WaitsForRoom {
		t.Fatalf("plan %+v, want one that places nobody", plan)
	}
	e.activated.take()
	e.plugin.treeChanged(klog.Background(), e.cache.Snapshot())
	if got := e.activated.take(); len(got) != 0 {
		t.Errorf("activated on the same tree: %v", got)
	}
	e.cache.SetHyperNode(hntesting.MakeHyperNode("s9").Tier(1).Obj())
	e.plugin.treeChanged(klog.Background(), e.cache.Snapshot())
	e.plugin.treeChanged(klog.Background(), e.cache.Snapshot())
	if diff := cmp.Diff([][]string{{"e-2"}}, e.activated.take()); diff != "" {
		t.Errorf("activations after the tree changed (-want,+got):\n%s", diff)
	}
	e.plugin.gangs.Lock()
	deferring := e.plugin.gangs.DeferringLocked().Has(podgroup.Key{Namespace: "ns", Name: "e"})
	e.plugin.gangs.Unlock()
	if !deferring {
		t.Error("the tree's retry took the gang off the deferring gangs: a release of promised slots would not wake it if the retry does not plan")
	}

	// A plan that places nobody, made on a tree older than the cache's (its listener ran
	// before the plan existed), retries its member at once.
	older := e.cache.Snapshot()
	e.cache.SetHyperNode(hntesting.MakeHyperNode("s8").Tier(1).Obj())
	nodes, err := e.snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	key := podgroup.Key{Namespace: "ns", Name: "e"}
	if _, status := e.plugin.planGang(e.ctx, framework.NewCycleState(), e.plugin.viewFor(key, pod(3), older), nodes); !status.IsSuccess() {
		t.Fatalf("planGang(e-3) = %v", status)
	}
	if plan := e.plan("e"); plan == nil || !plan.WaitsForRoom || plan.Generation != older.Generation() {
		t.Fatalf("plan %+v, want one that places nobody, on the older tree", plan)
	}
	if diff := cmp.Diff([][]string{{"e-3"}}, e.activated.take()); diff != "" {
		t.Errorf("activations after a plan on an older tree (-want,+got):\n%s", diff)
	}
}
