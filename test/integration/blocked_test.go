package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// gangWithUnmatchedMember starts the scheduler on two nodes of one leaf and creates the gang
// "train" of three pods (minMember, the constraint annotation if any) whose train-2 selects a
// label no node has; it returns the pods' names.
func gangWithUnmatchedMember(t *testing.T, annotation string, minMember int32) (*topoEnv, []string) {
	t.Helper()
	e := newTopoEnv(t, nodesWithCPU("4", "node-0", "node-1"), nil,
		hntesting.MakeHyperNode("leaf").Tier(1).Nodes("node-0", "node-1").Obj())
	startScheduler(t, nil)
	var annotations map[string]string
	if annotation != "" {
		annotations = map[string]string{podgroup.NetworkTopologyAnnotation: annotation}
	}
	if err := util.CreatePodGroup(context.Background(), e.c.scheduling, util.PodGroup(e.ns, "train", minMember, annotations)); err != nil {
		t.Fatal(err)
	}
	pods := util.GangPods(e.ns, "train", plugins.SchedulerName, "1", 3)
	pods[2].Spec.NodeSelector = map[string]string{"accelerator": "h100"}
	names, err := util.CreatePods(context.Background(), e.c.kube, pods...)
	if err != nil {
		t.Fatal(err)
	}
	return e, names
}

// TestGangBlockedByMemberThatFitsNoNode: a member whose node selector no node matches blocks
// its gang (plain, and placed by topology): the PodGroup says which member and why, the other
// members wait with that reason instead of reserving and being rejected in a loop, and
// labelling a node so that the member fits lets the whole gang bind.
func TestGangBlockedByMemberThatFitsNoNode(t *testing.T) {
	for _, tc := range []struct {
		name       string
		annotation string
	}{
		{name: "plain gang"},
		{name: "hard tier 1", annotation: `{"mode":"hard","highestTierAllowed":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, names := gangWithUnmatchedMember(t, tc.annotation, 3)
			created, err := e.c.scheduling.SchedulingV1alpha1().PodGroups(e.ns).Get(context.Background(), "train", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := "gang " + e.ns + "/train is blocked: its member train-2 fits no node (2 node(s) didn't match Pod's node affinity/selector)"
			waitForObjectEvent(t, e.c, e.ns, "PodGroup", created.UID, gangstate.EventGangBlocked, plugins.SchedulerName, want)
			// The siblings say that train-2 keeps them out, and why; they are not tried again
			// until something can change the answer. Which words depends on the queue's order:
			// released when train-2 failed after they reserved ("member train-2 cannot be
			// placed (...)"), or held back because train-2 went first and blocked the gang
			// ("its member train-2 fits no node (...)").
			for _, sibling := range names[:2] {
				msg := e.waitCondition(sibling, v1.PodReasonUnschedulable, "(2 node(s) didn't match Pod's node affinity/selector)")
				if !strings.Contains(msg, "member train-2 cannot be placed (") && !strings.Contains(msg, "its member train-2 fits no node (") {
					t.Errorf("pod %s: %q does not name train-2 as the member that keeps the gang out", sibling, msg)
				}
			}
			e.expectNoneBound()

			// The member fits once a node carries the label: the gang binds, all of it.
			node, err := e.c.kube.CoreV1().Nodes().Get(context.Background(), "node-1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			patch := []byte(`{"metadata":{"labels":{"accelerator":"h100"}}}`)
			if _, err := e.c.kube.CoreV1().Nodes().Patch(context.Background(), node.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			got := e.waitBound(names)
			if got["train-2"] != "node-1" || len(got) != 3 {
				t.Errorf("placements %v: want all three bound, train-2 on node-1", got)
			}
			if diff := cmp.Diff(got, e.bound()); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// TestElasticGangRunsWithoutAMemberThatFitsNoNode: a gang of three with minMember 2 whose
// third member fits no node (a node selector nobody matches) binds its other two, whatever
// order the queue takes them in; nothing blocks it, and the third stays pending, saying why.
func TestElasticGangRunsWithoutAMemberThatFitsNoNode(t *testing.T) {
	for _, tc := range []struct {
		name       string
		annotation string
		// why is what train-2's condition says besides kube-scheduler's own summary.
		why string
	}{
		// Plain: "...; the gang has its minMember 2 members placed and runs without it", or,
		// when train-2's last attempt came before train-1 reserved, "... now; the other
		// members can still make minMember 2, ...".
		{name: "plain gang", why: "/train: this member cannot be placed"},
		{name: "hard tier 1", annotation: `{"mode":"hard","highestTierAllowed":1}`,
			why: "/train: member train-2 fits no node (2 node(s) didn't match Pod's node affinity/selector); the gang can run without it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, names := gangWithUnmatchedMember(t, tc.annotation, 2)
			got := e.waitBound(names[:2])
			if len(got) != 2 {
				t.Fatalf("placements %v: want train-0 and train-1 bound", got)
			}
			e.waitCondition("train-2", v1.PodReasonUnschedulable, "gang "+e.ns+tc.why)
			if diff := cmp.Diff(got, e.bound()); diff != "" {
				t.Errorf("bound pods (-want,+got):\n%s", diff)
			}
			if blocked := e.eventsByReason()[gangstate.EventGangBlocked]; len(blocked) > 0 {
				t.Errorf("GangBlocked Events for a gang that runs without the member: %q", blocked)
			}
		})
	}
}
