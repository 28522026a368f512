package gang

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// TestMinResources: a group whose minResources exceed what the whole cluster can allocate is
// refused in PreFilter with the shortfall; otherwise the check is skipped.
func TestMinResources(t *testing.T) {
	e := newEnv(t, 60)
	e.registry.SetNode(nil, st.MakeNode().Name("n1").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "8", "nvidia.com/gpu": "8"}).Obj())
	e.registry.SetNode(nil, st.MakeNode().Name("n2").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "8", "nvidia.com/gpu": "8"}).Obj())
	set := func(min v1.ResourceList) {
		e.registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train", UID: "uid-train"},
			Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: 1, MinResources: min},
		})
	}
	pod := member("p0", "train")
	set(v1.ResourceList{"nvidia.com/gpu": resource.MustParse("24"), v1.ResourceCPU: resource.MustParse("4")})
	_, got := e.plugin.PreFilter(e.ctx, framework.NewCycleState(), pod, nil)
	want := fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "PodGroup team/train needs minResources the whole cluster cannot allocate: nvidia.com/gpu 24 (cluster allocatable 16)")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PreFilter (-want,+got):\n%s", diff)
	}
	set(v1.ResourceList{"nvidia.com/gpu": resource.MustParse("16")})
	if _, got := e.plugin.PreFilter(e.ctx, framework.NewCycleState(), pod, nil); got.Code() != fwk.Skip {
		t.Errorf("PreFilter with satisfiable minResources = %v, want Skip", got)
	}
}

// TestMemberHeldBehindTheBlocker: PreFilter refuses a member of a blocked gang with the
// blocker's message, and PostFilter then neither rejects the gang's waiting members nor
// records an Event for it.
func TestMemberHeldBehindTheBlocker(t *testing.T) {
	e := newEnv(t, 60)
	pods := e.gangOf(3, 3)
	if s := e.reserveAndPermit(t, pods[0]); s.Code() != fwk.Wait {
		t.Fatalf("Permit(p0) = %v, want Wait", s)
	}
	drain(e.recorder.Events)
	key := podgroup.Key{Namespace: ns, Name: "train"}
	if blocked, _ := e.gangs.SetBlocked(key, gangstate.Blocker{UID: "p2", Name: "p2", Reason: "3 node(s) didn't match Pod's node affinity/selector"}); !blocked {
		t.Fatal("the gang of three with minMember 3 was not blocked by p2")
	}
	state := framework.NewCycleState()
	_, got := e.plugin.PreFilter(e.ctx, state, pods[1], nil)
	want := fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "gang team/train is blocked: its member p2 fits no node (3 node(s) didn't match Pod's node affinity/selector); the gang is retried when that member or the nodes change")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PreFilter(p1) (-want,+got):\n%s", diff)
	}
	_, status := e.plugin.PostFilter(e.ctx, state, pods[1], framework.NewDefaultNodeToStatus())
	if status.Message() != "gang team/train: this member waits for the member that blocks the gang" {
		t.Errorf("PostFilter(p1) = %v", status)
	}
	if e.fw.GetWaitingPod(pods[0].UID) == nil {
		t.Error("p0 no longer waits: the refusal behind the blocker rejected the round")
	}
	if got := drain(e.recorder.Events); len(got) != 0 {
		t.Errorf("events: %q, want none", got)
	}
}

// TestExtraMemberOfARunningGang: a member beyond minMember that fits nowhere once the gang has
// minMember placed is told the gang runs without it; nothing is rejected or reported.
func TestExtraMemberOfARunningGang(t *testing.T) {
	e := newEnv(t, 60)
	pods := e.gangOf(2, 3)
	if s := e.reserveAndPermit(t, pods[0]); s.Code() != fwk.Wait {
		t.Fatalf("Permit(p0) = %v, want Wait", s)
	}
	if s := e.reserveAndPermit(t, pods[1]); !s.IsSuccess() {
		t.Fatalf("Permit(p1) = %v, want Success", s)
	}
	drain(e.recorder.Events)
	_, status := e.plugin.PostFilter(e.ctx, framework.NewCycleState(), pods[2], framework.NewDefaultNodeToStatus())
	const want = "gang team/train: this member cannot be placed; the gang has its minMember 2 members placed and runs without it"
	if status.Code() != fwk.Unschedulable || status.Message() != want {
		t.Errorf("PostFilter(p2) = %v, want Unschedulable %q", status, want)
	}
	if s := e.fw.WaitOnPermit(e.ctx, pods[0]); !s.IsSuccess() {
		t.Errorf("p0 = %v, want allowed", s)
	}
	if got := drain(e.recorder.Events); len(got) != 0 {
		t.Errorf("events: %q, want none", got)
	}
}

// TestPodAffinityIsNotFittingNowhere: a member every node refuses for its required pod
// affinity (to a sibling not placed yet) does not fit nowhere; one every node refuses for its
// node selector does.
func TestPodAffinityIsNotFittingNowhere(t *testing.T) {
	_, _, g, _, _ := precedenceEnv(t, false)
	nodes, err := g.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil || len(nodes) == 0 {
		t.Fatalf("the test framework has no nodes: %v", err)
	}
	refusedBy := func(plugin, reason string) fwk.NodeToStatusReader {
		statuses := framework.NewDefaultNodeToStatus()
		for _, ni := range nodes {
			statuses.Set(ni.Node().Name, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reason).WithPlugin(plugin))
		}
		return statuses
	}
	if g.fitsNowhere(refusedBy("InterPodAffinity", "node(s) didn't match pod affinity rules")) {
		t.Error("a member refused for its pod affinity fits nowhere")
	}
	if !g.fitsNowhere(refusedBy("NodeAffinity", "node(s) didn't match Pod's node affinity/selector")) {
		t.Error("a member refused everywhere for its node selector fits somewhere")
	}
}

// TestBlockedElasticGangReleasesItsWaiters: minMember 3 of 4, and two members share a node
// selector no node matches. The first of them to fail blocks the gang (it cannot complete
// without both), so the members waiting in Permit are released at once rather than holding
// their nodes until the timeout, as they would for an extra member the gang can do without.
func TestBlockedElasticGangReleasesItsWaiters(t *testing.T) {
	node := st.MakeNode().Name("node-1").Obj()
	e := newEnvOn(t, 60, internalcache.NewSnapshot(nil, []*v1.Node{node}))
	e.podGroup("train", 3, nil)
	pods := []*v1.Pod{member("p0", "train"), member("p1", "train"), member("p2", "train"), member("p3", "train")}
	for _, p := range pods[2:] {
		p.Spec.NodeSelector = map[string]string{"pool": "none"}
	}
	for _, p := range pods {
		e.registry.SetPod(nil, p)
	}
	for _, p := range pods[:2] {
		if s := e.reserveAndPermit(t, p); s.Code() != fwk.Wait {
			t.Fatalf("Permit(%s) = %v, want Wait", p.Name, s)
		}
	}
	drain(e.recorder.Events)
	const reason = "node(s) didn't match Pod's node affinity/selector"
	statuses := framework.NewDefaultNodeToStatus()
	statuses.Set("node-1", fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reason).WithPlugin("NodeAffinity"))
	_, s := e.plugin.PostFilter(e.ctx, framework.NewCycleState(), pods[2], statuses)
	if want := "gang team/train: this member cannot be placed, so no member binds; 2 waiting members released"; s.Message() != want {
		t.Errorf("PostFilter(p2) = %q, want %q", s.Message(), want)
	}
	for _, p := range pods[:2] {
		const want = "gang team/train rejected: member p2 cannot be placed (1 " + reason + ")"
		if s := e.fw.WaitOnPermit(e.ctx, p); s.Code() != fwk.Unschedulable || s.Message() != want {
			t.Errorf("%s = %v, want Unschedulable %q", p.Name, s, want)
		}
	}
	want := []string{
		"Warning GangBlocked gang team/train is blocked: its member p2 fits no node (1 " + reason + "); the gang is retried when that member or the nodes change",
		"Warning GangRejected gang team/train: member p2 cannot be placed (1 " + reason + "); 2 waiting members rejected and their resources released",
	}
	if diff := cmp.Diff(want, drain(e.recorder.Events)); diff != "" {
		t.Errorf("Events (-want +got):\n%s", diff)
	}
}

// TestUnconstrainedGangWaitsForRoomAfterItsRoundFails: a gang without a topology constraint,
// whose round is rejected because p1 finds no room, is retried through p1 alone: PreFilter
// refuses both members (and marks the cycle, so that preemption is not tried again) while
// the nodes of the snapshot offer no more than when it failed; its own released reservation
// requeues nobody. A node added (tainted not-ready, as the apiserver creates it) wakes p1 as
// soon as the registry sees it, but p1 retries only once the scheduler's snapshot shows the
// change: the registry's informer may run ahead of it; its retry ends the hold and
// activates p0. p0 then fails on the tainted node and becomes the scout; the taint removed
// lets it retry. (More room free is TestUnconstrainedGangWaitsQuietlyForRoom's.)
func TestUnconstrainedGangWaitsForRoomAfterItsRoundFails(t *testing.T) {
	node1 := st.MakeNode().Name("node-1").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4"}).Obj()
	snapshot := &swappableSnapshot{internalcache.NewSnapshot(nil, []*v1.Node{node1})}
	e := newEnvOn(t, 60, snapshot)
	e.podGroup("train", 2, nil)
	p0, p1 := member("p0", "train"), member("p1", "train")
	e.attempted(p0, p1)
	if s := e.reserveAndPermit(t, p0); s.Code() != fwk.Wait {
		t.Fatalf("Permit(p0) = %v, want Wait", s)
	}
	if _, s := e.plugin.PostFilter(e.ctx, framework.NewCycleState(), p1, framework.NewDefaultNodeToStatus()); s.Message() != "gang team/train: this member cannot be placed, so no member binds; 1 waiting members released" {
		t.Fatalf("PostFilter(p1) = %v", s)
	}
	if s := e.fw.WaitOnPermit(e.ctx, p0); s.Code() != fwk.Unschedulable {
		t.Fatalf("p0 = %v, want rejected", s)
	}
	e.unreserve(p0)

	const refused = "gang team/train could not be placed when last tried (member p1 cannot be placed); it is retried when more room is free or a node changes"
	refusedBoth := func(when string) {
		t.Helper()
		for _, p := range []*v1.Pod{p1, p0} {
			state := framework.NewCycleState()
			if _, s := e.plugin.PreFilter(e.ctx, state, p, nil); s.Code() != fwk.UnschedulableAndUnresolvable || s.Message() != refused {
				t.Errorf("%s: PreFilter(%s) = %v, want UnschedulableAndUnresolvable %q", when, p.Name, s, refused)
			}
			if !gangstate.HeldForRoom(state) {
				t.Errorf("%s: PreFilter(%s) did not mark the cycle as waiting for room", when, p.Name)
			}
		}
	}
	refusedBoth("after the failure")
	hint := func(p *v1.Pod, fn fwk.QueueingHintFn, oldObj, newObj any) fwk.QueueingHint {
		t.Helper()
		h, err := fn(klog.Background(), p, oldObj, newObj)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	reserved := p0.DeepCopy()
	reserved.Spec.NodeName = "node-1"
	if h := hint(p1, e.plugin.isSchedulableAfterPodDeleted, reserved, nil); h != fwk.QueueSkip {
		t.Errorf("the gang's own released reservation requeues p1: %v", h)
	}
	tainted := st.MakeNode().Name("node-2").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4"}).Taints([]v1.Taint{{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule}}).Obj()
	if h := hint(p0, e.plugin.isSchedulableAfterNodeChange, nil, tainted); h != fwk.QueueSkip {
		t.Errorf("a node added requeues p0, held behind p1: %v", h)
	}
	if h := hint(p1, e.plugin.isSchedulableAfterNodeChange, nil, tainted); h != fwk.Queue {
		t.Errorf("a node added does not requeue p1, retried for the gang: %v", h)
	}
	activatedNow(e)
	e.registry.SetNode(nil, tainted)
	if diff := cmp.Diff([]string{"team/p1"}, activatedNow(e)); diff != "" {
		t.Errorf("activated when the registry saw the node (-want,+got):\n%s", diff)
	}
	refusedBoth("the registry saw the node, the snapshot not yet")

	// The snapshot shows the tainted node: p1 retries, and fails on it.
	snapshot.Snapshot = internalcache.NewSnapshot(nil, []*v1.Node{node1, tainted})
	if _, s := e.plugin.PreFilter(e.ctx, framework.NewCycleState(), p1, nil); s.Code() != fwk.Skip {
		t.Fatalf("PreFilter(p1) once the snapshot shows the node = %v, want Skip", s)
	}
	if s := e.reserveAndPermit(t, p1); s.Code() != fwk.Wait {
		t.Fatalf("Permit(p1) = %v, want Wait", s)
	}
	activatedNow(e)
	// p0's cycle: the registry sees the taint removed before p0's PreFilter, its snapshot
	// does not; p0 fails on the taint.
	untainted := tainted.DeepCopy()
	untainted.Spec.Taints = nil
	e.registry.SetNode(tainted, untainted)
	state := framework.NewCycleState()
	if _, s := e.plugin.PreFilter(e.ctx, state, p0, nil); s.Code() != fwk.Skip {
		t.Fatalf("PreFilter(p0) = %v, want Skip", s)
	}
	if _, s := e.plugin.PostFilter(e.ctx, state, p0, framework.NewDefaultNodeToStatus()); s.Code() != fwk.Unschedulable {
		t.Fatalf("PostFilter(p0) = %v", s)
	}
	if s := e.fw.WaitOnPermit(e.ctx, p1); s.Code() != fwk.Unschedulable {
		t.Fatalf("p1 = %v, want rejected", s)
	}
	e.unreserve(p1)
	if got := activatedNow(e); len(got) != 0 {
		t.Errorf("activated when p0 failed: %v, want nobody (no node change during its cycle)", got)
	}
	const refusedP0 = "gang team/train could not be placed when last tried (member p0 cannot be placed); it is retried when more room is free or a node changes"
	if _, s := e.plugin.PreFilter(e.ctx, framework.NewCycleState(), p0, nil); s.Message() != refusedP0 {
		t.Errorf("PreFilter(p0) on the same snapshot = %v, want %q", s, refusedP0)
	}
	// The scheduler's cache applies the taint's removal, and its event requeues p0 through
	// Gang's hint (Gang's refusal is p0's only one): the snapshot shows a change the registry
	// counted before the failure, and p0 retries.
	snapshot.Snapshot = internalcache.NewSnapshot(nil, []*v1.Node{node1, untainted})
	if h := hint(p0, e.plugin.isSchedulableAfterNodeChange, tainted, untainted); h != fwk.Queue {
		t.Errorf("the taint removed does not requeue p0, retried for the gang: %v", h)
	}
	if _, s := e.plugin.PreFilter(e.ctx, framework.NewCycleState(), p0, nil); s.Code() != fwk.Skip {
		t.Errorf("PreFilter(p0) once the snapshot shows the taint removed = %v, want Skip", s)
	}
	if diff := cmp.Diff([]string{"team/p1"}, activatedNow(e)); diff != "" {
		t.Errorf("activated when p0 retried (-want,+got):\n%s", diff)
	}
	if s := e.reserveAndPermit(t, p0); s.Code() != fwk.Wait {
		t.Fatalf("Permit(p0) = %v, want Wait", s)
	}
	if _, s := e.plugin.PreFilter(e.ctx, framework.NewCycleState(), p1, nil); s.Code() != fwk.Skip {
		t.Errorf("PreFilter(p1) once p0 reserved = %v, want Skip", s)
	}
}

// TestNodeChangeDuringTheFailedCycleWakesTheScout: a node change the registry saw during the
// cycle that failed may be missing from that cycle's snapshot: the scout is activated from
// its PostFilter, to look again.
func TestNodeChangeDuringTheFailedCycleWakesTheScout(t *testing.T) {
	e := newEnv(t, 60)
	e.podGroup("train", 2, nil)
	p0, p1 := member("p0", "train"), member("p1", "train")
	e.attempted(p0, p1)
	if s := e.reserveAndPermit(t, p0); s.Code() != fwk.Wait {
		t.Fatalf("Permit(p0) = %v, want Wait", s)
	}
	for _, during := range []bool{false, true} {
		state := framework.NewCycleState()
		if _, s := e.plugin.PreFilter(e.ctx, state, p1, nil); !s.IsSkip() {
			t.Fatalf("PreFilter(p1) = %v", s)
		}
		if during {
			e.registry.SetNode(nil, st.MakeNode().Name("node-9").Obj())
		}
		activatedNow(e)
		e.plugin.PostFilter(e.ctx, state, p1, framework.NewDefaultNodeToStatus())
		var want []string
		if during {
			want = []string{"team/p1"}
		}
		if diff := cmp.Diff(want, activatedNow(e)); diff != "" {
			t.Errorf("node changed during the cycle %v: activated (-want,+got):\n%s", during, diff)
		}
		if s := e.fw.WaitOnPermit(e.ctx, p0); s.Code() != fwk.Unschedulable {
			t.Fatalf("p0 = %v, want rejected", s)
		}
		e.unreserve(p0)
		if !during {
			// Another round: p1's retry (the hold ends after UnplacedMaxAge only, so the
			// failure is forgotten by hand) and p0 reserved again.
			e.gangs.ReleaseRetry(podgroup.Key{Namespace: ns, Name: "train"})
			if s := e.reserveAndPermit(t, p0); s.Code() != fwk.Wait {
				t.Fatalf("Permit(p0) = %v, want Wait", s)
			}
		}
	}
}

// TestNodeFingerprintsFollowTheSnapshot: the cached sum is the sum of the nodes'
// fingerprints; a node replaced by the scheduler's cache (a new object) is hashed again, the
// same object is not, and a deleted node is forgotten.
func TestNodeFingerprintsFollowTheSnapshot(t *testing.T) {
	node := func(name, rack string) *v1.Node { return st.MakeNode().Name(name).Label("rack", rack).Obj() }
	a, b := node("a", "r1"), node("b", "r1")
	var f nodeFingerprints
	sumOf := func(nodes ...*v1.Node) uint64 {
		var s uint64
		for _, n := range nodes {
			s += podgroup.NodeFingerprint(n)
		}
		return s
	}
	list := func(nodes ...*v1.Node) []fwk.NodeInfo {
		infos, err := internalcache.NewSnapshot(nil, nodes).NodeInfos().List()
		if err != nil {
			t.Fatal(err)
		}
		return infos
	}
	if got, want := f.sum(list(a, b)), sumOf(a, b); got != want {
		t.Errorf("sum %x, want %x", got, want)
	}
	// The same object changed in place (never done by the cache) keeps its cached print:
	// proof that it is not hashed again.
	a.Labels["rack"] = "r2"
	if got, want := f.sum(list(a, b)), sumOf(node("a", "r1"), b); got != want {
		t.Errorf("the same node object was hashed again: sum %x, want %x", got, want)
	}
	moved := node("a", "r3")
	if got, want := f.sum(list(moved, b)), sumOf(moved, b); got != want {
		t.Errorf("a replaced node object was not hashed again: sum %x, want %x", got, want)
	}
	if got, want := f.sum(list(b)), sumOf(b); got != want || len(f.byName) != 1 {
		t.Errorf("after a deletion: sum %x, want %x; %d nodes kept, want 1", got, want, len(f.byName))
	}
}

// swappableSnapshot is the framework's snapshot, replaced as the scheduler's cache would
// update it between cycles.
type swappableSnapshot struct {
	*internalcache.Snapshot
}

// TestGangThatReservedNothingIsNotHeld: an elastic gang (minMember 2 of 3) whose first member
// tried finds no room before any member reserved is not held behind it: nothing of its own
// was released to spin on, and the others may make minMember without it.
func TestGangThatReservedNothingIsNotHeld(t *testing.T) {
	e := newEnv(t, 60)
	pods := e.gangOf(2, 3)
	for _, p := range pods {
		e.gangs.MarkAttempted(p)
	}
	e.plugin.PostFilter(e.ctx, framework.NewCycleState(), pods[0], framework.NewDefaultNodeToStatus())
	for _, p := range pods[1:] {
		if _, s := e.plugin.PreFilter(e.ctx, framework.NewCycleState(), p, nil); s.Code() != fwk.Skip {
			t.Errorf("PreFilter(%s) = %v, want Skip", p.Name, s)
		}
	}
}

// TestHeldScoutCountsNoBindingMemberAsRoom: members allowed and still binding hold their
// nodes in the snapshot, though the registry has them without a node yet: a held scout's room
// does not count them free, so their binding does not retry the gang for nothing.
func TestHeldScoutCountsNoBindingMemberAsRoom(t *testing.T) {
	node := st.MakeNode().Name("node-1").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4"}).Obj()
	e := newEnvOn(t, 60, internalcache.NewSnapshot(nil, []*v1.Node{node}))
	e.podGroup("train", 2, nil)
	key := podgroup.Key{Namespace: ns, Name: "train"}
	withCPU := func(p *v1.Pod) *v1.Pod {
		p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}}}}
		return p
	}
	p0, p1, p2 := withCPU(member("p0", "train")), withCPU(member("p1", "train")), withCPU(member("p2", "train"))
	e.attempted(p0, p1, p2)
	if s := e.reserveAndPermit(t, p0); s.Code() != fwk.Wait {
		t.Fatalf("Permit(p0) = %v, want Wait", s)
	}
	if s := e.reserveAndPermit(t, p1); !s.IsSuccess() {
		t.Fatalf("Permit(p1) = %v, want allowed", s)
	}
	if got := len(e.registry.PlacedMembers(key)); got != 2 {
		t.Fatalf("the registry places %d members, want 2 (allowed, not bound)", got)
	}
	// p2 failed with the snapshot's room (what a failure with no round gives back).
	e.gangs.MarkUnplaced(key, p2.UID, "member p2 cannot be placed", time.Now(), e.plugin.freeRoom([]v1.ResourceName{v1.ResourceCPU}, nil), e.gangs.NodeChanges())
	const refused = "gang team/train could not be placed when last tried (member p2 cannot be placed); it is retried when more room is free or a node changes"
	if _, s := e.plugin.PreFilter(e.ctx, framework.NewCycleState(), p2, nil); s.Message() != refused {
		t.Errorf("PreFilter(p2) = %v, want %q (the binding members are no room)", s, refused)
	}
}
