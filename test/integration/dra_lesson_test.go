package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// TestDRAGangReplannedWhenItsClaimsFailOnItsPlannedLeaf: a hard tier-1 gang of two 8-GPU
// members is planned into s0 (the CPU-fuller leaf; node-0, node-1), train-0 held by a
// scheduling gate. train-1 reserves one node of s0; then a pod of higher priority, which does
// not see the plan's nominations, takes one GPU of the other. When train-0 comes, its claims
// can be allocated on no node of its planned leaf, and nowhere else in its domain: the gang
// is planned again at once on what the failure showed (s0 cannot hold it) and binds in s1,
// both claims allocated there, with no cluster change to wake it.
func TestDRAGangReplannedWhenItsClaimsFailOnItsPlannedLeaf(t *testing.T) {
	e := draLeaves(t)
	e.priorityClass("lesson-high", 1000)
	e.claimTemplate("one-gpu", draOnlyClass, 1)
	e.claimTemplate("eight-gpus", draOnlyClass, 8)
	e.claimingFiller("filler-0", "node-0", "1", "")
	e.claimingFiller("filler-1", "node-1", "1", "")

	members := e.gang("train", 2, `{"mode":"hard","highestTierAllowed":1}`, v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
		withClaimFrom("eight-gpus"), func(p *v1.Pod) {
			if p.Name == "train-0" {
				p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "hypernode.dev/test-hold"}}
			}
		})
	planned := e.waitEvent("TopologyPlanned")
	if want := fmt.Sprintf("gang %s/train planned in s0 (tier 1): 2 pending members over leaves [s0]", e.ns); planned.Note != want {
		t.Fatalf("plan %q, want %q", planned.Note, want)
	}

	hog := util.Pod(e.ns, "hog", plugins.SchedulerName, "", nil)
	hog.Spec.PriorityClassName = "lesson-high"
	withClaimFrom("one-gpu")(hog)
	hog.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{
			{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"node-0"}}}},
			{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"node-1"}}}},
		},
	}}}
	if _, err := util.CreatePods(context.Background(), e.c.kube, hog); err != nil {
		t.Fatal(err)
	}
	hogNode := e.waitBound([]string{"hog"})["hog"]

	e.ungate("train-0")
	got := e.waitBound(members)
	if diff := cmp.Diff([]string{"node-2", "node-3"}, slices.Sorted(maps.Values(got))); diff != "" {
		t.Errorf("gang placed on %v; nodes (-want +got):\n%s", got, diff)
	}
	want := map[string][]string{"hog": devicesOn(hogNode, 1)}
	for pod, node := range got {
		want[pod] = devicesOn(node, 8)
	}
	if diff := cmp.Diff(want, e.allocatedDevices()); diff != "" {
		t.Errorf("allocated devices by pod (-want +got):\n%s", diff)
	}
	// Two plans (s0, then s1 at once); an Events series keeps its first note.
	if plans := e.eventsOnceCounted("TopologyPlanned", 2); len(plans) != 2 {
		t.Errorf("TopologyPlanned %q, want 2: the plan refused in s0, and the one in s1", plans)
	}
}
