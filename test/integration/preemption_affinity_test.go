package integration

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// TestGangPreemptionCountsAZoneAntiAffinityGivenBack: node-0 and node-1 are zone a, node-2
// and node-3 zone b. low-node-0 forbids the gang in its whole zone; low-node-2 and low-node-3
// fill zone b; node-1 is free. The gang of two 8-CPU members, given low-node-0 back first
// (equal victims go back in name order), must see node-1 refuse it too, and so evicts zone b's
// two pods and binds there. Before, only node-0 was counted again: node-1 still counted as
// free, low-node-3 alone was evicted, and the gang never fit.
func TestGangPreemptionCountsAZoneAntiAffinityGivenBack(t *testing.T) {
	for _, tc := range []struct{ name, annotation string }{
		{"no constraint", ""},
		{"hard tier 1", `{"mode":"hard","highestTierAllowed":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTopoEnv(t, nodesWithCPU("8", "node-0", "node-1", "node-2", "node-3"), nil,
				hntesting.MakeHyperNode("leaf-a").Tier(1).Nodes("node-0", "node-1", "node-2", "node-3").Obj())
			ctx := context.Background()
			for node, zone := range map[string]string{"node-0": "a", "node-1": "a", "node-2": "b", "node-3": "b"} {
				patch := []byte(`{"metadata":{"labels":{"zone":"` + zone + `"}}}`)
				if _, err := e.c.kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			e.priorityClasses()
			guard := util.Pod(e.ns, "low-node-0", "no-scheduler", "8", nil)
			guard.Spec.NodeName = "node-0"
			guard.Spec.PriorityClassName = e.ns + "-low"
			guard.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
			guard.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{util.PodGroupLabel: "train"}},
					TopologyKey:   "zone",
				}},
			}}
			if _, err := util.CreatePods(ctx, e.c.kube, guard); err != nil {
				t.Fatal(err)
			}
			e.lowPodOn("node-2")
			e.lowPodOn("node-3")
			startScheduler(t, nil)
			names := e.gang("train", 2, tc.annotation, cpu("8"), func(p *v1.Pod) { p.Spec.PriorityClassName = e.ns + "-high" })
			if diff := cmp.Diff([]string{"node-2", "node-3"}, nodeSet(e.waitBound(names))); diff != "" {
				t.Errorf("gang nodes (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"low-node-0"}, e.remaining("low-")); diff != "" {
				t.Errorf("low-priority pods left (-want,+got):\n%s", diff)
			}
			if preempted := e.eventsOnceCounted("Preempted", 2); len(preempted) != 2 {
				t.Errorf("Preempted events %v, want 2", preempted)
			}
		})
	}
}
