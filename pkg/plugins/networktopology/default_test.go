package networktopology

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// TestDefaultTopology: a PodGroup without a constraint is a plain gang (PreFilter skips it)
// until the scheduler sets a default; then it is planned and refused by the default, and a
// default naming a tier the tree lacks is reported as the scheduler's, not as an annotation.
func TestDefaultTopology(t *testing.T) {
	e := newPlanEnv(t, map[string]int{"pair": 2, "trio": 3})
	for name, size := range map[string]int32{"pair": 2, "trio": 3} {
		e.registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("pg-" + name)},
			Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: size},
		})
	}
	preFilter := func(gang string) (*fwk.PreFilterResult, *fwk.Status) {
		res, status, _ := e.fw.RunPreFilterPlugins(e.ctx, framework.NewCycleState(), e.pod(gang, 0))
		return res, status
	}
	if res, status := preFilter("pair"); !status.IsSuccess() || !res.AllNodes() {
		t.Fatalf("without a default: PreFilter = %v, %v; want every node (a plain gang)", res, status)
	}

	if err := e.registry.SetDefaultTopology(&podgroup.NetworkTopology{Mode: podgroup.ModeHard, HighestTierAllowed: ptr.To(1)}); err != nil {
		t.Fatal(err)
	}
	res, status := preFilter("pair")
	if !status.IsSuccess() || res.AllNodes() || len(res.NodeNames) != 1 {
		t.Fatalf("with the default: PreFilter = %v, %v; want the member's planned node", res, status)
	}
	if plan := e.plugin.planOf(podgroup.Key{Namespace: "ns", Name: "pair"}); plan == nil || plan.Tier != 1 {
		t.Errorf("the pair's plan: %+v, want one in a leaf (tier 1)", plan)
	}
	// s0 holds the pair's plan.
	const trio = "hard topology (tier<=1): no HyperNode can host 3 pods; tier 1: s1 2/3, s2 2/3 (+2 more)"
	if _, status := preFilter("trio"); status.IsSuccess() || status.Message() != trio {
		t.Errorf("the trio with the default: %v, want %q", status, trio)
	}

	e = newPlanEnv(t, map[string]int{"pair": 2})
	e.registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pair", UID: "pg-pair"},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: 2},
	})
	if err := e.registry.SetDefaultTopology(&podgroup.NetworkTopology{Mode: podgroup.ModeSoft, HighestTierName: "rack"}); err != nil {
		t.Fatal(err)
	}
	const unknownTier = `PodGroup ns/pair: the scheduler's defaultNetworkTopology (NetworkTopologyAware args): ` +
		`no HyperNode has tierName "rack" (no HyperNode sets a tierName)`
	if _, status := preFilter("pair"); status.Code() != fwk.UnschedulableAndUnresolvable || status.Message() != unknownTier {
		t.Errorf("a default naming a missing tier: %v, want %q", status, unknownTier)
	}
}
