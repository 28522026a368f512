package gangpreemption

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// cacheView is the framework handle as the plugin sees it: the snapshot of kube-scheduler's
// cache taken at the start of a cycle, and the activations the plugin asked for.
type cacheView struct {
	fwk.Handle
	snapshot  *internalcache.Snapshot
	activated []string
}

func (h *cacheView) SnapshotSharedLister() fwk.SharedLister { return h.snapshot }

func (h *cacheView) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	for _, p := range pods {
		h.activated = append(h.activated, p.Name)
	}
}

// newTestPlugin is the plugin's bookkeeping without informers or the wrapped DefaultPreemption.
func newTestPlugin(h fwk.Handle, registry *podgroup.Registry) *GangPreemption {
	return &GangPreemption{handle: h, registry: registry, running: map[podgroup.Key]*attempt{},
		victimOf: map[types.UID]sets.Set[podgroup.Key]{}, draining: map[podgroup.Key]*attempt{}, resumed: sets.New[podgroup.Key]()}
}

// TestMembersWaitForTheSchedulersCache: the plugin's informer handler sees both victims of
// train's preemption deleted before kube-scheduler's cache has dropped the one on node-2
// (two handlers of one informer, in no fixed order). The gang is activated, but while a
// cycle's snapshot still holds that victim each member is refused in PreFilter, keeps
// its nomination, and ends the PostFilter chain (Unresolvable) before Gang's, which would
// release the member that reserved node-1. Only the cache's deletion event of that victim
// requeues the members, and the next snapshot lets them through.
func TestMembersWaitForTheSchedulersCache(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	ctx = klog.NewContext(ctx, logger)
	key := podgroup.Key{Namespace: "ns", Name: "train"}
	registry := podgroup.New()
	registry.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train", UID: "pg"},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}})
	member := func(name string) *v1.Pod {
		p := st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedulingv1alpha1.PodGroupLabel, "train").Obj()
		registry.SetPod(nil, p)
		return p
	}
	train0, train1 := member("train-0"), member("train-1")
	victim := func(name, node string) *v1.Pod {
		return st.MakePod().Namespace("ns").Name(name).UID(name).Node(node).Obj()
	}
	low1, low2, other := victim("low-node-1", "node-1"), victim("low-node-2", "node-2"), victim("other", "node-3")
	nodes := []*v1.Node{st.MakeNode().Name("node-1").Obj(), st.MakeNode().Name("node-2").Obj(), st.MakeNode().Name("node-3").Obj()}
	h := &cacheView{}
	pl := newTestPlugin(h, registry)
	pl.mu.Lock()
	pl.startLocked(logger, key, &attempt{domain: wholeCluster, victims: []*v1.Pod{low1, low2},
		members: []*v1.Pod{train0, train1}, nodes: map[types.UID]string{train0.UID: "node-1", train1.UID: "node-2"}})
	pl.mu.Unlock()

	// While the victims terminate, a deletion elsewhere requeues nobody (the end of the
	// wait activates the gang).
	if hint, err := pl.isSchedulableAfterPodDeleted(logger, train1, other, nil); err != nil || hint != fwk.QueueSkip {
		t.Errorf("hint while waiting = %v, %v; want QueueSkip", hint, err)
	}
	// The informer handler sees both deletions; the cache has dropped only low-node-1.
	pl.victimGone(logger, low1)
	pl.victimGone(logger, low2)
	if diff := cmp.Diff([]string{"train-0", "train-1"}, sets.List(sets.New(h.activated...))); diff != "" {
		t.Errorf("activated (-want,+got):\n%s", diff)
	}
	h.snapshot = internalcache.NewSnapshot([]*v1.Pod{low2, other}, nodes)

	wantMsg := "gang ns/train: 1 of the 2 pods evicted for it in the cluster are deleted but still counted by the scheduler; the gang is retried when they are not"
	for _, tc := range []struct {
		pod  *v1.Pod
		node string
	}{{train0, "node-1"}, {train1, "node-2"}} {
		state := framework.NewCycleState()
		_, s := pl.PreFilter(ctx, state, tc.pod, nil)
		if s.Code() != fwk.UnschedulableAndUnresolvable || s.Message() != wantMsg {
			t.Fatalf("PreFilter(%s) = %v, want UnschedulableAndUnresolvable %q", tc.pod.Name, s, wantMsg)
		}
		result, s := pl.PostFilter(ctx, state, tc.pod, framework.NewDefaultNodeToStatus())
		want := "preemption: nothing more to evict; the member keeps its nominated node " + tc.node
		if s.Code() != fwk.UnschedulableAndUnresolvable || s.Message() != want {
			t.Errorf("PostFilter(%s) = %v, want UnschedulableAndUnresolvable %q", tc.pod.Name, s, want)
		}
		if result == nil || result.NominatingInfo.NominatedNodeName != tc.node {
			t.Errorf("PostFilter(%s) result %+v, want the nomination on %s", tc.pod.Name, result, tc.node)
		}
	}
	// A pod without a gang is not held here.
	plain := st.MakePod().Namespace("ns").Name("plain").UID("plain").Obj()
	if _, s := pl.PreFilter(ctx, framework.NewCycleState(), plain, nil); s.Code() != fwk.Skip {
		t.Errorf("PreFilter(plain) = %v, want Skip", s)
	}
	// Another pod's deletion, or the victim the cache already dropped, changes nothing.
	for _, deleted := range []*v1.Pod{other, low1} {
		if hint, err := pl.isSchedulableAfterPodDeleted(logger, train0, deleted, nil); err != nil || hint != fwk.QueueSkip {
			t.Errorf("hint after %s deleted = %v, %v; want QueueSkip", deleted.Name, hint, err)
		}
	}
	// The cache drops low-node-2 and then calls the hints: every waiting member is requeued.
	for _, m := range []*v1.Pod{train0, train1} {
		if hint, err := pl.isSchedulableAfterPodDeleted(logger, m, low2, nil); err != nil || hint != fwk.Queue {
			t.Errorf("hint for %s after low-node-2 deleted = %v, %v; want Queue", m.Name, hint, err)
		}
	}
	h.snapshot = internalcache.NewSnapshot([]*v1.Pod{other}, nodes)
	state := framework.NewCycleState()
	if _, s := pl.PreFilter(ctx, state, train0, nil); s.Code() != fwk.Skip {
		t.Errorf("PreFilter once the cache dropped both = %v, want Skip", s)
	}
	if readDraining(state) != nil || len(pl.draining) != 0 || pl.drainingCount.Load() != 0 {
		t.Errorf("draining left behind: state %v, draining %v, count %d", readDraining(state), pl.draining, pl.drainingCount.Load())
	}
}

// TestDrainingShrinksOnly: a member's cycle that started before a deletion event (its
// snapshot still holds the victim) must not bring the victim back once the event took it
// out, or the members already waiting would never be requeued. A new attempt for the gang
// ends the draining one.
func TestDrainingShrinksOnly(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	key := podgroup.Key{Namespace: "ns", Name: "train"}
	train0 := st.MakePod().Namespace("ns").Name("train-0").UID("train-0").Label(schedulingv1alpha1.PodGroupLabel, "train").Obj()
	v1Pod := st.MakePod().Namespace("ns").Name("low-1").UID("low-1").Node("node-1").Obj()
	v2Pod := st.MakePod().Namespace("ns").Name("low-2").UID("low-2").Node("node-2").Obj()
	nodes := []*v1.Node{st.MakeNode().Name("node-1").Obj(), st.MakeNode().Name("node-2").Obj()}
	h := &cacheView{snapshot: internalcache.NewSnapshot([]*v1.Pod{v1Pod, v2Pod}, nodes)}
	pl := newTestPlugin(h, podgroup.New())
	pl.mu.Lock()
	pl.startLocked(logger, key, &attempt{domain: wholeCluster, victims: []*v1.Pod{v1Pod, v2Pod}, nodes: map[types.UID]string{}})
	pl.mu.Unlock()
	pl.victimGone(logger, v1Pod)
	pl.victimGone(logger, v2Pod)

	// The cache's event for low-1 arrives while train-0's cycle runs on an older snapshot.
	if hint, _ := pl.isSchedulableAfterPodDeleted(logger, train0, v1Pod, nil); hint != fwk.QueueSkip {
		t.Errorf("hint after low-1 = %v, want QueueSkip (low-2 is still cached)", hint)
	}
	if _, s := pl.PreFilter(ctx, framework.NewCycleState(), train0, nil); s.Code() != fwk.UnschedulableAndUnresolvable {
		t.Fatalf("PreFilter on the old snapshot = %v, want UnschedulableAndUnresolvable", s)
	}
	if got := sets.List(pl.draining[key].cached); !cmp.Equal([]types.UID{"low-2"}, got) {
		t.Errorf("cached %v, want only low-2", got)
	}
	if hint, _ := pl.isSchedulableAfterPodDeleted(logger, train0, v2Pod, nil); hint != fwk.Queue {
		t.Errorf("hint after low-2 = %v, want Queue", hint)
	}

	pl.mu.Lock()
	pl.startLocked(logger, key, &attempt{victims: []*v1.Pod{v2Pod}})
	pl.mu.Unlock()
	if len(pl.draining) != 0 || pl.drainingCount.Load() != 0 {
		t.Errorf("a new attempt left the draining one: %v, count %d", pl.draining, pl.drainingCount.Load())
	}
	pl.mu.Lock()
	pl.endLocked(key, pl.running[key])
	pl.mu.Unlock()
}
