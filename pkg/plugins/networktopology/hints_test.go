package networktopology

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/google/go-cmp/cmp"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// newTestPlugin is the plugin without a framework, over seed 000's rack/tor/spine tree, with
// a hard tier-1 gang "hard" (members hard-0..hard-2) and a gang "plain" without constraint.
func newTestPlugin(t *testing.T) (*NetworkTopologyAware, *podgroup.Registry) {
	t.Helper()
	gangs := gangstate.New()
	registry := gangs.Registry()
	registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hard", Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: `{"highestTierAllowed":1}`}},
	})
	registry.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain"}})
	for i := range 3 {
		registry.SetPod(nil, member("hard", i))
	}
	cache := hypernode.NewCache(klog.Background(), nil)
	tree := seedTree()
	for _, n := range append(tree.Nodes(hypernode.VirtualRootName), "outside") {
		cache.SetNode(st.MakeNode().Name(n).Obj())
	}
	for _, hn := range seedHyperNodes() {
		cache.SetHyperNode(hn)
	}
	p := &NetworkTopologyAware{registry: registry, gangs: gangs, cache: cache,
		args:      config.NetworkTopologyAwareArgs{NormalPod: config.NormalPodArgs{Enable: true, Fading: 0.8}},
		resources: []v1.ResourceName{v1.ResourceCPU}, weights: []float64{1},
		usageSums: newUsageCache([]v1.ResourceName{v1.ResourceCPU}, 0.8)}
	return p, registry
}

func member(group string, i int) *v1.Pod {
	name := group + "-" + string(rune('0'+i))
	return st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedulingv1alpha1.PodGroupLabel, group).Obj()
}

func gangPod(group string) *v1.Pod { return member(group, 0) }

// TestSignPod: constrained members are never signed; with the normal-pod score on, neither
// are other pods (their score depends on other nodes' usage); with it off they sign nothing.
func TestSignPod(t *testing.T) {
	p, _ := newTestPlugin(t)
	off, _ := newTestPlugin(t)
	off.usageSums = nil
	for _, tc := range []struct {
		name   string
		plugin *NetworkTopologyAware
		pod    *v1.Pod
		want   *fwk.Status
	}{
		{"constrained member", p, gangPod("hard"), fwk.NewStatus(fwk.Unschedulable, "a topology-constrained gang member is planned individually")},
		{"member of a plain gang", p, gangPod("plain"), fwk.NewStatus(fwk.Unschedulable, "the normal-pod score depends on the usage of every node in the pod's HyperNodes")},
		{"pod without a gang", p, st.MakePod().Namespace("ns").Name("solo").Obj(), fwk.NewStatus(fwk.Unschedulable, "the normal-pod score depends on the usage of every node in the pod's HyperNodes")},
		{"normal-pod score off: constrained member", off, gangPod("hard"), fwk.NewStatus(fwk.Unschedulable, "a topology-constrained gang member is planned individually")},
		{"normal-pod score off: pod without a gang", off, st.MakePod().Namespace("ns").Name("solo").Obj(), nil},
	} {
		fragments, status := tc.plugin.SignPod(context.Background(), tc.pod)
		if diff := cmp.Diff(tc.want, status); diff != "" {
			t.Errorf("%s: status (-want,+got):\n%s", tc.name, diff)
		}
		if len(fragments) != 0 {
			t.Errorf("%s: fragments %v, want none", tc.name, fragments)
		}
	}
}

// nominatedOn is pod pending with a nomination for node.
func nominatedOn(pod *v1.Pod, node string) *v1.Pod {
	pod = pod.DeepCopy()
	pod.Status.NominatedNodeName = node
	return pod
}

// withAnnotation gives the gang "hard" another constraint annotation.
func withAnnotation(annotation string) func(*NetworkTopologyAware, *podgroup.Registry) {
	return func(_ *NetworkTopologyAware, registry *podgroup.Registry) {
		registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hard", Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: annotation}},
		})
	}
}

// withPlan gives the gang "hard" a plan, made just now on the current tree and PodGroup.
func withPlan(plan *gangstate.Plan) func(*NetworkTopologyAware, *podgroup.Registry) {
	return func(p *NetworkTopologyAware, registry *podgroup.Registry) {
		key := podgroup.Key{Namespace: "ns", Name: "hard"}
		plan.Made, plan.Generation, plan.Revision = time.Now(), p.cache.Snapshot().Generation(), registry.Info(key).Revision
		p.setPlan(key, plan)
	}
}

// TestHints: each event requeues a constrained gang only when it can change the gang's
// answer, and then one member per gang until that member's attempt ran.
func TestHints(t *testing.T) {
	hyperNode := func(tier int64, status string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "rack-0"},
			"spec":     map[string]any{"tier": tier},
			"status":   map[string]any{"nodeCount": status},
		}}
	}
	podGroup := func(name, annotation, phase string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"namespace": "ns", "name": name},
			"spec":     map[string]any{"minMember": int64(3)},
			"status":   map[string]any{"phase": phase},
		}}
		u.SetAnnotations(map[string]string{podgroup.NetworkTopologyAnnotation: annotation})
		return u
	}
	onNode := func(pod *v1.Pod, node string) *v1.Pod {
		pod = pod.DeepCopy()
		pod.Spec.NodeName = node
		return pod
	}
	other := st.MakePod().Namespace("ns").Name("web").Obj()
	podDeleted := func(p *NetworkTopologyAware) fwk.QueueingHintFn { return p.isSchedulableAfterPodDeleted }
	nodeChange := func(p *NetworkTopologyAware) fwk.QueueingHintFn { return p.isSchedulableAfterNodeChange }
	hyperNodeChange := func(p *NetworkTopologyAware) fwk.QueueingHintFn { return p.isSchedulableAfterHyperNodeChange }
	podGroupChange := func(p *NetworkTopologyAware) fwk.QueueingHintFn { return p.isSchedulableAfterPodGroupChange }
	tests := []struct {
		name string
		// possible, when set, records a failure of gang "hard" that only these HyperNodes could fix.
		possible []string
		// backoff: the failure's back-off still runs.
		backoff bool
		// setup changes the gang "hard" (its PodGroup, its plan) before the hint runs.
		setup    func(p *NetworkTopologyAware, registry *podgroup.Registry)
		hint     func(p *NetworkTopologyAware) fwk.QueueingHintFn
		old, new any
		want     fwk.QueueingHint
	}{
		{name: "node added", hint: nodeChange,
			new: st.MakeNode().Name("node-9").Obj(), want: fwk.Queue},
		{name: "pod deleted where the gang could fit", possible: []string{"rack-0"},
			hint: podDeleted,
			old:  onNode(other, "node-1"), want: fwk.Queue},
		{name: "pod deleted where the gang could fit, during its back-off", possible: []string{"rack-0"}, backoff: true,
			hint: podDeleted,
			old:  onNode(other, "node-1"), want: fwk.QueueSkip},
		{name: "pod deleted where the gang can never fit", possible: []string{"rack-0"},
			hint: podDeleted,
			old:  onNode(other, "node-5"), want: fwk.QueueSkip},
		{name: "a pending pod's nomination dropped where the gang could fit", possible: []string{"rack-0"},
			hint: podDeleted,
			old:  nominatedOn(other, "node-1"), want: fwk.Queue},
		{name: "a pending pod's nomination dropped where the gang can never fit", possible: []string{"rack-0"},
			hint: podDeleted,
			old:  nominatedOn(other, "node-5"), want: fwk.QueueSkip},
		{name: "pod deleted, no failure remembered",
			hint: podDeleted,
			old:  onNode(other, "node-5"), want: fwk.Queue},
		{name: "pod deleted, the constraint names a tier the tree lacks", setup: withAnnotation(`{"highestTierName":"pod"}`),
			hint: podDeleted,
			old:  onNode(other, "node-5"), want: fwk.QueueSkip},
		{name: "node added, the constraint annotation is invalid", setup: withAnnotation(`{"highestTierAllowed":`),
			hint: nodeChange,
			new:  st.MakeNode().Name("node-9").Obj(), want: fwk.QueueSkip},
		{name: "pod deleted, the member is left out while planned members are pending", setup: withPlan(&gangstate.Plan{
			Deferred: sets.New("hard-0"), Promised: map[string]int{"rack-0": 1}}),
			hint: podDeleted,
			old:  onNode(other, "node-1"), want: fwk.QueueSkip},
		{name: "pod deleted outside the room area of a plan that places nobody", setup: withPlan(&gangstate.Plan{
			Deferred: sets.New("hard-0"), WaitsForRoom: true, RoomArea: "rack-0"}),
			hint: podDeleted,
			old:  onNode(other, "node-5"), want: fwk.QueueSkip},
		{name: "node added, the member is left out while planned members are pending", setup: withPlan(&gangstate.Plan{
			Deferred: sets.New("hard-0"), Promised: map[string]int{"rack-0": 1}}),
			hint: nodeChange,
			new:  st.MakeNode().Name("node-9").Obj(), want: fwk.QueueSkip},
		{name: "node added, the plan places nobody", setup: withPlan(&gangstate.Plan{
			Deferred: sets.New("hard-0"), WaitsForRoom: true, RoomArea: "rack-0"}),
			hint: nodeChange,
			new:  st.MakeNode().Name("node-9").Obj(), want: fwk.Queue},
		{name: "pod deleted outside the room area of a plan that places nobody, older than leftOutReuse", setup: func(p *NetworkTopologyAware, r *podgroup.Registry) {
			withPlan(&gangstate.Plan{Deferred: sets.New("hard-0"), WaitsForRoom: true, RoomArea: "rack-0"})(p, r)
			p.planOf(podgroup.Key{Namespace: "ns", Name: "hard"}).Made = time.Now().Add(-leftOutReuse)
		},
			hint: podDeleted,
			old:  onNode(other, "node-5"), want: fwk.Queue},
		{name: "pod deleted inside the room area of a plan that places nobody", setup: withPlan(&gangstate.Plan{
			Deferred: sets.New("hard-0"), WaitsForRoom: true, RoomArea: "rack-0"}),
			hint: podDeleted,
			old:  onNode(other, "node-1"), want: fwk.Queue},
		{name: "a rejected reservation of the gang itself",
			hint: podDeleted,
			old:  onNode(member("hard", 2), "node-0"), want: fwk.QueueSkip},
		{name: "HyperNode status update", hint: hyperNodeChange,
			old: hyperNode(1, "2"), new: hyperNode(1, "3"), want: fwk.QueueSkip},
		{name: "HyperNode spec update", hint: hyperNodeChange,
			old: hyperNode(1, "2"), new: hyperNode(2, "2"), want: fwk.Queue},
		{name: "HyperNode added", hint: hyperNodeChange,
			new: hyperNode(1, "2"), want: fwk.Queue},
		{name: "own PodGroup status update", hint: podGroupChange,
			old: podGroup("hard", `{"highestTierAllowed":1}`, "Pending"), new: podGroup("hard", `{"highestTierAllowed":1}`, "Scheduling"), want: fwk.QueueSkip},
		{name: "own PodGroup constraint changed", hint: podGroupChange,
			old: podGroup("hard", `{"highestTierAllowed":1}`, "Pending"), new: podGroup("hard", `{"highestTierAllowed":2}`, "Pending"), want: fwk.Queue},
		{name: "another PodGroup changed", hint: podGroupChange,
			old: podGroup("other", "", "Pending"), new: podGroup("other", `{"highestTierAllowed":2}`, "Pending"), want: fwk.QueueSkip},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, registry := newTestPlugin(t)
			key := podgroup.Key{Namespace: "ns", Name: "hard"}
			if tc.setup != nil {
				tc.setup(p, registry)
			}
			if tc.possible != nil {
				p.setFailure(key, member("hard", 0), &gangstate.PlanFailure{Possible: sets.New(tc.possible...)})
				if tc.backoff {
					p.failureOf(key).RetryAt = time.Now().Add(time.Hour)
				}
			}
			hint := tc.hint(p)
			got, err := hint(klog.Background(), member("hard", 0), tc.old, tc.new)
			if err != nil || got != tc.want {
				t.Fatalf("hint = %v, %v; want %v", got, err, tc.want)
			}
			// Pods outside constrained gangs are never requeued by this plugin.
			for _, pod := range []*v1.Pod{gangPod("plain"), other} {
				if got, _ := hint(klog.Background(), pod, tc.old, tc.new); got != fwk.QueueSkip {
					t.Errorf("hint for %s = %v, want QueueSkip", pod.Name, got)
				}
			}
			if tc.want != fwk.Queue {
				return
			}
			// One member per gang: the siblings wait for the requeued member's attempt.
			if got, _ := hint(klog.Background(), member("hard", 1), tc.old, tc.new); got != fwk.QueueSkip {
				t.Errorf("a sibling was requeued too: %v", got)
			}
			p.gangs.RequeueDone(key)
			if got, _ := hint(klog.Background(), member("hard", 1), tc.old, tc.new); got != fwk.Queue {
				t.Errorf("after the requeued member's attempt, the next event requeued nobody: %v", got)
			}
		})
	}
}

// TestHoldHints: a pod kept off held room is requeued when the room it was kept off is freed
// (the hold's record went, left a node, or its gang's priority fell; a pod finished on a held
// node), and not when a hold is taken or grows; a constrained gang's remembered failure, which
// counted the held room as taken, is stale then.
func TestHoldHints(t *testing.T) {
	record := func(priority int32, nodes ...string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"namespace": "ns", "name": "big"}}}
		if nodes != nil {
			r := &podgroup.HoldRecord{Domain: "rack-0", Tier: 1, Nodes: nodes, Priority: priority, Since: time.Unix(1e9, 0)}
			u.SetAnnotations(map[string]string{podgroup.HoldAnnotation: r.Encode()})
		}
		return u
	}
	onNode := func(node string) *v1.Pod {
		return st.MakePod().Namespace("ns").Name("done").Node(node).Obj()
	}
	solo := st.MakePod().Namespace("ns").Name("solo").Obj()
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		podGroup bool
		old, new any
		want     fwk.QueueingHint
		stale    bool
		// released: the hint itself ended the hold (a deleted PodGroup's); recreated: the
		// registry has a PodGroup of the name with another UID.
		released, recreated bool
	}{
		{name: "hold ended", pod: solo, podGroup: true, old: record(0, "node-0", "node-1"), new: record(0), want: fwk.Queue},
		{name: "held PodGroup deleted", pod: solo, podGroup: true, old: record(0, "node-0"), want: fwk.Queue, released: true},
		{name: "held PodGroup deleted, another of its name created since", pod: solo, podGroup: true, old: record(0, "node-0"), want: fwk.Queue, recreated: true},
		{name: "hold left a node", pod: solo, podGroup: true, old: record(0, "node-0", "node-1"), new: record(0, "node-1"), want: fwk.Queue},
		{name: "hold's gang priority fell", pod: solo, podGroup: true, old: record(5, "node-0"), new: record(1, "node-0"), want: fwk.Queue},
		{name: "hold taken", pod: solo, podGroup: true, old: record(0), new: record(0, "node-0"), want: fwk.QueueSkip},
		{name: "hold grew", pod: solo, podGroup: true, old: record(0, "node-0"), new: record(0, "node-0", "node-1"), want: fwk.QueueSkip},
		{name: "hold ended, a constrained gang waits", pod: member("hard", 0), podGroup: true, old: record(0, "node-0"), new: record(0), want: fwk.Queue, stale: true},
		{name: "pod finished on a held node", pod: solo, old: onNode("node-0"), want: fwk.Queue},
		{name: "pod finished on a node not held", pod: solo, old: onNode("node-5"), want: fwk.QueueSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, registry := newTestPlugin(t)
			registry.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "big"}})
			big := podgroup.Key{Namespace: "ns", Name: "big"}
			h := &gangstate.Hold{Key: big, Domain: "rack-0", Tier: 1, Need: map[string]v1.ResourceList{"node-0": nil}, Since: time.Now(),
				Precedence: podgroup.GangPrecedence(big, 0, time.Unix(0, 0))}
			if ok, why := p.gangs.TakeHold(klog.Background(), h, -1); !ok {
				t.Fatalf("TakeHold: %s", why)
			}
			hard := podgroup.Key{Namespace: "ns", Name: "hard"}
			p.setFailure(hard, member("hard", 0), &gangstate.PlanFailure{Possible: sets.New("rack-1")})
			hint := p.isSchedulableAfterPodDeleted
			if tc.podGroup {
				hint = p.isSchedulableAfterPodGroupChange
			}
			if tc.recreated {
				registry.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "big", UID: "recreated"}})
			}
			got, err := hint(klog.Background(), tc.pod, tc.old, tc.new)
			if err != nil || got != tc.want {
				t.Fatalf("hint = %v, %v; want %v", got, err, tc.want)
			}
			if held := len(p.gangs.Holds().List()) > 0; held == tc.released {
				t.Errorf("hold still held = %t, want %t", held, !tc.released)
			}
			if stale := p.failureOf(hard).Stale; stale != tc.stale {
				t.Errorf("gang hard's failure stale = %t, want %t", stale, tc.stale)
			}
		})
	}
}
