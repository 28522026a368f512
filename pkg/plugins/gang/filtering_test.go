package gang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
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
