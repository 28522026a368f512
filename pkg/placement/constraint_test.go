package placement

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// namedTree is seed 001's tree with tier names leaf (1), spine (2) and core (3), plus a node
// in no HyperNode; the virtual root is tier 4.
func namedTree() *hypernode.Snapshot {
	nodes := map[string]labels.Set{"loose-0": {}}
	for i := range 8 {
		nodes[fmt.Sprintf("node-%d", i)] = labels.Set{}
	}
	return hypernode.Build(nodes, []*topologyv1alpha1.HyperNode{
		hntesting.MakeHyperNode("s0").Tier(1).TierName("leaf").Nodes("node-0", "node-1").Obj(),
		hntesting.MakeHyperNode("s1").Tier(1).TierName("leaf").Nodes("node-2", "node-3").Obj(),
		hntesting.MakeHyperNode("s2").Tier(1).TierName("leaf").Nodes("node-4", "node-5").Obj(),
		hntesting.MakeHyperNode("s3").Tier(1).TierName("leaf").Nodes("node-6", "node-7").Obj(),
		hntesting.MakeHyperNode("s4").Tier(2).TierName("spine").Children("s0", "s1").Obj(),
		hntesting.MakeHyperNode("s5").Tier(2).TierName("spine").Children("s2", "s3").Obj(),
		hntesting.MakeHyperNode("s6").Tier(3).TierName("core").Children("s4", "s5").Obj(),
	}).Snapshot()
}

// TestGangRequest: the job's tier and sub-groups are resolved in the tree the way both the
// scheduler and `kubectl hypernode explain` see them, with exact errors for constraints the
// tree cannot resolve.
func TestGangRequest(t *testing.T) {
	member := func(name string, rank int, node string) *v1.Pod {
		return st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedulingv1alpha1.PodGroupLabel, "job").
			Label("batch.kubernetes.io/job-completion-index", fmt.Sprint(rank)).Node(node).Obj()
	}
	members := []*v1.Pod{member("w-3", 3, ""), member("w-0", 0, "node-0"), member("w-2", 2, ""), member("w-1", 1, "")}
	gang := func(annotations map[string]string) podgroup.Gang {
		pg := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", Annotations: annotations},
			Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 4}}
		return podgroup.NewGang(pg, members)
	}
	const (
		topology  = podgroup.NetworkTopologyAnnotation
		subGroups = podgroup.SubGroupPolicyAnnotation
		pairs     = `[{"name":"pair","subGroupSize":2,"partitionSize":2%s}]`
	)
	tests := []struct {
		name        string
		annotations map[string]string
		want        Request
		wantErr     string
	}{
		{
			name: "plain gang: soft over the whole cluster",
			want: Request{Constraint: "soft topology", MaxTier: 4, Soft: true},
		},
		{
			name:        "hard by tier name",
			annotations: map[string]string{topology: `{"mode":"hard","highestTierName":"spine"}`},
			want:        Request{Constraint: "hard topology (tier<=spine)", MaxTier: 2},
		},
		{
			name:        "unknown tier name",
			annotations: map[string]string{topology: `{"mode":"hard","highestTierName":"pod"}`},
			wantErr:     `annotation hypernode.dev/network-topology: no HyperNode has tierName "pod" (known tierNames: core, leaf, spine)`,
		},
		{
			name: "sub-groups inherit the job's tier, or resolve their own",
			annotations: map[string]string{topology: `{"mode":"hard","highestTierAllowed":3}`,
				subGroups: fmt.Sprintf(pairs, `,"networkTopology":{"mode":"hard","highestTierName":"leaf"}`)},
			want: Request{Constraint: "job hard topology (tier<=3)", MaxTier: 3, SubGroups: []SubGroup{
				{ID: "pair-0", Policy: "pair", Constraint: "hard topology (tier<=leaf)", MaxTier: 1, Pending: []string{"w-1"}, Placed: []string{"node-0"}},
				{ID: "pair-1", Policy: "pair", Constraint: "hard topology (tier<=leaf)", MaxTier: 1, Pending: []string{"w-2", "w-3"}},
			}},
		},
		{
			name: "sub-group without a tier: anything inside the job's domain",
			annotations: map[string]string{topology: `{"mode":"hard","highestTierAllowed":2}`,
				subGroups: fmt.Sprintf(pairs, `,"networkTopology":{"mode":"soft"}`)},
			want: Request{Constraint: "job hard topology (tier<=2)", MaxTier: 2, SubGroups: []SubGroup{
				{ID: "pair-0", Policy: "pair", Constraint: "soft topology", MaxTier: 2, Soft: true, Pending: []string{"w-1"}, Placed: []string{"node-0"}},
				{ID: "pair-1", Policy: "pair", Constraint: "soft topology", MaxTier: 2, Soft: true, Pending: []string{"w-2", "w-3"}},
			}},
		},
		{
			name: "sub-group tier name above the job's tier",
			annotations: map[string]string{topology: `{"mode":"hard","highestTierAllowed":1}`,
				subGroups: fmt.Sprintf(pairs, `,"networkTopology":{"mode":"hard","highestTierName":"core"}`)},
			wantErr: `annotation hypernode.dev/subgroup-policy: policy "pair": its tier 3 is above the job's 1`,
		},
	}
	tree := namedTree()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := GangRequest(tree, gang(tc.annotations))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.want.Tree = tree
			tc.want.Pending = []string{"w-1", "w-2", "w-3"}
			tc.want.Placed = []string{"node-0"}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b *hypernode.Snapshot) bool { return a == b })); diff != "" {
				t.Errorf("request (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestLowestCommon(t *testing.T) {
	tree := namedTree()
	tests := []struct {
		nodes []string
		want  string
	}{
		{nodes: nil, want: ""},
		{nodes: []string{"node-0", "node-1"}, want: "s0"},
		{nodes: []string{"node-0", "node-3"}, want: "s4"},
		{nodes: []string{"node-1", "node-7", "node-2"}, want: "s6"},
		{nodes: []string{"node-0", "loose-0"}, want: hypernode.VirtualRootName},
	}
	for _, tc := range tests {
		if got := LowestCommon(tree, tc.nodes); got != tc.want {
			t.Errorf("LowestCommon(%v) = %q, want %q", tc.nodes, got, tc.want)
		}
	}
}
