package networktopology

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

func member(name string, hyperNode bool) topologyv1alpha1.MemberSpec {
	t := topologyv1alpha1.MemberTypeNode
	if hyperNode {
		t = topologyv1alpha1.MemberTypeHyperNode
	}
	return topologyv1alpha1.MemberSpec{Type: t, Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: name}}}
}

// seedTree is seed 000's spine/tor/rack tree: rack-0..3 (tier 1, two nodes each), tor-0/1
// (tier 2), spine-0 (tier 3); the virtual root is tier 4.
func seedTree() *hypernode.Snapshot {
	nodes := map[string]labels.Set{"outside": {}}
	var hns []*topologyv1alpha1.HyperNode
	for r := range 4 {
		a, b := fmt.Sprintf("node-%d", 2*r), fmt.Sprintf("node-%d", 2*r+1)
		nodes[a], nodes[b] = labels.Set{}, labels.Set{}
		hns = append(hns, &topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("rack-%d", r)},
			Spec: topologyv1alpha1.HyperNodeSpec{Tier: 1, Members: []topologyv1alpha1.MemberSpec{member(a, false), member(b, false)}}})
	}
	hns = append(hns,
		&topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: "tor-0"}, Spec: topologyv1alpha1.HyperNodeSpec{Tier: 2, Members: []topologyv1alpha1.MemberSpec{member("rack-0", true), member("rack-1", true)}}},
		&topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: "tor-1"}, Spec: topologyv1alpha1.HyperNodeSpec{Tier: 2, Members: []topologyv1alpha1.MemberSpec{member("rack-2", true), member("rack-3", true)}}},
		&topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: "spine-0"}, Spec: topologyv1alpha1.HyperNodeSpec{Tier: 3, Members: []topologyv1alpha1.MemberSpec{member("tor-0", true), member("tor-1", true)}}},
	)
	return hypernode.Build(nodes, hns).Snapshot()
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

// TestScoreNormal: seed 000 section 5.1 with fading 0.5: tier weights 1, 0.5, 0.25; a tier
// where no HyperNode holds the node scores 1.
func TestScoreNormal(t *testing.T) {
	p := &NetworkTopologyAware{}
	s := &preScoreState{
		tree:           seedTree(),
		hyperNodeScore: map[string]float64{"rack-0": 0.8, "tor-0": 0.4, "spine-0": 0.2, "rack-2": 0.1, "tor-1": 0.1},
		tiers:          []int{1, 2, 3},
		weights:        []float64{1, 0.5, 0.25},
	}
	want := map[string]int64{
		"node-0":  60,  // (0.8 + 0.5*0.4 + 0.25*0.2) / 1.75 = 0.6
		"node-4":  11,  // (0.1 + 0.05 + 0.05) / 1.75 = 0.1143
		"outside": 100, // no HyperNode at any tier
	}
	got := map[string]int64{}
	for node := range want {
		got[node] = p.scoreNormal(s, node)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want,+got):\n%s", diff)
	}
}

func newTestPlugin(t *testing.T) (*NetworkTopologyAware, *podgroup.Registry) {
	t.Helper()
	registry := podgroup.New()
	registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hard", Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: `{"highestTierAllowed":1}`}},
	})
	registry.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain"}})
	return &NetworkTopologyAware{registry: registry, args: config.NetworkTopologyAwareArgs{NormalPod: config.NormalPodArgs{Enable: true, Fading: 0.8}}}, registry
}

func gangPod(group string) *v1.Pod {
	return st.MakePod().Namespace("ns").Name("p").Label(schedulingv1alpha1.PodGroupLabel, group).Obj()
}

func TestFilterKeepsMembersInTheirLeaf(t *testing.T) {
	p, _ := newTestPlugin(t)
	state := framework.NewCycleState()
	node := func(name string) fwk.NodeInfo {
		ni := framework.NewNodeInfo()
		ni.SetNode(st.MakeNode().Name(name).Obj())
		return ni
	}
	pod := gangPod("hard")
	if s := p.Filter(context.Background(), state, pod, node("node-9")); !s.IsSuccess() {
		t.Errorf("without a plan (capacity simulation) Filter = %v, want Success", s)
	}
	state.Write(preFilterStateKey, &preFilterState{leaf: "rack-0", nodes: sets.New("node-0", "node-1")})
	if s := p.Filter(context.Background(), state, pod, node("node-1")); !s.IsSuccess() {
		t.Errorf("planned node: %v", s)
	}
	want := fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node is outside the HyperNode rack-0 planned for this gang member")
	if diff := cmp.Diff(want, p.Filter(context.Background(), state, pod, node("node-2"))); diff != "" {
		t.Errorf("node outside the plan (-want,+got):\n%s", diff)
	}
}

func TestSignPodAndHints(t *testing.T) {
	p, _ := newTestPlugin(t)
	tests := []struct {
		name         string
		pod          *v1.Pod
		wantSigned   bool
		wantRequeued fwk.QueueingHint
	}{
		{"member of a constrained gang", gangPod("hard"), false, fwk.Queue},
		{"member of a gang without constraint", gangPod("plain"), true, fwk.QueueSkip},
		{"pod outside any gang", st.MakePod().Namespace("ns").Name("solo").Obj(), true, fwk.QueueSkip},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, status := p.SignPod(context.Background(), tc.pod)
			if got := status.IsSuccess(); got != tc.wantSigned {
				t.Errorf("signed = %v (%v), want %v", got, status, tc.wantSigned)
			}
			hint, err := p.isConstrainedMember(klog.Background(), tc.pod, nil, nil)
			if err != nil || hint != tc.wantRequeued {
				t.Errorf("hint = %v, %v; want %v", hint, err, tc.wantRequeued)
			}
		})
	}
}

// TestSortByRank: the Job completion index orders members (so consecutive ranks fill a leaf
// together), then the hypernode.dev/rank annotation, then members without a rank by name.
func TestSortByRank(t *testing.T) {
	withIndex := func(name, index string) *v1.Pod {
		return st.MakePod().Name(name).Label("batch.kubernetes.io/job-completion-index", index).Obj()
	}
	withRank := func(name, rank string) *v1.Pod {
		return st.MakePod().Name(name).Annotation(podgroup.RankAnnotation, rank).Obj()
	}
	pods := []*v1.Pod{
		st.MakePod().Name("b-unranked").Obj(),
		withIndex("w-10", "10"),
		withRank("r-3", "3"),
		withIndex("w-2", "2"),
		st.MakePod().Name("a-unranked").Obj(),
		withRank("bad", "x"),
	}
	sortByRank(pods)
	var got []string
	for _, p := range pods {
		got = append(got, p.Name)
	}
	if diff := cmp.Diff([]string{"w-2", "r-3", "w-10", "a-unranked", "b-unranked", "bad"}, got); diff != "" {
		t.Errorf("order (-want,+got):\n%s", diff)
	}
}
