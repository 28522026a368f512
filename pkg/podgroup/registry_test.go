package podgroup

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

func member(name, group string) *v1.Pod {
	return st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedulingv1alpha1.PodGroupLabel, group).Obj()
}

func TestRegistryCounts(t *testing.T) {
	r := New()
	key := Key{Namespace: "ns", Name: "g"}
	var notified []notification
	r.OnGroupChange(func(k Key, podGroupChanged bool) { notified = append(notified, notification{k, podGroupChanged}) })

	r.SetPod(nil, member("a", "g"))
	r.SetPod(nil, member("b", "g"))
	r.SetPod(nil, member("c", "g"))
	r.SetPod(nil, st.MakePod().Namespace("ns").Name("solo").UID("solo").Obj())
	if diff := cmp.Diff(Info{Members: 3}, r.Info(key)); diff != "" {
		t.Errorf("without PodGroup (-want,+got):\n%s", diff)
	}
	pg := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}}
	r.SetPodGroup(pg)

	r.Reserve(member("a", "g"), "node-1")
	r.Reserve(member("a", "g"), "node-1") // idempotent
	bound := member("b", "g")
	bound.Spec.NodeName = "node-1"
	r.SetPod(member("b", "g"), bound)
	r.Reserve(bound, "node-1") // a bound member is not counted twice
	if diff := cmp.Diff(Info{PodGroup: pg, Revision: 1, Members: 3, Bound: 1, Scheduled: 2}, r.Info(key)); diff != "" {
		t.Errorf("reserved and bound (-want,+got):\n%s", diff)
	}
	if got := names(r.PendingMembers(key)); !cmp.Equal(got, []string{"c"}) {
		t.Errorf("pending = %v, want [c]", got)
	}

	r.Unreserve(member("a", "g"))
	r.Unreserve(member("a", "g")) // idempotent
	done := bound.DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	r.SetPod(bound, done)
	moved := member("c", "g")
	moved.Labels[schedulingv1alpha1.PodGroupLabel] = "other"
	r.SetPod(member("c", "g"), moved)
	if diff := cmp.Diff(Info{PodGroup: pg, Revision: 1, Members: 1, Scheduled: 0}, r.Info(key)); diff != "" {
		t.Errorf("after unreserve, completion and relabel (-want,+got):\n%s", diff)
	}
	if got := r.Info(Key{Namespace: "ns", Name: "other"}).Members; got != 1 {
		t.Errorf("members of the other group = %d, want 1", got)
	}
	if got := r.Info(key).MinMember(); got != 2 {
		t.Errorf("MinMember = %d, want 2", got)
	}
	// Only the PodGroup's arrival notified (the members came first; none of them, nor the
	// relabelled one, brought a group to exactly minMember with its PodGroup present).
	want := []notification{{key, true}}
	if diff := cmp.Diff(want, notified); diff != "" {
		t.Errorf("notifications (-want,+got):\n%s", diff)
	}
}

func TestClusterAllocatable(t *testing.T) {
	r := New()
	node := func(name, cpu string) *v1.Node {
		return st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{v1.ResourceCPU: cpu}).Obj()
	}
	r.SetNode(nil, node("a", "4"))
	r.SetNode(nil, node("b", "8"))
	before := r.ClusterAllocatable()
	r.SetNode(nil, node("a", "2"))
	r.DeleteNode("b")
	if got := r.ClusterAllocatable()[v1.ResourceCPU]; got.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("cluster cpu = %s, want 2", got.String())
	}
	if got := before[v1.ResourceCPU]; got.Cmp(resource.MustParse("12")) != 0 {
		t.Errorf("a published total changed afterwards: %s, want 12", got.String())
	}
}

// notification is one call of an OnGroupChange listener.
type notification struct {
	Key             Key
	PodGroupChanged bool
}

// TestMinResourcesShortfallWakesTheGroup: a group found short of the cluster's allocatable is
// notified when a node change covers its minResources, and when its minResources change;
// nothing else notifies.
func TestMinResourcesShortfallWakesTheGroup(t *testing.T) {
	r := New()
	var notified []notification
	r.OnGroupChange(func(k Key, podGroupChanged bool) { notified = append(notified, notification{k, podGroupChanged}) })
	node := func(name, gpus string) *v1.Node {
		return st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{"nvidia.com/gpu": gpus}).Obj()
	}
	setGroup := func(gpus string) {
		r.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"},
			Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 1, MinResources: v1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus)}}})
	}
	key := Key{Namespace: "ns", Name: "g"}
	min := func() v1.ResourceList { return r.Info(key).PodGroup.Spec.MinResources }
	r.SetNode(nil, node("a", "8"))
	setGroup("16")
	notified = nil
	if got, want := r.MinResourcesShortfall(key, min()), "nvidia.com/gpu 16 (cluster allocatable 8)"; got != want {
		t.Fatalf("shortfall %q, want %q", got, want)
	}
	r.SetNode(nil, node("b", "4")) // 12: still short
	if len(notified) != 0 {
		t.Errorf("notified %v while the cluster is still short", notified)
	}
	r.SetNode(nil, node("c", "4")) // 16: enough
	r.SetNode(nil, node("d", "4")) // remembered no longer
	setGroup("8")
	if diff := cmp.Diff([]notification{{key, false}, {key, true}}, notified); diff != "" {
		t.Errorf("notifications (-want,+got):\n%s", diff)
	}
	if got := r.MinResourcesShortfall(key, min()); got != "" {
		t.Errorf("shortfall %q at 20 GPUs for 8", got)
	}
}

func names(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// TestNodeFingerprint: what can make room for a pod moves the fingerprint (also a label
// moving from one node to another, in the sum over nodes); a heartbeat does not.
func TestNodeFingerprint(t *testing.T) {
	base := func(name string) *v1.Node {
		return st.MakeNode().Name(name).Label("rack", "r1").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourceMemory: "16Gi"}).Obj()
	}
	sum := func(nodes ...*v1.Node) uint64 {
		var s uint64
		for _, n := range nodes {
			s += NodeFingerprint(n)
		}
		return s
	}
	a, b := base("a"), base("b")
	want := sum(a, b)
	for _, tc := range []struct {
		name    string
		mutate  func(a, b *v1.Node)
		changed bool
	}{
		{name: "a heartbeat", mutate: func(a, _ *v1.Node) {
			a.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
			a.ResourceVersion = "2"
		}},
		{name: "a label", mutate: func(a, _ *v1.Node) { a.Labels["gpu"] = "h100" }, changed: true},
		{name: "a taint", mutate: func(a, _ *v1.Node) {
			a.Spec.Taints = []v1.Taint{{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule}}
		}, changed: true},
		{name: "cordoned", mutate: func(a, _ *v1.Node) { a.Spec.Unschedulable = true }, changed: true},
		{name: "allocatable", mutate: func(a, _ *v1.Node) { a.Status.Allocatable[v1.ResourceCPU] = resource.MustParse("3") }, changed: true},
		{name: "a declared feature", mutate: func(a, _ *v1.Node) { a.Status.DeclaredFeatures = []string{"InPlacePodVerticalScaling"} }, changed: true},
		{name: "allocatable written in another format", mutate: func(a, _ *v1.Node) { a.Status.Allocatable[v1.ResourceMemory] = resource.MustParse("17179869184") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := base("a"), base("b")
			tc.mutate(a, b)
			if got := sum(a, b); (got != want) != tc.changed {
				t.Errorf("fingerprint changed: %v, want %v", got != want, tc.changed)
			}
			if got := NodeCapacityChanged(base("a"), a); got != tc.changed {
				t.Errorf("NodeCapacityChanged = %v, want %v", got, tc.changed)
			}
		})
	}
	// Two taints in either order.
	one, two := v1.Taint{Key: "a", Effect: v1.TaintEffectNoSchedule}, v1.Taint{Key: "b", Value: "x", Effect: v1.TaintEffectNoExecute}
	x, y := base("a"), base("a")
	x.Spec.Taints, y.Spec.Taints = []v1.Taint{one, two}, []v1.Taint{two, one}
	if NodeFingerprint(x) != NodeFingerprint(y) {
		t.Error("the order of a node's taints moves its fingerprint")
	}
	// The same label on one node or the other.
	x, y = base("a"), base("b")
	x.Labels["gpu"] = "h100"
	moved, other := base("a"), base("b")
	other.Labels["gpu"] = "h100"
	if sum(x, y) == sum(moved, other) {
		t.Error("a label moving from one node to another leaves the fingerprint")
	}
}
