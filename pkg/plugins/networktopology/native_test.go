package networktopology

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/plugintesting"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// nativeEnv is a two-spine tree (sp0: l0 {n0,n1}, l1 {n2,n3}; sp1: l2 {n4,n5}, l3 {n6,n7}) of
// 2-CPU nodes, each also labelled example.com/rack (rack-a: n0-n3, rack-b: n4-n7), in a
// framework running the default profile plus NetworkTopologyAware with GenericWorkload on.
type nativeEnv struct {
	ctx    context.Context
	plugin *NetworkTopologyAware
	// pgState is the pod-group cycle state of the last generate.
	pgState *framework.CycleState
}

// newNativeEnv builds the env with running pods (placed by their spec.nodeName) and native
// PodGroups known to the snapshot.
func newNativeEnv(t *testing.T, running []*v1.Pod, groups ...*schedulingv1beta1.PodGroup) *nativeEnv {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.GenericWorkload, true)
	metrics.Register()
	logger, ctx := ktesting.NewTestContext(t)
	ctx = klog.NewContext(ctx, logger)
	cache := hypernode.NewCache(logger, nil)
	var nodes []*v1.Node
	for i := range 8 {
		rack := "rack-a"
		if i >= 4 {
			rack = "rack-b"
		}
		n := st.MakeNode().Name(fmt.Sprintf("n%d", i)).Label("example.com/rack", rack).
			Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "2", v1.ResourceMemory: "8Gi", v1.ResourcePods: "10"}).Obj()
		nodes = append(nodes, n)
		cache.SetNode(n)
	}
	for l := range 4 {
		cache.SetHyperNode(hntesting.MakeHyperNode(fmt.Sprintf("l%d", l)).Tier(1).Nodes(fmt.Sprintf("n%d", 2*l), fmt.Sprintf("n%d", 2*l+1)).Obj())
	}
	cache.SetHyperNode(hntesting.MakeHyperNode("sp0").Tier(2).Children("l0", "l1").Obj())
	cache.SetHyperNode(hntesting.MakeHyperNode("sp1").Tier(2).Children("l2", "l3").Obj())
	e := &nativeEnv{ctx: ctx}
	snapshot := internalcache.NewTestSnapshotWithPodGroups(running, nodes, groups)
	// DefaultPreemption needs the scheduler's pod-group queue with GenericWorkload on.
	with := plugintesting.LoadProfiles(t, `profiles:
- schedulerName: native
  plugins:
    multiPoint:
      enabled:
      - name: NetworkTopologyAware
      disabled:
      - name: DynamicResources
      - name: DefaultPreemption
`)[0]
	reg := plugins.NewInTreeRegistry()
	reg[Name] = func(_ context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		e.plugin = newPlugin(*obj.(*config.NetworkTopologyAwareArgs), h, cache, gangstate.New())
		return e.plugin, nil
	}
	if _, err := frameworkruntime.NewFramework(ctx, reg, &with, testFrameworkOptions(snapshot)...); err != nil {
		t.Fatal(err)
	}
	return e
}

// nativeGroup is a native PodGroup of a gang of minCount with our annotation (constraint ""
// for none) or a topology key.
func nativeGroup(name string, minCount int32, constraint, topologyKey string) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}}}
	if constraint != "" {
		pg.Annotations = map[string]string{podgroup.NetworkTopologyAnnotation: constraint}
	}
	if topologyKey != "" {
		pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
			Topology: []schedulingv1beta1.TopologyConstraint{{Key: topologyKey}}}
	}
	return pg
}

// nativePod is a 1-CPU member of a native pod group, on node when it is not "".
func nativePod(group string, i int, node string) *v1.Pod {
	name := fmt.Sprintf("%s-%d", group, i)
	p := st.MakePod().Namespace("ns").Name(name).UID(name).Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Node(node).Obj()
	p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	return p
}

// runningOn is a plain pod of cpu CPUs on node.
func runningOn(name, node, cpu string) *v1.Pod {
	return st.MakePod().Namespace("other").Name(name).UID(name).Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu}).Node(node).Obj()
}

// generated is what GeneratePlacements returns for the group, as "name: nodes" lines.
func (e *nativeEnv) generate(t *testing.T, pg *schedulingv1beta1.PodGroup, pending []*v1.Pod) ([]string, *fwk.Status) {
	t.Helper()
	pgi := &framework.PodGroupInfo{Namespace: pg.Namespace, Name: pg.Name, Type: fwk.PodGroupKeyType, PodGroup: pg, UnscheduledPods: pending}
	all, err := e.plugin.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	e.pgState = framework.NewCycleState()
	result, status := e.plugin.GeneratePlacements(e.ctx, e.pgState, pgi, &fwk.Placement{Nodes: all})
	if !status.IsSuccess() {
		return nil, status
	}
	var out []string
	for _, p := range result.Placements {
		var nodes []string
		for _, ni := range p.Nodes {
			nodes = append(nodes, ni.Node().Name)
		}
		sort.Strings(nodes)
		out = append(out, fmt.Sprintf("%s: %v", p.Name, nodes))
	}
	return out, nil
}

func pendingOf(group string, n int) []*v1.Pod {
	var out []*v1.Pod
	for i := range n {
		out = append(out, nativePod(group, i, ""))
	}
	return out
}

func TestGeneratePlacements(t *testing.T) {
	// One CPU taken on n0: l0 has 3 free, sp0 7, every other leaf 4 and sp1 8.
	busy := runningOn("busy", "n0", "1")
	tests := []struct {
		name    string
		group   *schedulingv1beta1.PodGroup
		placed  []*v1.Pod
		pending []*v1.Pod
		retry   bool
		want    []string
		// wantErr is the whole refusal; wantCode its code (Unschedulable lets preemption try).
		wantErr  string
		wantCode fwk.Code
		// defaultTopology is the scheduler's defaultNetworkTopology (nil: none).
		defaultTopology *podgroup.NetworkTopology
	}{{
		name:            "no constraint of its own: the scheduler's default (hard tier 1) refuses six",
		group:           nativeGroup("g", 6, "", ""),
		pending:         pendingOf("g", 6),
		defaultTopology: &podgroup.NetworkTopology{Mode: podgroup.ModeHard, HighestTierAllowed: ptr.To(1)},
		wantErr:         "pod group ns/g: hard topology (tier<=1): no HyperNode can host 6 pods; tier 1: l1 4/6, l2 4/6 (+2 more)",
		wantCode:        fwk.Unschedulable,
	}, {
		name:            "a tier label key overrides the default",
		group:           nativeGroup("g", 6, "", "hypernode.dev/tier-2"),
		pending:         pendingOf("g", 6),
		defaultTopology: &podgroup.NetworkTopology{Mode: podgroup.ModeHard, HighestTierAllowed: ptr.To(1)},
		want:            []string{"sp0/leaves=[l0 l1]: [n0 n1 n2 n3]"},
	}, {
		name:    "hard tier 1: the fullest leaf that holds it (BinPack)",
		group:   nativeGroup("g", 3, `{"mode":"hard","highestTierAllowed":1}`, ""),
		pending: pendingOf("g", 3),
		want:    []string{"l0/leaves=[l0]: [n0 n1]"},
	}, {
		name:    "the tier label key means hard at that tier",
		group:   nativeGroup("g", 6, "", "hypernode.dev/tier-2"),
		pending: pendingOf("g", 6),
		want:    []string{"sp0/leaves=[l0 l1]: [n0 n1 n2 n3]"},
	}, {
		name:    "soft: the lowest tier first, the fewest leaves inside it",
		group:   nativeGroup("g", 4, `{"mode":"soft"}`, ""),
		pending: pendingOf("g", 4),
		want:    []string{"l1/leaves=[l1]: [n2 n3]"},
	}, {
		name:    "soft and bigger than any spine: the whole cluster, over the fewest leaves",
		group:   nativeGroup("g", 10, `{"mode":"soft"}`, ""),
		pending: pendingOf("g", 10),
		want:    []string{"<cluster>/leaves=[l0 l1 l2]: [n0 n1 n2 n3 n4 n5]"},
	}, {
		name:    "an already-scheduled member pins the domain",
		group:   nativeGroup("g", 4, `{"mode":"hard","highestTierAllowed":2}`, ""),
		placed:  []*v1.Pod{nativePod("g", 0, "n6")},
		pending: []*v1.Pod{nativePod("g", 1, ""), nativePod("g", 2, ""), nativePod("g", 3, "")},
		want:    []string{"l3/leaves=[l3]: [n6 n7]"},
	}, {
		name:    "a retry adds the other allowed domains, tightest first",
		group:   nativeGroup("g", 3, `{"mode":"hard","highestTierAllowed":1}`, ""),
		pending: pendingOf("g", 3),
		retry:   true,
		want:    []string{"l0/leaves=[l0]: [n0 n1]", "l1: [n2 n3]", "l2: [n4 n5]", "l3: [n6 n7]"},
	}, {
		name:    "a foreign topology key: its domains by bound, tightest first",
		group:   nativeGroup("g", 3, "", "example.com/rack"),
		pending: pendingOf("g", 3),
		want:    []string{"example.com/rack=rack-a: [n0 n1 n2 n3]", "example.com/rack=rack-b: [n4 n5 n6 n7]"},
	}, {
		name:    "a foreign key with a placed member: its domain only",
		group:   nativeGroup("g", 3, "", "example.com/rack"),
		placed:  []*v1.Pod{nativePod("g", 0, "n5")},
		pending: []*v1.Pod{nativePod("g", 1, ""), nativePod("g", 2, "")},
		want:    []string{"example.com/rack=rack-b: [n4 n5 n6 n7]"},
	}, {
		name:     "too big for any allowed domain",
		group:    nativeGroup("g", 5, `{"mode":"hard","highestTierAllowed":1}`, ""),
		pending:  pendingOf("g", 5),
		wantErr:  "pod group ns/g: hard topology (tier<=1): no HyperNode can host 5 pods; tier 1: l1 4/5, l2 4/5 (+2 more)",
		wantCode: fwk.Unschedulable,
	}, {
		name:     "an invalid annotation",
		group:    nativeGroup("g", 2, `{"mode":"hard"}`, ""),
		pending:  pendingOf("g", 2),
		wantErr:  "pod group ns/g: annotation hypernode.dev/network-topology: mode hard needs highestTierAllowed or highestTierName",
		wantCode: fwk.UnschedulableAndUnresolvable,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newNativeEnv(t, append([]*v1.Pod{busy}, tc.placed...), tc.group)
			if err := e.plugin.registry.SetDefaultTopology(tc.defaultTopology); err != nil {
				t.Fatal(err)
			}
			if tc.retry {
				if _, status := e.generate(t, tc.group, tc.pending); !status.IsSuccess() {
					t.Fatalf("first attempt: %v", status)
				}
			}
			got, status := e.generate(t, tc.group, tc.pending)
			if tc.wantErr != "" {
				if status.IsSuccess() || status.Message() != tc.wantErr || status.Code() != tc.wantCode {
					t.Fatalf("status %v, want %v %q", status, tc.wantCode, tc.wantErr)
				}
				return
			}
			if !status.IsSuccess() {
				t.Fatalf("status %v", status)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("placements (-want +got):\n%s", diff)
			}
		})
	}
}

// assigned is a proposed assignment of a pod to a node.
type assigned struct{ pod, node string }

func (a assigned) GetPod() *v1.Pod               { return st.MakePod().Name(a.pod).Obj() }
func (a assigned) GetPodInfo() fwk.PodInfo       { return nil }
func (a assigned) GetNodeName() string           { return a.node }
func (a assigned) GetCycleState() fwk.CycleState { return nil }

func TestScorePlacement(t *testing.T) {
	e := newNativeEnv(t, nil)
	tree := e.plugin.cache.Snapshot()
	spine := &fwk.Placement{Name: "sp0"}
	oneLeaf := &fwk.Placement{Name: "l0/leaves=[l0]"}
	twoLeaves := &fwk.Placement{Name: "l1"}
	unknown := &fwk.Placement{Name: "not generated"}
	pgState := framework.NewCycleState()
	pgState.Write(nativeStateKey, &generated{tree: tree, rank: map[*fwk.Placement]int{oneLeaf: 0, spine: 1, twoLeaves: 2}})
	pgi := &framework.PodGroupInfo{Namespace: "ns", Name: "g", Type: fwk.PodGroupKeyType}
	// The spine placement was generated second but its assignments spread over two spines;
	// the one the plugin did not generate lands like the first.
	assignments := map[*fwk.Placement][]fwk.ProposedAssignment{
		spine:     {assigned{"a", "n0"}, assigned{"b", "n4"}},
		oneLeaf:   {assigned{"a", "n0"}, assigned{"b", "n1"}},
		twoLeaves: {assigned{"a", "n0"}, assigned{"b", "n2"}},
		unknown:   {assigned{"a", "n2"}, assigned{"b", "n3"}},
	}
	var scores []fwk.PlacementScore
	for _, p := range []*fwk.Placement{spine, oneLeaf, twoLeaves, unknown} {
		state := framework.NewCycleState()
		state.SetPodGroupSchedulingCycle(pgState)
		s, status := e.plugin.ScorePlacement(e.ctx, state, pgi, &fwk.PodGroupAssignments{Placement: p, ProposedAssignments: assignments[p]})
		if !status.IsSuccess() {
			t.Fatalf("ScorePlacement(%s): %v", p.Name, status)
		}
		scores = append(scores, fwk.PlacementScore{Placement: p, Score: s})
	}
	if status := e.plugin.NormalizePlacementScore(e.ctx, pgState, pgi, scores); !status.IsSuccess() {
		t.Fatal(status)
	}
	got := map[string]int64{}
	for _, s := range scores {
		got[s.Placement.Name] = s.Score
	}
	// Tier of where the assignments land first, then leaves, then generation order.
	want := map[string]int64{"l0/leaves=[l0]": 100, "not generated": 66, "l1": 33, "sp0": 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
}

// TestNativeMembersNarrowedToTheirPlannedNodes: after a first attempt's generation, each
// member's PreFilter in the pod-group cycle narrows it to the node the plan gives it; after a
// retry's (several placements) nobody is narrowed; outside a pod-group cycle neither.
func TestNativeMembersNarrowedToTheirPlannedNodes(t *testing.T) {
	group := nativeGroup("g", 2, `{"mode":"hard","highestTierAllowed":1}`, "")
	e := newNativeEnv(t, []*v1.Pod{runningOn("busy", "n0", "1")}, group)
	pending := pendingOf("g", 2)
	narrowed := func() []string {
		var out []string
		for _, pod := range pending {
			state := framework.NewCycleState()
			state.SetPodGroupSchedulingCycle(e.pgState)
			result, _ := e.plugin.PreFilter(e.ctx, state, pod, nil)
			if result == nil || result.AllNodes() {
				out = append(out, pod.Name+": all")
				continue
			}
			out = append(out, fmt.Sprintf("%s: %v", pod.Name, sets.List(result.NodeNames)))
		}
		return out
	}
	if _, status := e.generate(t, group, pending); !status.IsSuccess() {
		t.Fatal(status)
	}
	// l0 is the fullest leaf that holds two: one fits on n0 next to busy, one on n1.
	if diff := cmp.Diff([]string{"g-0: [n0]", "g-1: [n1]"}, narrowed()); diff != "" {
		t.Errorf("first attempt (-want +got):\n%s", diff)
	}
	if _, status := e.generate(t, group, pending); !status.IsSuccess() {
		t.Fatal(status)
	}
	if diff := cmp.Diff([]string{"g-0: all", "g-1: all"}, narrowed()); diff != "" {
		t.Errorf("retry (-want +got):\n%s", diff)
	}
	// Once the group placed some members, the others' next generation (other pending
	// members) is a first attempt again.
	if _, status := e.generate(t, group, pending[:1]); !status.IsSuccess() {
		t.Fatal(status)
	}
	if diff := cmp.Diff([]string{"g-0: [n0]", "g-1: all"}, narrowed()); diff != "" {
		t.Errorf("after the pending members changed (-want +got):\n%s", diff)
	}
	if got, _ := nativeNode(framework.NewCycleState(), pending[0]); got != "" {
		t.Errorf("outside a pod-group cycle: narrowed to %q", got)
	}
}

// TestNativeSiblingsNominationsAreNotTakenRoom: the nominations of a native group's own
// members (a preemption's) hold room for the group, not against it; those of another group,
// native or not, of the same name count.
func TestNativeSiblingsNominationsAreNotTakenRoom(t *testing.T) {
	e := newNativeEnv(t, nil)
	pod := nativePod("g", 0, "")
	classic := st.MakePod().Namespace("ns").Name("c").UID("c").Label("scheduling.x-k8s.io/pod-group", "g").Obj()
	for _, other := range []*v1.Pod{nativePod("g", 1, ""), nativePod("h", 0, ""), classic} {
		pi, err := framework.NewPodInfo(other)
		if err != nil {
			t.Fatal(err)
		}
		e.plugin.handle.AddNominatedPod(klog.Background(), pi, &fwk.NominatingInfo{NominatedNodeName: "n1", NominatingMode: fwk.ModeOverride})
	}
	ni, err := e.plugin.handle.SnapshotSharedLister().NodeInfos().Get("n1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, pi := range e.plugin.othersNominated(ni, pod) {
		got = append(got, pi.GetPod().Name)
	}
	sort.Strings(got)
	if diff := cmp.Diff([]string{"c", "h-0"}, got); diff != "" {
		t.Errorf("nominations counted against g-0 (-want +got):\n%s", diff)
	}
}
