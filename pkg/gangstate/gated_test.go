package gangstate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices/devicestest"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// TestGatedGroups: each group counts once, under the first reason PreEnqueue would give for
// one of its pending members; groups with nothing pending or nothing to wait for count 0.
func TestGatedGroups(t *testing.T) {
	podGroup := func(name string, minMember int32, annotations map[string]string) *schedulingv1alpha1.PodGroup {
		return &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: annotations},
			Spec: schedulingv1alpha1.PodGroupSpec{MinMember: minMember}}
	}
	tr := New()
	r := tr.Registry()
	// No PodGroup: gated, even below minMember.
	r.SetPod(nil, member("orphan-0", "orphan"))
	// No PodGroup, but every member bound: nothing pending, nothing gated.
	bound := member("done-0", "done")
	bound.Spec.NodeName = "node-1"
	r.SetPod(nil, bound)
	// 2 of 3 members.
	r.SetPodGroup(podGroup("few", 3, nil))
	r.SetPod(nil, member("few-0", "few"))
	r.SetPod(nil, member("few-1", "few"))
	// Complete: not gated.
	r.SetPodGroup(podGroup("ready", 2, nil))
	r.SetPod(nil, member("ready-0", "ready"))
	r.SetPod(nil, member("ready-1", "ready"))
	// An unusable policy comes before the member count.
	r.SetPodGroup(podGroup("bad-policy", 5, map[string]string{podgroup.SubGroupPolicyAnnotation: `[{"name":"tp"}]`}))
	r.SetPod(nil, member("bad-policy-0", "bad-policy"))
	// A member without the policy's key, in a group that has its members.
	r.SetPodGroup(podGroup("unlabelled", 1, map[string]string{podgroup.SubGroupPolicyAnnotation: `[{"name":"tp","subGroupSize":1,"matchLabelKeys":["partition"]}]`}))
	r.SetPod(nil, member("unlabelled-0", "unlabelled"))
	// Below minMember, but its only pending member is reserved: nothing pending.
	r.SetPodGroup(podGroup("reserved", 2, nil))
	r.SetPod(nil, member("reserved-0", "reserved"))
	r.Reserve(member("reserved-0", "reserved"), "node-1")
	// An unusable hold-after annotation, in a group that has its members.
	r.SetPodGroup(podGroup("bad-hold", 1, map[string]string{podgroup.HoldAfterAnnotation: "soon"}))
	r.SetPod(nil, member("bad-hold-0", "bad-hold"))
	// A member that also names a native pod group, in a group that has its members.
	r.SetPodGroup(podGroup("two", 1, nil))
	two := member("two-0", "two")
	native := "two-native"
	two.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &native}
	r.SetPod(nil, two)
	// A complete group whose worker's claim from a template does not exist yet.
	r.SetPodGroup(podGroup("dra", 2, nil))
	r.SetPod(nil, member("dra-launcher", "dra"))
	worker := devicestest.FromTemplate(member("dra-worker", "dra"))
	r.SetPod(nil, worker)

	want := map[string]int{GatedInTwoPodGroups: 1, GatedPodGroupMissing: 1, GatedWaitingForMembers: 1, GatedInvalidSubGroupPolicy: 1, GatedInvalidSubGroupMember: 1, GatedInvalidHoldAnnotation: 1, GatedWaitingForClaims: 1}
	if diff := cmp.Diff(want, tr.GatedGroups()); diff != "" {
		t.Errorf("gated groups (-want +got):\n%s", diff)
	}
	r.SetPod(nil, member("few-2", "few"))
	r.DeletePodGroup("ns", "bad-policy")
	r.SetPodGroup(podGroup("bad-hold", 1, map[string]string{podgroup.HoldAfterAnnotation: "never"}))
	r.DeletePod(two)
	r.SetPod(worker, devicestest.ClaimCreated(worker))
	want = map[string]int{GatedInTwoPodGroups: 0, GatedPodGroupMissing: 2, GatedWaitingForMembers: 0, GatedInvalidSubGroupPolicy: 0, GatedInvalidSubGroupMember: 1, GatedInvalidHoldAnnotation: 0, GatedWaitingForClaims: 0}
	if diff := cmp.Diff(want, tr.GatedGroups()); diff != "" {
		t.Errorf("after few's third member, bad-policy's PodGroup deleted, bad-hold's fixed and dra's claim created (-want +got):\n%s", diff)
	}
}
