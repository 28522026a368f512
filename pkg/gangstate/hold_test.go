package gangstate

import (
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

const gpu v1.ResourceName = "nvidia.com/gpu"

var epoch = time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)

// holdEnv is a tracker whose gangs' PodGroups were created a minute apart (big first), each
// with two members, and the ends of holds it reported.
type holdEnv struct {
	tr   *Tracker
	ends []string
}

func newHoldEnv(t *testing.T, gangs ...string) *holdEnv {
	e := &holdEnv{tr: New()}
	e.tr.OnHoldEnd(func(end HoldEnd) { e.ends = append(e.ends, end.Hold.Key.Name+":"+end.Reason) })
	for i, name := range gangs {
		e.setPodGroup(name, i, nil)
		e.tr.Registry().SetPod(nil, member(name+"-0", name))
		e.tr.Registry().SetPod(nil, member(name+"-1", name))
	}
	return e
}

func (e *holdEnv) setPodGroup(name string, minute int, annotations map[string]string) {
	e.tr.Registry().SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
		CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(minute) * time.Minute)), Annotations: annotations},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}})
}

// hold is a hold of the gang (created at minute, priority 0) needing gpus on each node.
func hold(name string, minute int, gpus int64, nodes ...string) *Hold {
	need := map[string]v1.ResourceList{}
	for _, n := range nodes {
		need[n] = v1.ResourceList{gpu: *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	key := Key{Namespace: "ns", Name: name}
	return &Hold{Key: key, Domain: "spine-" + name, Tier: 2, Need: need, Since: epoch.Add(time.Hour),
		Precedence: podgroup.GangPrecedence(key, 0, epoch.Add(time.Duration(minute)*time.Minute))}
}

func (e *holdEnv) take(t *testing.T, h *Hold, limit int) {
	t.Helper()
	if ok, why := e.tr.TakeHold(klog.Background(), h, limit); !ok {
		t.Fatalf("TakeHold(%s) refused: %s", h.Key, why)
	}
}

func (e *holdEnv) held(t *testing.T, step string, want map[string][]string) {
	t.Helper()
	got := map[string][]string{}
	for _, h := range e.tr.Holds().List() {
		got[h.Key.Name] = h.Nodes()
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: holds (-want,+got):\n%s", step, diff)
	}
}

// TestHoldKeepsLaterPodsOff is the queue-order rule: a hold keeps off the room it needs every
// pod after its gang in queue order (lower priority, or equal priority and younger, gang or
// not), and no pod before it, nor its own members; a pod may still take what the node has
// beyond the gang's need.
func TestHoldKeepsLaterPodsOff(t *testing.T) {
	e := newHoldEnv(t, "big")
	e.take(t, hold("big", 0, 8, "node-1"), -1) // PodGroup created at epoch, priority 0
	ix := e.tr.Holds()
	free := func(gpus int64) func(v1.ResourceName) int64 {
		return func(name v1.ResourceName) int64 {
			if name == gpu {
				return gpus
			}
			return 1 << 40
		}
	}
	request := func(gpus int64) v1.ResourceList {
		return v1.ResourceList{gpu: *resource.NewQuantity(gpus, resource.DecimalSI), v1.ResourceCPU: resource.MustParse("1")}
	}
	plain := func(priority int32, created time.Time) podgroup.Precedence {
		p := st.MakePod().Name("p").Priority(priority).Obj()
		p.CreationTimestamp = metav1.NewTime(created)
		return podgroup.PlainPrecedence(p)
	}
	big, other := Key{Namespace: "ns", Name: "big"}, Key{Namespace: "ns", Name: "other"}
	for _, tc := range []struct {
		name       string
		precedence podgroup.Precedence
		own        Key
		inGang     bool
		node       string
		free, req  int64
		kept       bool
	}{
		{name: "younger plain pod, equal priority", precedence: plain(0, epoch.Add(time.Second)), node: "node-1", free: 8, req: 1, kept: true},
		{name: "lower priority, older", precedence: plain(-1, epoch.Add(-time.Hour)), node: "node-1", free: 8, req: 1, kept: true},
		{name: "younger gang, equal priority", precedence: podgroup.GangPrecedence(other, 0, epoch.Add(time.Minute)), own: other, inGang: true, node: "node-1", free: 8, req: 1, kept: true},
		{name: "room beyond the gang's need", precedence: plain(0, epoch.Add(time.Second)), node: "node-1", free: 10, req: 2},
		{name: "one GPU more than that", precedence: plain(0, epoch.Add(time.Second)), node: "node-1", free: 10, req: 3, kept: true},
		{name: "a pod that takes no GPU", precedence: plain(0, epoch.Add(time.Second)), node: "node-1", free: 8, req: 0},
		{name: "a node not held", precedence: plain(0, epoch.Add(time.Second)), node: "node-2", free: 8, req: 8},
		{name: "older plain pod, equal priority", precedence: plain(0, epoch.Add(-time.Second)), node: "node-1", free: 8, req: 8},
		{name: "higher priority, younger", precedence: plain(1, epoch.Add(time.Hour)), node: "node-1", free: 8, req: 8},
		{name: "its own member", precedence: podgroup.GangPrecedence(big, 0, epoch), own: big, inGang: true, node: "node-1", free: 8, req: 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ix.After(tc.precedence, tc.own, tc.inGang).Keeps(tc.node, request(tc.req), free(tc.free))
			if (got != nil) != tc.kept {
				t.Errorf("kept off = %v, want %v", got != nil, tc.kept)
			}
		})
	}
}

// TestHoldsFollowTheQueueOrder: a gang cannot hold nodes a gang before it holds; a gang before
// takes the nodes of one after it (which is told, Displaced); the share of the cluster held
// together is bounded, except for the first gang in queue order, which displaces the latest.
func TestHoldsFollowTheQueueOrder(t *testing.T) {
	e := newHoldEnv(t, "first", "second", "third")
	e.take(t, hold("second", 1, 8, "n-3", "n-4"), -1)
	if ok, why := e.tr.TakeHold(klog.Background(), hold("third", 2, 8, "n-4", "n-5"), -1); ok ||
		why != "gang ns/second, which comes first in queue order, holds nodes of spine-third (tier 2) now" {
		t.Errorf("third over second's nodes: %v, %q", ok, why)
	}
	e.take(t, hold("third", 2, 8, "n-5", "n-6"), 4)
	e.held(t, "second and third", map[string][]string{"second": {"n-3", "n-4"}, "third": {"n-5", "n-6"}})

	// Within the limit with the one before it, not with both: third gives way.
	e.take(t, hold("first", 0, 8, "n-1", "n-2"), 4)
	e.held(t, "first under the limit", map[string][]string{"first": {"n-1", "n-2"}, "second": {"n-3", "n-4"}})
	if diff := cmp.Diff([]string{"third:Displaced"}, e.ends); diff != "" {
		t.Errorf("ends (-want,+got):\n%s", diff)
	}
	// Third is refused while the gangs before it take the share.
	if ok, why := e.tr.TakeHold(klog.Background(), hold("third", 2, 8, "n-5", "n-6"), 4); ok ||
		why != "with the holds of the gangs before it, holds would take 6 nodes, more than the 4 that gangs may hold together (maxNodesPercent)" {
		t.Errorf("third over the limit: %v, %q", ok, why)
	}
	// First moves onto second's nodes: second gives way; first's old hold ended as Moved.
	e.ends = nil
	moved := hold("first", 0, 8, "n-3", "n-7")
	moved.Domain = "spine-other"
	e.take(t, moved, 4)
	e.held(t, "first moved", map[string][]string{"first": {"n-3", "n-7"}})
	if diff := cmp.Diff([]string{"second:Displaced", "first:Moved"}, e.ends); diff != "" {
		t.Errorf("ends (-want,+got):\n%s", diff)
	}
	// The first gang in queue order holds even beyond the limit.
	e.take(t, hold("first", 0, 8, "n-1", "n-2", "n-3", "n-7", "n-8"), 4)
	if got := e.tr.HeldNodes(); got != 5 {
		t.Errorf("held nodes %d, want 5", got)
	}
}

// TestHoldEnds: a hold ends when its gang binds minMember members, when its PodGroup is
// deleted or turns holds off, after the timeout (the gang then waits before it holds again),
// and when no member of its gang is pending; each end is told once, and the gang is Holding
// exactly while it holds.
func TestHoldEnds(t *testing.T) {
	e := newHoldEnv(t, "bound", "deleted", "disabled", "late", "gone", "binding", "short")
	e.tr.SetHoldPolicy(HoldPolicy{Wait: time.Minute, Timeout: 10 * time.Minute, MaxNodesPercent: 50})
	e.take(t, hold("bound", 0, 8, "n-1"), -1)
	e.take(t, hold("deleted", 1, 8, "n-2"), -1)
	e.take(t, hold("disabled", 2, 8, "n-3"), -1)
	late := hold("late", 3, 8, "n-4")
	late.Since = time.Now().Add(-11 * time.Minute)
	e.take(t, late, -1)
	e.take(t, hold("gone", 4, 8, "n-5"), -1)
	binding := hold("binding", 5, 8, "n-6")
	binding.Since = time.Now()
	e.take(t, binding, -1)
	short := hold("short", 6, 8, "n-7")
	short.Since = time.Now()
	e.take(t, short, -1)
	for _, name := range []string{"bound", "deleted", "disabled", "late", "gone", "binding", "short"} {
		if p := e.tr.Phase(Key{Namespace: "ns", Name: name}); p != Holding {
			t.Errorf("%s: phase %s, want Holding", name, p)
		}
	}
	r := e.tr.Registry()
	for _, m := range []string{"bound-0", "bound-1"} {
		p := member(m, "bound")
		p.Spec.NodeName = "n-1"
		r.SetPod(nil, p)
	}
	r.DeletePodGroup("ns", "deleted")
	e.setPodGroup("disabled", 2, map[string]string{podgroup.HoldAfterAnnotation: "never"})
	r.DeletePod(member("gone-0", "gone"))
	r.DeletePod(member("gone-1", "gone"))
	// Reserved, not bound yet: on their way, the hold stays.
	r.Reserve(member("binding-0", "binding"), "n-6")
	r.Reserve(member("binding-1", "binding"), "n-6")
	// One member left of minMember 2: PreEnqueue holds it back, the gang cannot use the room.
	r.DeletePod(member("short-1", "short"))
	var stale []string
	for _, end := range e.tr.EndStaleHolds(time.Now()) {
		stale = append(stale, end.Hold.Key.Name+":"+end.Reason)
	}
	sort.Strings(stale)
	if diff := cmp.Diff([]string{"gone:Abandoned", "late:TimedOut", "short:Gated"}, stale); diff != "" {
		t.Errorf("stale holds (-want,+got):\n%s", diff)
	}
	sort.Strings(e.ends[3:])
	if diff := cmp.Diff([]string{"bound:Bound", "deleted:Deleted", "disabled:Disabled", "gone:Abandoned", "late:TimedOut", "short:Gated"}, e.ends); diff != "" {
		t.Errorf("ends (-want,+got):\n%s", diff)
	}
	e.held(t, "after the ends", map[string][]string{"binding": {"n-6"}})
	if e.tr.HeldNodes() != 1 {
		t.Errorf("held nodes %d, want 1 (binding's)", e.tr.HeldNodes())
	}
	if cooled := e.tr.HoldCooldown(Key{Namespace: "ns", Name: "late"}); time.Until(cooled) < 50*time.Second {
		t.Errorf("a timed-out gang may hold again at %v, want a minute from now", cooled)
	}
	for _, v := range e.tr.Violations() {
		t.Errorf("violation: %v", v)
	}
}

// TestHoldRestoredFromItsRecord: a process that begins to schedule goes on with the holds the
// PodGroups record (the whole of each node, until the gang is evaluated), once, in queue order
// and without overlap; a record is trusted no further than the scheduler wrote it; records
// that appear later, and those of gangs that run or are held back, are not restored.
func TestHoldRestoredFromItsRecord(t *testing.T) {
	now := epoch.Add(2 * time.Hour)
	since := epoch.Add(time.Hour)
	record := func(priority int32, since time.Time, nodes ...string) string {
		return (&podgroup.HoldRecord{Domain: "spine-1", Tier: 2, Nodes: nodes, Priority: priority, Since: since}).Encode()
	}
	e := newHoldEnv(t, "member")
	e.setPodGroup("big", 0, map[string]string{podgroup.HoldAnnotation: record(5, since, "n-1", "n-2")})
	// Its pending member's priority, 0, is the gang's; the record's start is in the future.
	e.setPodGroup("member", 1, map[string]string{podgroup.HoldAnnotation: record(7, now.Add(time.Hour), "n-3")})
	// A later gang claiming a node of an earlier one's record is not restored.
	e.setPodGroup("overlap", 2, map[string]string{podgroup.HoldAnnotation: record(0, since, "n-2", "n-4")})
	// Held back before scheduling (minMember 2, no member): never restored.
	e.setPodGroup("gated", 3, map[string]string{podgroup.HoldAnnotation: record(1, since, "n-5")})
	e.tr.Registry().SetPod(nil, member("gated-0", "gated"))
	if h := e.tr.Holds(); h != nil {
		t.Fatalf("holds before scheduling began: %v", h.List())
	}
	if n := e.tr.RestoreHolds(now); n != 2 {
		t.Errorf("RestoreHolds restored %d, want 2", n)
	}
	big, mem := Key{Namespace: "ns", Name: "big"}, Key{Namespace: "ns", Name: "member"}
	want := map[Key]*Hold{
		big: {Key: big, Domain: "spine-1", Tier: 2, Need: map[string]v1.ResourceList{"n-1": nil, "n-2": nil}, Since: since, Restored: true,
			Precedence: podgroup.GangPrecedence(big, 5, epoch)},
		mem: {Key: mem, Domain: "spine-1", Tier: 2, Need: map[string]v1.ResourceList{"n-3": nil}, Since: now, Restored: true,
			Precedence: podgroup.GangPrecedence(mem, 0, epoch.Add(time.Minute))},
	}
	got := map[Key]*Hold{}
	for _, h := range e.tr.Holds().List() {
		got[h.Key] = h
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(podgroup.Precedence{})); diff != "" {
		t.Errorf("restored (-want,+got):\n%s", diff)
	}
	// The whole node: even a pod that takes nothing the gang needs.
	if got := e.tr.Holds().After(podgroup.PlainPrecedence(st.MakePod().Obj()), Key{}, false).Keeps("n-1", v1.ResourceList{}, func(v1.ResourceName) int64 { return 1 << 40 }); got == nil || got.Key != big {
		t.Errorf("a restored hold keeps %v off its node, want big's", got)
	}
	// Records out of step: the two not restored, and member's, which is rewritten with the
	// priority and start it holds with.
	if diff := cmp.Diff([]string{"gated", "member", "overlap"}, keyNames(e.tr.HoldRecordsOutOfStep())); diff != "" {
		t.Errorf("records out of step (-want,+got):\n%s", diff)
	}
	// A record that appears once scheduling began is not trusted.
	e.setPodGroup("late", 4, map[string]string{podgroup.HoldAnnotation: record(1, since, "n-6")})
	if h := e.tr.Hold(Key{Namespace: "ns", Name: "late"}); h != nil {
		t.Errorf("a record written after scheduling began was restored: %v", h)
	}

	// A gang that runs does not hold.
	e2 := newHoldEnv(t)
	for _, m := range []string{"done-0", "done-1"} {
		p := member(m, "done")
		p.Spec.NodeName = "n-1"
		e2.tr.Registry().SetPod(nil, p)
	}
	e2.setPodGroup("done", 1, map[string]string{podgroup.HoldAnnotation: record(5, since, "n-1")})
	if n := e2.tr.RestoreHolds(now); n != 0 {
		t.Errorf("a running gang restored its hold: %v", e2.tr.Holds().List())
	}
}

func keyNames(keys []Key) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.Name)
	}
	sort.Strings(out)
	return out
}

// TestDeletedPodGroupIsForgottenAfterItsPlugins: the gang state of a deleted PodGroup stays
// while the plugins are told, even when its last member goes meanwhile (they release what it
// holds: a plan's nominations, a round), and is forgotten after.
func TestDeletedPodGroupIsForgottenAfterItsPlugins(t *testing.T) {
	e := newHoldEnv(t, "g")
	r := e.tr.Registry()
	key := Key{Namespace: "ns", Name: "g"}
	e.tr.Lock()
	e.tr.SetPlanLocked(key, &Plan{Domain: "leaf-1"})
	e.tr.Unlock()
	var seen *Plan
	r.OnGroupDelete(func(k Key) {
		r.DeletePod(member("g-0", "g"))
		r.DeletePod(member("g-1", "g"))
		e.tr.Lock()
		seen = e.tr.PlanLocked(k)
		e.tr.Unlock()
	})
	r.DeletePodGroup("ns", "g")
	if seen == nil || seen.Domain != "leaf-1" {
		t.Errorf("the plugins were told after the gang's state was forgotten: plan %v", seen)
	}
	if r.Len() != 0 {
		t.Errorf("the group was not forgotten after its plugins: %d groups", r.Len())
	}
}

// TestProfilesMustAgreeOnHoldArgs: the holds are the process's, so a second profile's Gang
// with other hold args is refused; the same args are not.
func TestProfilesMustAgreeOnHoldArgs(t *testing.T) {
	tr := New()
	first := HoldPolicy{Wait: time.Minute, Timeout: time.Hour, MaxNodesPercent: 50}
	if err := tr.SetHoldPolicy(first); err != nil {
		t.Fatal(err)
	}
	if err := tr.SetHoldPolicy(first); err != nil {
		t.Errorf("the same args refused: %v", err)
	}
	other := first
	other.MaxNodesPercent = 30
	err := tr.SetHoldPolicy(other)
	want := "two profiles set different hold args ({Wait:1m0s Timeout:1h0m0s MaxNodesPercent:50} and {Wait:1m0s Timeout:1h0m0s MaxNodesPercent:30}): the gang state serves every profile, so they must agree"
	if err == nil || err.Error() != want {
		t.Errorf("other args: %v, want %q", err, want)
	}
}
