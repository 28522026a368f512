package gang

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// TestQueueingHints: a held-back gang is requeued when it becomes ready, a rejected gang once
// per event that can make room (one member until its attempt ran), and status-only PodGroup
// updates or the gang's own rejected reservations requeue nobody.
func TestQueueingHints(t *testing.T) {
	pg := func(name string, minMember int64, phase string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"spec":   map[string]any{"minMember": minMember},
			"status": map[string]any{"phase": phase},
		}}
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	onNode := func(p *v1.Pod) *v1.Pod {
		p = p.DeepCopy()
		p.Spec.NodeName = "node-1"
		return p
	}
	solo := st.MakePod().Namespace(ns).Name("solo").Obj()
	tests := []struct {
		name     string
		members  int // members of gang "train" (minMember 2) the registry knows
		hint     func(*Gang) fwk.QueueingHintFn
		pod      *v1.Pod
		old, obj any
		want     fwk.QueueingHint
		onlyOnce bool
		blocked  bool
	}{
		{name: "a member completes the gang", members: 2, hint: func(g *Gang) fwk.QueueingHintFn { return g.isSchedulableAfterMemberAdded },
			pod: member("p0", "train"), obj: member("p1", "train"), want: fwk.Queue},
		{name: "a member beyond minMember", members: 3, hint: func(g *Gang) fwk.QueueingHintFn { return g.isSchedulableAfterMemberAdded },
			pod: member("p0", "train"), obj: member("p2", "train"), want: fwk.QueueSkip},
		{name: "the pending pod's own labels changed", members: 2, hint: func(g *Gang) fwk.QueueingHintFn { return g.isSchedulableAfterLabelChange },
			pod: member("p0", "train"), old: member("p0", "other"), obj: member("p0", "train"), want: fwk.Queue},
		{name: "another pod's labels changed", members: 2, hint: func(g *Gang) fwk.QueueingHintFn { return g.isSchedulableAfterLabelChange },
			pod: member("p0", "train"), old: member("p1", "other"), obj: member("p1", "train"), want: fwk.QueueSkip},
		{name: "a member that leaves the gang short", members: 1, hint: func(g *Gang) fwk.QueueingHintFn { return g.isSchedulableAfterMemberAdded },
			pod: member("p0", "train"), obj: member("p1", "train"), want: fwk.QueueSkip},
		{name: "a member of another gang", members: 2, hint: func(g *Gang) fwk.QueueingHintFn { return g.isSchedulableAfterMemberAdded },
			pod: member("p0", "train"), obj: member("q1", "other"), want: fwk.QueueSkip},
		{name: "same group name in another namespace", members: 2, hint: func(g *Gang) fwk.QueueingHintFn { return g.isSchedulableAfterMemberAdded },
			pod: member("p0", "train"), obj: st.MakePod().Namespace("elsewhere").Name("p1").Label(schedulingv1alpha1.PodGroupLabel, "train").Obj(), want: fwk.QueueSkip},
		{name: "the gang's PodGroup created", members: 2, hint: func(g *Gang) fwk.QueueingHintFn { return g.isSchedulableAfterPodGroupChange },
			pod: member("p0", "train"), obj: pg("train", 2, ""), want: fwk.Queue},
		{name: "the gang's PodGroup spec changed", members: 2, hint: func(g *Gang) fwk.QueueingHintFn { return g.isSchedulableAfterPodGroupChange },
			pod: member("p0", "train"), old: pg("train", 3, "Pending"), obj: pg("train", 2, "Pending"), want: fwk.Queue},
		{name: "the gang's PodGroup status changed", members: 2, hint: func(g *Gang) fwk.QueueingHintFn { return g.isSchedulableAfterPodGroupChange },
			pod: member("p0", "train"), old: pg("train", 2, "Pending"), obj: pg("train", 2, "Scheduling"), want: fwk.QueueSkip},
		{name: "another PodGroup changed", members: 2, hint: func(g *Gang) fwk.QueueingHintFn { return g.isSchedulableAfterPodGroupChange },
			pod: member("p0", "train"), obj: pg("other", 2, ""), want: fwk.QueueSkip},
		{name: "room freed by another pod", members: 2, hint: func(g *Gang) fwk.QueueingHintFn { return g.isSchedulableAfterPodDeleted },
			pod: member("p0", "train"), old: onNode(solo), want: fwk.Queue, onlyOnce: true},
		{name: "the gang's own rejected reservation", members: 2, hint: func(g *Gang) fwk.QueueingHintFn { return g.isSchedulableAfterPodDeleted },
			pod: member("p0", "train"), old: onNode(member("p1", "train")), want: fwk.QueueSkip},
		{name: "room freed for a gang held back for members", members: 1, hint: func(g *Gang) fwk.QueueingHintFn { return g.isSchedulableAfterPodDeleted },
			pod: member("p0", "train"), old: onNode(solo), want: fwk.QueueSkip},
		{name: "room freed for a blocked gang", members: 2, blocked: true, hint: func(g *Gang) fwk.QueueingHintFn { return g.isSchedulableAfterPodDeleted },
			pod: member("p0", "train"), old: onNode(solo), want: fwk.QueueSkip},
		{name: "a running pod resized down", members: 2, hint: func(g *Gang) fwk.QueueingHintFn { return g.isSchedulableAfterPodScaledDown },
			pod: member("p0", "train"), old: onNode(solo), obj: onNode(solo), want: fwk.Queue, onlyOnce: true},
		{name: "node added", members: 2, hint: func(g *Gang) fwk.QueueingHintFn { return g.isSchedulableAfterNodeChange },
			pod: member("p0", "train"), obj: st.MakeNode().Name("node-2").Obj(), want: fwk.Queue, onlyOnce: true},
		{name: "node added, pod outside any gang", members: 2, hint: func(g *Gang) fwk.QueueingHintFn { return g.isSchedulableAfterNodeChange },
			pod: solo, obj: st.MakeNode().Name("node-2").Obj(), want: fwk.QueueSkip},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 60)
			e.podGroup("train", 2, nil)
			for i := range tc.members {
				e.registry.SetPod(nil, member([]string{"p0", "p1", "p2"}[i], "train"))
			}
			if tc.blocked {
				e.gangs.SetBlocked(podgroup.Key{Namespace: ns, Name: "train"}, gangstate.Blocker{UID: "p1", Name: "p1", Reason: "1 node(s) didn't match Pod's node affinity/selector"})
			}
			hint := tc.hint(e.plugin)
			got, err := hint(klog.Background(), tc.pod, tc.old, tc.obj)
			if err != nil || got != tc.want {
				t.Fatalf("hint = %v, %v; want %v", got, err, tc.want)
			}
			if !tc.onlyOnce {
				return
			}
			if got, _ := hint(klog.Background(), member("p1", "train"), tc.old, tc.obj); got != fwk.QueueSkip {
				t.Errorf("a sibling was requeued for the same gang: %v", got)
			}
			e.gangs.RequeueDone(podgroup.Key{Namespace: ns, Name: "train"})
			if got, _ := hint(klog.Background(), member("p1", "train"), tc.old, tc.obj); got != fwk.Queue {
				t.Errorf("after the requeued member's attempt: %v, want Queue", got)
			}
		})
	}
}

// TestGatedMemberLeavesTheRequeueClaim: a member that Gang's PreEnqueue holds back for its
// gang's invalid sub-group policy is not requeued for room, so it does not take the claim
// that a member that can run needs.
func TestGatedMemberLeavesTheRequeueClaim(t *testing.T) {
	e := newEnv(t, 60)
	e.registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train", UID: "uid-train",
			Annotations: map[string]string{podgroup.SubGroupPolicyAnnotation: "not json"}},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 1},
	})
	e.registry.SetPod(nil, member("p0", "train"))
	if s := e.plugin.PreEnqueue(e.ctx, member("p0", "train")); s.IsSuccess() {
		t.Fatal("PreEnqueue let a member of a PodGroup with an invalid sub-group policy in")
	}
	got, err := e.plugin.isSchedulableAfterNodeChange(klog.Background(), member("p0", "train"), nil, st.MakeNode().Name("node-2").Obj())
	if err != nil || got != fwk.QueueSkip {
		t.Errorf("hint = %v, %v; want QueueSkip", got, err)
	}
}
