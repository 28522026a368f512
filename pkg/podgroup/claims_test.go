package podgroup

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices/devicestest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// claimingMember is a member requesting claim "gpus" from a template, its status naming the
// generated claim when created.
func claimingMember(name, group string, created bool) *v1.Pod {
	p := devicestest.FromTemplate(member(name, group))
	if created {
		return devicestest.ClaimCreated(p)
	}
	return p
}

func TestAwaitsClaims(t *testing.T) {
	bound := claimingMember("w", "g", false)
	bound.Spec.NodeName = "node-1"
	shared := member("w", "g")
	shared.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To("shared-gpus")}}
	noClaimNeeded := claimingMember("w", "g", false)
	noClaimNeeded.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpus"}}
	tests := []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{name: "no claims", pod: member("w", "g")},
		{name: "claim from a template not created yet", pod: claimingMember("w", "g", false), want: true},
		{name: "claim from a template created", pod: claimingMember("w", "g", true)},
		{name: "the controller decided no claim is needed", pod: noClaimNeeded},
		{name: "a claim by name: the pod waits for it itself", pod: shared},
		{name: "bound", pod: bound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := AwaitsClaims(tc.pod); got != tc.want {
				t.Errorf("AwaitsClaims = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestGroupCountsMembersAwaitingClaims: the group counts its members whose claims from
// templates do not exist yet, and notifies its listeners once, when the last one is named or
// gone (never while one still waits, nor for an unrelated update).
func TestGroupCountsMembersAwaitingClaims(t *testing.T) {
	r := New()
	key := Key{Namespace: "ns", Name: "g"}
	var notified []notification
	r.OnGroupChange(func(k Key, podGroupChanged bool) { notified = append(notified, notification{k, podGroupChanged}) })
	pg := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 4}}
	r.SetPodGroup(pg)
	notified = nil
	launcher := member("launcher", "g")
	r.SetPod(nil, launcher)
	r.SetPod(nil, claimingMember("w1", "g", false))
	r.SetPod(nil, claimingMember("w2", "g", false))
	r.SetPod(nil, claimingMember("w3", "g", false))
	// The fourth member made minMember: that notifies, the claims aside.
	step := func(name string, wantAwaiting int, want []notification) {
		t.Helper()
		if got := r.Info(key).AwaitingClaims; got != wantAwaiting {
			t.Errorf("%s: AwaitingClaims = %d, want %d", name, got, wantAwaiting)
		}
		if diff := cmp.Diff(want, notified); diff != "" {
			t.Errorf("%s: notifications (-want,+got):\n%s", name, diff)
		}
		notified = nil
	}
	step("members created", 3, []notification{{key, false}})
	r.SetPod(claimingMember("w1", "g", false), claimingMember("w1", "g", true))
	step("w1's claim named", 2, nil)
	relabelled := launcher.DeepCopy()
	relabelled.Labels["role"] = "launcher"
	r.SetPod(launcher, relabelled)
	step("an unrelated update", 2, nil)
	r.DeletePod(claimingMember("w3", "g", false))
	step("w3 deleted", 1, nil)
	r.SetPod(claimingMember("w2", "g", false), claimingMember("w2", "g", true))
	step("w2's claim named, the last", 0, []notification{{key, false}})
	r.SetPod(claimingMember("w2", "g", true), claimingMember("w2", "g", true))
	step("w2 again (a resync)", 0, nil)
	r.SetPod(nil, claimingMember("w4", "g", false))
	// Back to minMember (w3 is gone): that notifies, and Gang's gate holds the members for w4.
	step("w4 created", 1, []notification{{key, false}})
	r.DeletePod(claimingMember("w4", "g", false))
	step("w4 deleted, the last that waited", 0, []notification{{key, false}})
	w5 := claimingMember("w5", "g", false)
	r.SetPod(nil, w5)
	notified = nil
	moved := w5.DeepCopy()
	moved.Labels[schedulingv1alpha1.PodGroupLabel] = "other"
	r.SetPod(w5, moved)
	// The old group no longer waits; the new one does (one member, no PodGroup: no notice).
	step("w5 moved to another group", 0, []notification{{key, false}})
	if got := r.Info(Key{Namespace: "ns", Name: "other"}).AwaitingClaims; got != 1 {
		t.Errorf("the other group's AwaitingClaims = %d, want 1", got)
	}
}
