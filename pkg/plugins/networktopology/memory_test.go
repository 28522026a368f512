package networktopology

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// TestStateIsBoundedByLiveGangs: 1,000 gangs are planned (half of them fit, half cannot; a
// third are refused for a tier name the tree lacks) and deleted; no plan, failure, refusal or
// Event memory is left behind.
func TestStateIsBoundedByLiveGangs(t *testing.T) {
	e := newPlanEnv(t, nil)
	for i := range 1000 {
		group := fmt.Sprintf("g-%d", i)
		size := 1 + 2*(i%2) // 1 fits in a leaf of two nodes, 3 never does
		constraint, refused := `{"highestTierAllowed":1}`, i%3 == 2
		if refused {
			constraint = `{"mode":"hard","highestTierName":"missing"}`
		}
		e.registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: group, UID: types.UID("pg-" + group),
				Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: constraint}},
			Spec: schedulingv1alpha1.PodGroupSpec{MinMember: int32(size)},
		})
		for j := range size {
			e.registry.SetPod(nil, e.pod(group, j))
		}
		_, status, _ := e.fw.RunPreFilterPlugins(e.ctx, framework.NewCycleState(), e.pod(group, 0))
		if status.IsSuccess() != (size == 1 && !refused) {
			t.Fatalf("gang %s of %d: PreFilter = %v", group, size, status)
		}
		for j := range size {
			e.registry.DeletePod(e.pod(group, j))
		}
		e.registry.DeletePodGroup("ns", group)
	}
	if n := e.gangs.Len(); n != 0 {
		t.Errorf("the gang state keeps plans, failures or refusals of %d deleted gangs", n)
	}
	if n := e.plugin.events.Len(); n != 0 {
		t.Errorf("the Event log remembers %d deleted gangs", n)
	}
}
