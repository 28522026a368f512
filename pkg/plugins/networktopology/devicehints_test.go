package networktopology

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// withGPUClaim gives a member a claim from a template, as a DRA job's members have.
func withGPUClaim(pod *v1.Pod) *v1.Pod {
	pod = pod.DeepCopy()
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("eight-gpus")}}
	return pod
}

// allocatedClaim is a claim allocated on the nodes its selector names by metadata.name
// (none: a selector by label).
func allocatedClaim(nodes ...string) *resourceapi.ResourceClaim {
	term := v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "rack", Operator: v1.NodeSelectorOpIn, Values: []string{"rack-0"}}}}
	if len(nodes) > 0 {
		term = v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpIn, Values: nodes}}}
	}
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "done-gpus", UID: "done-gpus"},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{term}},
		}},
	}
}

// TestDeviceHints: a gang whose members claim devices is requeued when an allocated claim is
// deallocated or deleted on a node of a HyperNode that could host it (the claim controller
// frees a finished pod's devices after the pod is gone), or when devices are published or a
// class changes; not for claims allocated or still allocated, not where it can never fit, not
// during its back-off, and never for members without claims.
func TestDeviceHints(t *testing.T) {
	unallocated := func(c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
		c = c.DeepCopy()
		c.Status.Allocation = nil
		return c
	}
	released := func(p *NetworkTopologyAware) fwk.QueueingHintFn { return p.isSchedulableAfterClaimReleased }
	changed := func(p *NetworkTopologyAware) fwk.QueueingHintFn { return p.isSchedulableAfterDevicesChanged }
	slice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "node-1-gpus"}}
	for _, tc := range []struct {
		name     string
		possible []string
		backoff  bool
		hint     func(p *NetworkTopologyAware) fwk.QueueingHintFn
		old, new any
		want     fwk.QueueingHint
	}{
		{name: "claim deallocated where the gang could fit", possible: []string{"rack-0"}, hint: released,
			old: allocatedClaim("node-1"), new: unallocated(allocatedClaim("node-1")), want: fwk.Queue},
		{name: "allocated claim deleted where the gang could fit", possible: []string{"rack-0"}, hint: released,
			old: allocatedClaim("node-1"), want: fwk.Queue},
		{name: "claim deallocated where the gang can never fit", possible: []string{"rack-0"}, hint: released,
			old: allocatedClaim("node-5"), new: unallocated(allocatedClaim("node-5")), want: fwk.QueueSkip},
		{name: "claim deallocated where the gang could fit, during its back-off", possible: []string{"rack-0"}, backoff: true, hint: released,
			old: allocatedClaim("node-1"), new: unallocated(allocatedClaim("node-1")), want: fwk.QueueSkip},
		{name: "claim deallocated, devices selected by label", possible: []string{"rack-0"}, hint: released,
			old: allocatedClaim(), new: unallocated(allocatedClaim()), want: fwk.Queue},
		{name: "claim still allocated", possible: []string{"rack-0"}, hint: released,
			old: allocatedClaim("node-1"), new: allocatedClaim("node-1"), want: fwk.QueueSkip},
		{name: "claim allocated", possible: []string{"rack-0"}, hint: released,
			old: unallocated(allocatedClaim("node-1")), new: allocatedClaim("node-1"), want: fwk.QueueSkip},
		{name: "unallocated claim deleted", possible: []string{"rack-0"}, hint: released,
			old: unallocated(allocatedClaim("node-1")), want: fwk.QueueSkip},
		{name: "devices published", possible: []string{"rack-0"}, hint: changed,
			new: slice, want: fwk.Queue},
		{name: "devices published, during the back-off", possible: []string{"rack-0"}, backoff: true, hint: changed,
			new: slice, want: fwk.QueueSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newTestPlugin(t)
			key := podgroup.Key{Namespace: "ns", Name: "hard"}
			p.setFailure(key, member("hard", 0), &gangstate.PlanFailure{Possible: sets.New(tc.possible...)})
			if tc.backoff {
				p.failureOf(key).RetryAt = time.Now().Add(time.Hour)
			}
			hint := tc.hint(p)
			got, err := hint(klog.Background(), withGPUClaim(member("hard", 0)), tc.old, tc.new)
			if err != nil || got != tc.want {
				t.Fatalf("hint = %v, %v; want %v", got, err, tc.want)
			}
			// Members without claims, and pods outside constrained gangs, are not requeued.
			for _, pod := range []*v1.Pod{member("hard", 1), withGPUClaim(gangPod("plain"))} {
				if got, _ := hint(klog.Background(), pod, tc.old, tc.new); got != fwk.QueueSkip {
					t.Errorf("hint for %s = %v, want QueueSkip", pod.Name, got)
				}
			}
		})
	}
}
