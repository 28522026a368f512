package networktopology

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

// seedTree is seed 000's spine/tor/rack tree: rack-0..3 (tier 1, two nodes each), tor-0/1
// (tier 2), spine-0 (tier 3); the virtual root is tier 4.
func seedTree() *hypernode.Snapshot {
	nodes := map[string]labels.Set{"outside": {}}
	for i := range 8 {
		nodes[fmt.Sprintf("node-%d", i)] = labels.Set{}
	}
	return hypernode.Build(nodes, seedHyperNodes()).Snapshot()
}

// seedHyperNodes are the HyperNodes of seedTree.
func seedHyperNodes() []*topologyv1alpha1.HyperNode {
	var hns []*topologyv1alpha1.HyperNode
	for r := range 4 {
		hns = append(hns, hntesting.MakeHyperNode(fmt.Sprintf("rack-%d", r)).Tier(1).Nodes(fmt.Sprintf("node-%d", 2*r), fmt.Sprintf("node-%d", 2*r+1)).Obj())
	}
	return append(hns,
		hntesting.MakeHyperNode("tor-0").Tier(2).Children("rack-0", "rack-1").Obj(),
		hntesting.MakeHyperNode("tor-1").Tier(2).Children("rack-2", "rack-3").Obj(),
		hntesting.MakeHyperNode("spine-0").Tier(3).Children("tor-0", "tor-1").Obj(),
	)
}

// TestScoreMember: seed 000 section 5.2 with the job's members in rack-0. Same rack: full;
// LCA tor-0 (tier 2): (4-2)/(4-1); LCA spine-0: (4-3)/(4-1); outside every HyperNode: 0. 90% of
// the score is the tier term, 10% the share of the gang in the node's rack.
func TestScoreMember(t *testing.T) {
	p := &NetworkTopologyAware{}
	s := &preScoreState{tree: seedTree(), reference: "rack-0", placedByLeaf: map[string]int{"rack-0": 2}, members: 4}
	want := map[string]int64{
		"node-0":  95, // 90*1 + 10*2/4
		"node-2":  60, // 90*2/3
		"node-5":  30, // 90*1/3
		"outside": 0,
	}
	got := map[string]int64{}
	for node := range want {
		got[node] = p.scoreMember(s, node)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want,+got):\n%s", diff)
	}
}

// TestScoreReadsItsOwnCycle: Score of a cycle other than the latest PreScore's (Score reads
// the latest without a CycleState lookup) scores with that cycle's own state, and a cycle
// PreScore wrote nothing to scores 0.
func TestScoreReadsItsOwnCycle(t *testing.T) {
	p := &NetworkTopologyAware{}
	tree := seedTree()
	first, second := framework.NewCycleState(), framework.NewCycleState()
	p.writePreScore(first, &preScoreState{tree: tree, reference: "rack-0", placedByLeaf: map[string]int{}, members: 4})
	p.writePreScore(second, &preScoreState{tree: tree, reference: "rack-3", placedByLeaf: map[string]int{}, members: 4})
	node := framework.NewNodeInfo()
	node.SetNode(st.MakeNode().Name("node-0").Obj())
	got := map[string]int64{}
	for name, state := range map[string]fwk.CycleState{"first": first, "second": second, "none": framework.NewCycleState()} {
		score, status := p.Score(context.Background(), state, st.MakePod().Obj(), node)
		if !status.IsSuccess() {
			t.Fatalf("%s: %v", name, status)
		}
		got[name] = score
	}
	// node-0 is in rack-0: full in the first cycle; LCA spine-0 with rack-3 in the second.
	if diff := cmp.Diff(map[string]int64{"first": 90, "second": 30, "none": 0}, got); diff != "" {
		t.Errorf("scores of node-0 (-want,+got):\n%s", diff)
	}
	// Reserve lets go of its own cycle's state only; Score then reads the cycle state.
	p.forgetPreScore(first)
	if p.lastPreScore.Load() == nil {
		t.Error("the first cycle's Reserve let go of the second cycle's state")
	}
	p.forgetPreScore(second)
	if s := p.lastPreScore.Load(); s != nil {
		t.Errorf("the second cycle's state is still held after its Reserve: %+v", s)
	}
	if score, _ := p.Score(context.Background(), second, st.MakePod().Obj(), node); score != 30 {
		t.Errorf("second cycle after Reserve: score %d, want 30", score)
	}
}
