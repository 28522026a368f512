package gangpreemption

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	_ "github.com/hypernode-dev/hypernode-scheduler/apis/config/scheme"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/eventlog"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podstatus"
)

// cacheView is the framework handle as the plugin sees it: the snapshot of kube-scheduler's
// cache taken at the start of a cycle, and the activations the plugin asked for.
type cacheView struct {
	fwk.Handle
	snapshot *internalcache.Snapshot
	// parallelism of Parallelizer; 0 is 1.
	parallelism int

	mu        sync.Mutex
	activated []string
}

func (h *cacheView) SnapshotSharedLister() fwk.SharedLister { return h.snapshot }

// SharedDRAManager: no DRA in these tests, so no victim's claim holds devices.
func (h *cacheView) SharedDRAManager() fwk.SharedDRAManager { return nil }

// DeleteNominatedPodIfExists: the plugin withdraws nominations of an abandoned attempt.
func (h *cacheView) DeleteNominatedPodIfExists(*v1.Pod) {}

func (h *cacheView) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range pods {
		h.activated = append(h.activated, p.Name)
	}
}

// takeActivated returns the pods activated since the last call, sorted.
func (h *cacheView) takeActivated() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	got := h.activated
	h.activated = nil
	slices.Sort(got)
	return got
}

// newTestPlugin is the plugin's bookkeeping without informers or the wrapped DefaultPreemption;
// its nomination writer records wishes and never writes.
func newTestPlugin(h fwk.Handle, gangs *gangstate.Tracker) *GangPreemption {
	pl := &GangPreemption{handle: h, registry: gangs.Registry(), gangs: gangs, events: eventlog.New(&events.FakeRecorder{}, eventAction), ctx: context.Background(),
		refused: map[types.UID]time.Time{}}
	pl.nominations = podstatus.NewWriter("test", nil, nil, pl.nominationWish)
	pl.scheduling.Store(true) // no hold records to write or restore
	return pl
}

// drainEnv: gang ns/train (train-0, train-1) preempted low-node-1 and low-node-2 and
// nominated train-0 on node-1, train-1 on node-2; "other" runs on node-3. The attempt runs.
type drainEnv struct {
	pl                *GangPreemption
	h                 *cacheView
	key               podgroup.Key
	train0, train1    *v1.Pod
	low1, low2, other *v1.Pod
	nodes             []*v1.Node
	logger            klog.Logger
	ctx               context.Context
	registry          *podgroup.Registry
	gangs             *gangstate.Tracker
}

func newDrainEnv(t *testing.T) *drainEnv {
	logger, ctx := ktesting.NewTestContext(t)
	tracker := gangstate.New()
	e := &drainEnv{key: podgroup.Key{Namespace: "ns", Name: "train"}, registry: tracker.Registry(), gangs: tracker, h: &cacheView{},
		logger: logger, ctx: klog.NewContext(ctx, logger)}
	e.registry.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train", UID: "pg"},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}})
	member := func(name string) *v1.Pod {
		p := st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedulingv1alpha1.PodGroupLabel, "train").Obj()
		e.registry.SetPod(nil, p)
		return p
	}
	e.train0, e.train1 = member("train-0"), member("train-1")
	victim := func(name, node string) *v1.Pod {
		return st.MakePod().Namespace("ns").Name(name).UID(name).Node(node).Obj()
	}
	e.low1, e.low2, e.other = victim("low-node-1", "node-1"), victim("low-node-2", "node-2"), victim("other", "node-3")
	e.nodes = []*v1.Node{st.MakeNode().Name("node-1").Obj(), st.MakeNode().Name("node-2").Obj(), st.MakeNode().Name("node-3").Obj()}
	e.h.snapshot = internalcache.NewSnapshot([]*v1.Pod{e.low1, e.low2, e.other}, e.nodes)
	e.pl = newTestPlugin(e.h, e.gangs)
	e.pl.gangs.Lock()
	e.pl.startLocked(logger, e.key, &gangstate.Preemption{Domain: wholeCluster, Victims: []*v1.Pod{e.low1, e.low2},
		Members: []*v1.Pod{e.train0, e.train1}, Nodes: map[types.UID]string{e.train0.UID: "node-1", e.train1.UID: "node-2"}})
	e.pl.gangs.Unlock()
	t.Cleanup(func() {
		e.pl.gangs.Lock()
		defer e.pl.gangs.Unlock()
		if a := e.pl.gangs.WaitingPreemptionLocked(e.key); a != nil {
			e.pl.gangs.EndPreemptionLocked(e.key, a)
		}
		e.pl.gangs.StopDrainingLocked(e.key)
	})
	return e
}

// cache sets the snapshot the next cycles see: the pods kube-scheduler's cache still holds.
func (e *drainEnv) cache(pods ...*v1.Pod) {
	e.h.snapshot = internalcache.NewSnapshot(append(pods, e.other), e.nodes)
}

// hint is the AssignedPod/Delete hint for member after deleted left the cache.
func (e *drainEnv) hint(t *testing.T, member, deleted *v1.Pod, want fwk.QueueingHint) {
	t.Helper()
	if got, err := e.pl.isSchedulableAfterPodDeleted(e.logger, member, deleted, nil); err != nil || got != want {
		t.Errorf("hint for %s after %s deleted = %v, %v; want %v", member.Name, deleted.Name, got, err, want)
	}
}

// refused runs PreFilter and PostFilter for member and checks it waits for the cache with
// held victims still counted, keeping its nomination, and ending the PostFilter chain.
func (e *drainEnv) refused(t *testing.T, member *v1.Pod, held int, node string) {
	t.Helper()
	state := framework.NewCycleState()
	_, s := e.pl.PreFilter(e.ctx, state, member, nil)
	want := fmt.Sprintf("gang ns/train: %d of the 2 pods evicted for it in the cluster are deleted but still counted by the scheduler; the gang is retried when they are not", held)
	if s.Code() != fwk.UnschedulableAndUnresolvable || s.Message() != want {
		t.Fatalf("PreFilter(%s) = %v, want UnschedulableAndUnresolvable %q", member.Name, s, want)
	}
	e.postFilterKeeps(t, state, member, node)
}

// postFilterKeeps checks that PostFilter keeps member's nomination on node ("": none) and
// ends the chain (Unresolvable) before Gang's, which would release the waiting members; the
// message is the drain's unless given.
func (e *drainEnv) postFilterKeeps(t *testing.T, state fwk.CycleState, member *v1.Pod, node string, msg ...string) {
	t.Helper()
	result, s := e.pl.PostFilter(e.ctx, state, member, framework.NewDefaultNodeToStatus())
	want := "preemption: nothing more to evict"
	if node != "" {
		want += "; the member keeps its nominated node " + node
	}
	if len(msg) > 0 {
		want = msg[0]
	}
	if s.Code() != fwk.UnschedulableAndUnresolvable || s.Message() != want {
		t.Errorf("PostFilter(%s) = %v, want UnschedulableAndUnresolvable %q", member.Name, s, want)
	}
	if result == nil || result.NominatingInfo == nil || result.NominatingInfo.NominatingMode != fwk.ModeOverride || result.NominatingInfo.NominatedNodeName != node {
		t.Errorf("PostFilter(%s) result %+v, want the nomination set to %q", member.Name, result, node)
	}
}

// passes runs PreFilter for member and checks nothing holds it.
func (e *drainEnv) passes(t *testing.T, member *v1.Pod) {
	t.Helper()
	state := framework.NewCycleState()
	if _, s := e.pl.PreFilter(e.ctx, state, member, nil); s.Code() != fwk.Skip {
		t.Errorf("PreFilter(%s) = %v, want Skip", member.Name, s)
	}
	if readHeld(state) != nil {
		t.Errorf("PreFilter(%s) left a draining state", member.Name)
	}
}

func (e *drainEnv) drained(t *testing.T) {
	t.Helper()
	waiting, draining, _ := e.gangs.PreemptionsLeft()
	if len(draining) != 0 || e.gangs.PreemptionsUnderWay() != (len(waiting) > 0) {
		t.Errorf("draining left behind: %v, under way %v", draining, e.gangs.PreemptionsUnderWay())
	}
}

// TestMembersWaitForTheSchedulersCache: the plugin's informer handler sees both victims of
// train's preemption deleted before kube-scheduler's cache has dropped the one on node-2
// (two handlers of one informer, in no fixed order). The gang is activated, but while a
// cycle's snapshot still holds that victim each member is refused in PreFilter, keeps its
// nomination, and ends the PostFilter chain before Gang's, which would release the member
// that reserved node-1. Only the cache's deletion event of that victim requeues the
// members, and only a snapshot without it lets them through: a cycle that started before
// the event is refused once more (its in-flight replay of the event requeues it).
func TestMembersWaitForTheSchedulersCache(t *testing.T) {
	e := newDrainEnv(t)
	// While the victims terminate, a deletion requeues nobody: the end of the wait
	// activates the gang.
	e.hint(t, e.train1, e.other, fwk.QueueSkip)
	e.hint(t, e.train1, e.low1, fwk.QueueSkip)

	e.pl.victimGone(e.logger, e.low1)
	e.pl.victimGone(e.logger, e.low2)
	if diff := cmp.Diff([]string{"train-0", "train-1"}, e.h.takeActivated()); diff != "" {
		t.Errorf("activated (-want,+got):\n%s", diff)
	}
	e.cache(e.low2)
	e.refused(t, e.train0, 1, "node-1")
	e.refused(t, e.train1, 1, "node-2")

	// A pod without a gang is neither held nor requeued here.
	plain := st.MakePod().Namespace("ns").Name("plain").UID("plain").Obj()
	e.passes(t, plain)
	e.hint(t, plain, e.low2, fwk.QueueSkip)
	// Another pod's deletion, or the victim the cache already dropped, requeues nobody.
	e.hint(t, e.train0, e.other, fwk.QueueSkip)
	e.hint(t, e.train0, e.low1, fwk.QueueSkip)
	// The cache drops low-node-2 and calls the hints: every waiting member is requeued.
	e.hint(t, e.train0, e.low2, fwk.Queue)
	e.hint(t, e.train1, e.low2, fwk.Queue)
	// A cycle whose snapshot was taken before that event still sees low-node-2.
	e.refused(t, e.train1, 1, "node-2")
	e.hint(t, e.train1, e.low2, fwk.Queue)

	e.cache()
	e.passes(t, e.train0)
	e.drained(t)
	e.passes(t, e.train1)
}

// TestPostFilterWhileVictimsTerminate: a member in a cycle while its gang's victims
// terminate keeps its nomination and ends the PostFilter chain before Gang's: the members
// waiting in Permit keep the free nodes they reserved (the preemption counted them).
func TestPostFilterWhileVictimsTerminate(t *testing.T) {
	e := newDrainEnv(t)
	const waits = "preemption: gang ns/train waits for 2 of the 2 pods evicted for it in the cluster to terminate"
	state := framework.NewCycleState()
	e.waits(t, state, e.train0, 2)
	e.postFilterKeeps(t, state, e.train0, "node-1", waits)
	e.pl.victimGone(e.logger, e.low1)
	state = framework.NewCycleState()
	e.waits(t, state, e.train1, 1)
	e.postFilterKeeps(t, state, e.train1, "node-2", "preemption: gang ns/train waits for 1 of the 2 pods evicted for it in the cluster to terminate")
	// Another gang's member and a plain pod are not held.
	other := st.MakePod().Namespace("ns").Name("other-0").UID("other-0").Label(schedulingv1alpha1.PodGroupLabel, "other").Obj()
	e.passes(t, other)
	e.passes(t, st.MakePod().Namespace("ns").Name("plain").UID("plain").Obj())
}

// waits runs PreFilter for member and checks it is refused while n of its gang's victims
// terminate: a member queued before the preemption began would otherwise plan again for each
// victim gone.
func (e *drainEnv) waits(t *testing.T, state fwk.CycleState, member *v1.Pod, n int) {
	t.Helper()
	_, s := e.pl.PreFilter(e.ctx, state, member, nil)
	want := fmt.Sprintf("gang ns/train waits for %d of the 2 pods evicted for it in the cluster to terminate", n)
	if s.Code() != fwk.UnschedulableAndUnresolvable || s.Message() != want {
		t.Errorf("PreFilter(%s) = %v, want UnschedulableAndUnresolvable %q", member.Name, s, want)
	}
}

// TestPreemptionEndsBetweenPreFilterAndPostFilter: PreFilter refused train-0 while its
// gang's victims terminated, so the cycle state lacks the PreFilter plugins after it. If the
// attempt ends before PostFilter (an eviction failed, its deadline), PostFilter decides
// nothing on that state: it clears the member's nomination and ends the chain; if the last
// victim went meanwhile (draining), the member keeps its node.
func TestPreemptionEndsBetweenPreFilterAndPostFilter(t *testing.T) {
	t.Run("attempt ended", func(t *testing.T) {
		e := newDrainEnv(t)
		state := framework.NewCycleState()
		e.waits(t, state, e.train0, 2)
		expireRunning(e)
		result, s := e.pl.PostFilter(e.ctx, state, e.train0, framework.NewDefaultNodeToStatus())
		want := "preemption: gang ns/train: its preemption ended during this cycle; the gang is retried"
		if s.Code() != fwk.UnschedulableAndUnresolvable || s.Message() != want {
			t.Errorf("PostFilter = %v, want UnschedulableAndUnresolvable %q", s, want)
		}
		if diff := cmp.Diff(clearNomination(), result); diff != "" {
			t.Errorf("PostFilter result (-want,+got):\n%s", diff)
		}
	})
	t.Run("victims gone", func(t *testing.T) {
		e := newDrainEnv(t)
		state := framework.NewCycleState()
		e.waits(t, state, e.train0, 2)
		e.pl.victimGone(e.logger, e.low1)
		e.pl.victimGone(e.logger, e.low2)
		e.postFilterKeeps(t, state, e.train0, "node-1")
	})
}

// TestDrainBeginsDuringACycle: train-1 was refused in PreFilter while the victims still
// terminated; the drain begins before its PostFilter. Its PostFilter must not preempt again
// or let Gang release the others: it keeps its nomination; the activation that began the
// drain requeues it.
func TestDrainBeginsDuringACycle(t *testing.T) {
	e := newDrainEnv(t)
	state := framework.NewCycleState()
	e.waits(t, state, e.train1, 2)
	e.pl.victimGone(e.logger, e.low1)
	e.pl.victimGone(e.logger, e.low2)
	e.postFilterKeeps(t, state, e.train1, "node-2")
	// A member the attempt does not place holds nothing.
	extra := st.MakePod().Namespace("ns").Name("train-2").UID("train-2").Label(schedulingv1alpha1.PodGroupLabel, "train").Obj()
	e.postFilterKeeps(t, framework.NewCycleState(), extra, "")
}

// TestDrainingShrinksOnly: a member's cycle that started before a deletion event (its
// snapshot still holds the victim) must not bring the victim back into the set the hint
// requeues by once the event took it out, or the members already waiting would never be
// requeued. A new attempt for the gang ends the draining one.
func TestDrainingShrinksOnly(t *testing.T) {
	e := newDrainEnv(t)
	e.pl.victimGone(e.logger, e.low1)
	e.pl.victimGone(e.logger, e.low2)
	// The cache's event for low-node-1 arrives while train-0's cycle runs on an older snapshot.
	e.hint(t, e.train1, e.low1, fwk.QueueSkip)
	e.refused(t, e.train0, 2, "node-1")
	e.gangs.Lock()
	a, _ := e.gangs.PreemptionLocked(e.key)
	got := sets.List(a.Cached)
	e.gangs.Unlock()
	if !cmp.Equal([]types.UID{"low-node-2"}, got) {
		t.Errorf("still counted %v, want only low-node-2", got)
	}
	e.hint(t, e.train1, e.low2, fwk.Queue)

	e.pl.gangs.Lock()
	e.pl.startLocked(e.logger, e.key, &gangstate.Preemption{Victims: []*v1.Pod{e.other}})
	e.pl.gangs.Unlock()
	e.drained(t)
}

// TestDrainEnds: a deleted PodGroup ends the drain and activates the members (no event of
// this plugin would requeue one it refused); so does the drain's time limit.
func TestDrainEnds(t *testing.T) {
	t.Run("PodGroup deleted", func(t *testing.T) {
		e := newDrainEnv(t)
		e.pl.victimGone(e.logger, e.low1)
		e.pl.victimGone(e.logger, e.low2)
		e.h.takeActivated()
		e.pl.forget(e.key)
		e.drained(t)
		if diff := cmp.Diff([]string{"train-0", "train-1"}, e.h.takeActivated()); diff != "" {
			t.Errorf("activated (-want,+got):\n%s", diff)
		}
	})
	t.Run("time limit", func(t *testing.T) {
		old := drainSlack
		drainSlack = 0
		t.Cleanup(func() { drainSlack = old })
		e := newDrainEnv(t)
		// The end of the wait activates the gang, and the drain's time limit (already past)
		// once more, in either order.
		e.pl.victimGone(e.logger, e.low1)
		e.pl.victimGone(e.logger, e.low2)
		var got []string
		err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			got = append(got, e.h.takeActivated()...)
			return len(got) >= 4, nil
		})
		slices.Sort(got)
		if diff := cmp.Diff([]string{"train-0", "train-0", "train-1", "train-1"}, got); err != nil || diff != "" {
			t.Fatalf("activated by the end of the wait and the drain's time limit (-want,+got):\n%s(%v)", diff, err)
		}
		e.drained(t)
	})
}

// TestSignPod: the plugin signs nothing, so it leaves kube-scheduler's batching to the
// other plugins' signatures.
func TestSignPod(t *testing.T) {
	e := newDrainEnv(t)
	for _, pod := range []*v1.Pod{e.train0, st.MakePod().Namespace("ns").Name("plain").Obj()} {
		fragments, s := e.pl.SignPod(context.Background(), pod)
		if fragments != nil || s != nil {
			t.Errorf("SignPod(%s) = %v, %v; want nothing", pod.Name, fragments, s)
		}
	}
}

// TestProfilePreFilterOrder: GangPreemption's PreFilter runs after Gang's (which records the
// member's attempt) and before NetworkTopologyAware's (which plans on the snapshot).
func TestProfilePreFilterOrder(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	logger, _ := ktesting.NewTestContext(t)
	cfg, err := options.LoadConfigFromFile(logger, filepath.Join(filepath.Dir(file), "..", "..", "..", "manifests", "scheduler", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range cfg.Profiles[0].Plugins.PreFilter.Enabled {
		got = append(got, p.Name)
	}
	if diff := cmp.Diff([]string{"Gang", Name}, got); diff != "" {
		t.Errorf("preFilter.enabled (-want,+got):\n%s", diff)
	}
}

// BenchmarkPreFilter: what GangPreemption's PreFilter costs every pod: nothing preempts (two
// atomic loads), and while another gang drains (a lock and two map lookups for a gang member).
func BenchmarkPreFilter(b *testing.B) {
	logger := klog.Background()
	ctx := klog.NewContext(context.Background(), logger)
	plain := st.MakePod().Namespace("ns").Name("plain").UID("plain").Obj()
	member := st.MakePod().Namespace("ns").Name("m").UID("m").Label(schedulingv1alpha1.PodGroupLabel, "job").Obj()
	pl := newTestPlugin(&cacheView{}, gangstate.New())
	state := framework.NewCycleState()
	run := func(b *testing.B, pod *v1.Pod) {
		for b.Loop() {
			if _, s := pl.PreFilter(ctx, state, pod, nil); s.Code() != fwk.Skip {
				b.Fatal(s)
			}
		}
	}
	b.Run("nothing-drains/plain-pod", func(b *testing.B) { run(b, plain) })
	b.Run("nothing-drains/gang-member", func(b *testing.B) { run(b, member) })
	// Another gang, whose preemption's one victim is gone: it drains.
	pl.registry.SetPod(nil, st.MakePod().Namespace("ns").Name("o").UID("o").Label(schedulingv1alpha1.PodGroupLabel, "other").Obj())
	victim := st.MakePod().Namespace("ns").Name("v").UID("v").Node("node-1").Obj()
	pl.gangs.Lock()
	other := podgroup.Key{Namespace: "ns", Name: "other"}
	draining := &gangstate.Preemption{Victims: []*v1.Pod{victim}}
	pl.startLocked(logger, other, draining)
	pl.gangs.VictimGoneLocked(victim.UID)
	pl.armDrainLocked(logger, other, draining)
	pl.gangs.Unlock()
	b.Cleanup(func() {
		pl.gangs.Lock()
		pl.gangs.StopDrainingLocked(podgroup.Key{Namespace: "ns", Name: "other"})
		pl.gangs.Unlock()
	})
	b.Run("other-gang-drains/plain-pod", func(b *testing.B) { run(b, plain) })
	b.Run("other-gang-drains/gang-member", func(b *testing.B) { run(b, member) })
}

// TestHoldsNomination: the nominations a running preemption holds (victims terminating, or
// still counted by the scheduler's cache) are the ones NetworkTopologyAware's writes leave
// alone; none once the drain is over, none for a member the attempt does not place.
func TestHoldsNomination(t *testing.T) {
	e := newDrainEnv(t)
	extra := st.MakePod().Namespace("ns").Name("train-2").UID("train-2").Label(schedulingv1alpha1.PodGroupLabel, "train").Obj()
	plain := st.MakePod().Namespace("ns").Name("plain").UID("plain").Obj()
	check := func(stage string, want map[string]string) {
		t.Helper()
		got := map[string]string{}
		for _, pod := range []*v1.Pod{e.train0, e.train1, extra, plain} {
			if node, held := e.gangs.NominationHeld(pod); held {
				got[pod.Name] = node
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: held nominations (-want,+got):\n%s", stage, diff)
		}
	}
	both := map[string]string{"train-0": "node-1", "train-1": "node-2"}
	check("victims terminating", both)
	e.pl.victimGone(e.logger, e.low1)
	e.pl.victimGone(e.logger, e.low2)
	check("draining", both)
	e.cache()
	e.passes(t, e.train0)
	check("drained", map[string]string{})
}

// TestDrainWaitsForAVictimWaitingInPermit: train's victim is batch-0, a member of another gang
// reserved on node-1 and waiting in Permit, whose registry pod has no spec.nodeName. Rejected
// in memory, it leaves at once, but the scheduler's snapshot still holds its assumed copy on
// node-1: the drain must refuse train's member until it does not.
func TestDrainWaitsForAVictimWaitingInPermit(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	gangs := gangstate.New()
	registry := gangs.Registry()
	for _, name := range []string{"train", "batch"} {
		registry.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)},
			Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 1}})
	}
	train0 := st.MakePod().Namespace("ns").Name("train-0").UID("train-0").Label(schedulingv1alpha1.PodGroupLabel, "train").Obj()
	batch0 := st.MakePod().Namespace("ns").Name("batch-0").UID("batch-0").Label(schedulingv1alpha1.PodGroupLabel, "batch").Obj()
	registry.SetPod(nil, train0)
	registry.SetPod(nil, batch0)
	assumed := batch0.DeepCopy()
	assumed.Spec.NodeName = "node-1"
	registry.Reserve(assumed, "node-1")

	var unitPods []placed
	for _, m := range registry.PlacedMembers(podgroup.Key{Namespace: "ns", Name: "batch"}) {
		unitPods = append(unitPods, placed{pod: m.Pod, node: m.Node})
	}
	victims, names := victimPods(&choice{victims: []*unit{{key: "gang ns/batch", pods: unitPods}}})
	var onNodes []string
	for _, v := range victims {
		onNodes = append(onNodes, v.Name+" on "+v.Spec.NodeName)
	}
	if !cmp.Equal(onNodes, []string{"batch-0 on node-1"}) || !cmp.Equal(names, []string{"ns/batch-0"}) {
		t.Fatalf("victims %q (%v), want batch-0 on node-1", onNodes, names)
	}
	node := st.MakeNode().Name("node-1").Obj()
	h := &cacheView{snapshot: internalcache.NewSnapshot([]*v1.Pod{assumed}, []*v1.Node{node})}
	pl := newTestPlugin(h, gangs)
	key := podgroup.Key{Namespace: "ns", Name: "train"}
	pl.gangs.Lock()
	pl.startLocked(logger, key, &gangstate.Preemption{Domain: wholeCluster, Victims: victims,
		Members: []*v1.Pod{train0}, Nodes: map[types.UID]string{train0.UID: "node-1"}})
	pl.gangs.Unlock()
	pl.victimGone(logger, victims[0])
	const want = "gang ns/train: 1 of the 1 pods evicted for it in the cluster are deleted but still counted by the scheduler; the gang is retried when they are not"
	if _, s := pl.PreFilter(ctx, framework.NewCycleState(), train0, nil); s.Code() != fwk.UnschedulableAndUnresolvable || s.Message() != want {
		t.Errorf("PreFilter(train-0) while the snapshot holds batch-0 = %v, want %q", s, want)
	}
	h.snapshot = internalcache.NewSnapshot(nil, []*v1.Node{node})
	if _, s := pl.PreFilter(ctx, framework.NewCycleState(), train0, nil); s.Code() != fwk.Skip {
		t.Errorf("PreFilter(train-0) once the snapshot dropped batch-0 = %v, want Skip", s)
	}
}
