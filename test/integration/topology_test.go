package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// topoEnv is a cluster of nodes and HyperNodes plus a namespace, for topology tests.
type topoEnv struct {
	*gangEnv
}

// newTopoEnv creates nodes (name -> cpu) with memory 32Gi and the given extra resources,
// and HyperNodes; everything is removed when the test ends.
func newTopoEnv(t *testing.T, nodes map[string]string, extra v1.ResourceList, hyperNodes ...*topologyv1alpha1.HyperNode) *topoEnv {
	t.Helper()
	c := newClients(t)
	ns := testNamespace(t, c)
	ctx := context.Background()
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := util.CreateNodes(ctx, c.kube, util.Node(n, nodes[n], "32Gi", nil, extra)); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if err := util.DeleteAllNodes(ctx, c.kube); err != nil {
			t.Error(err)
		}
	})
	for _, hn := range hyperNodes {
		createHyperNode(t, c, hn)
	}
	return &topoEnv{gangEnv: &gangEnv{t: t, c: c, ns: ns}}
}

// gang creates a PodGroup with the topology annotation (none if "") and its members, each
// requesting the given resources and changed by mutate before it is created.
func (e *topoEnv) gang(name string, size int, annotation string, requests v1.ResourceList, mutate ...func(*v1.Pod)) []string {
	e.t.Helper()
	var annotations map[string]string
	if annotation != "" {
		annotations = map[string]string{podgroup.NetworkTopologyAnnotation: annotation}
	}
	return e.gangOf(util.PodGroup(e.ns, name, int32(size), annotations), size, requests, mutate...)
}

// gangOf creates the PodGroup pg and size members of it.
func (e *topoEnv) gangOf(pg *schedulingv1alpha1.PodGroup, size int, requests v1.ResourceList, mutate ...func(*v1.Pod)) []string {
	e.t.Helper()
	if err := util.CreatePodGroup(context.Background(), e.c.scheduling, pg); err != nil {
		e.t.Fatal(err)
	}
	pods := util.GangPods(e.ns, pg.Name, plugins.SchedulerName, "", size)
	for _, p := range pods {
		p.Spec.Containers[0].Resources.Requests = requests
		p.Spec.Containers[0].Resources.Limits = requests
		for _, m := range mutate {
			m(p)
		}
	}
	names, err := util.CreatePods(context.Background(), e.c.kube, pods...)
	if err != nil {
		e.t.Fatal(err)
	}
	return names
}

// deletePodNow deletes a pod without a grace period and waits until it is gone, so that a pod
// of the same name can be created again.
func (e *topoEnv) deletePodNow(name string) {
	e.t.Helper()
	ctx := context.Background()
	old, err := e.c.kube.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.c.kube.CoreV1().Pods(e.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		e.t.Fatal(err)
	}
	if err := util.WaitForPodGone(ctx, e.c.kube, e.ns, name, old.UID, boundTimeout); err != nil {
		e.t.Fatal(err)
	}
}

// filler binds a pod that uses cpu directly to a node, without a scheduler.
func (e *topoEnv) filler(node, cpu string) {
	e.t.Helper()
	pod := util.Pod(e.ns, "filler-"+node, "no-scheduler", cpu, nil)
	pod.Spec.NodeName = node
	if _, err := util.CreatePods(context.Background(), e.c.kube, pod); err != nil {
		e.t.Fatal(err)
	}
}

func cpu(q string) v1.ResourceList { return v1.ResourceList{v1.ResourceCPU: resource.MustParse(q)} }

func nodesWithCPU(cpu string, names ...string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		out[n] = cpu
	}
	return out
}

func seedHyperNodes(t *testing.T) []*topologyv1alpha1.HyperNode {
	t.Helper()
	hns, err := util.ReadHyperNodes(filepath.Join(util.RepoRoot(), "manifests", "examples", "seed-001-hypernodes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return hns
}

// nodeSet returns the distinct nodes of a placement.
func nodeSet(placements map[string]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range placements {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func within(placements map[string]string, allowed ...string) bool {
	set := map[string]bool{}
	for _, a := range allowed {
		set[a] = true
	}
	for _, n := range placements {
		if !set[n] {
			return false
		}
	}
	return true
}

// Test 1: seed 001, eight 1-CPU nodes. A hard tier-2 gang of three lands in one spine; a hard
// tier-1 gang of three cannot fit a two-node leaf and stays pending with the explanation.
func TestTopologySeed001(t *testing.T) {
	e := newTopoEnv(t, nodesWithCPU("1", "node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"), nil, seedHyperNodes(t)...)
	startScheduler(t, nil)

	names := e.gang("tier2", 3, `{"mode":"hard","highestTierAllowed":2}`, cpu("1"))
	got := e.waitBound(names)
	if !within(got, "node-0", "node-1", "node-2", "node-3") && !within(got, "node-4", "node-5", "node-6", "node-7") {
		t.Errorf("tier-2 gang spans both spines: %v", got)
	}

	pending := e.gang("tier1", 3, `{"mode":"hard","highestTierAllowed":1}`, cpu("1"))
	const want = "hard topology (tier<=1): no HyperNode can host 3 pods; tier 1: "
	msg := e.waitCondition(pending[0], v1.PodReasonUnschedulable, want)
	// Which two leaves still have 2 free nodes depends on where the first gang went; each
	// leaf can hold at most 2 of the 3 pods.
	if !strings.Contains(msg, "2/3, ") || !strings.Contains(msg, " (+") {
		t.Errorf("explanation %q does not list the best leaves as 2/3 and the rest", msg)
	}
	for _, n := range pending {
		if _, ok := e.bound()[n]; ok {
			t.Errorf("%s bound although the gang cannot fit a leaf", n)
		}
	}
}

// Test 1, exact message: with all leaves free the explanation is fully determined.
func TestTopologyExplanationExact(t *testing.T) {
	e := newTopoEnv(t, nodesWithCPU("1", "node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"), nil, seedHyperNodes(t)...)
	startScheduler(t, nil)
	pending := e.gang("tier1", 3, `{"mode":"hard","highestTierAllowed":1}`, cpu("1"))
	e.waitCondition(pending[0], v1.PodReasonUnschedulable,
		"hard topology (tier<=1): no HyperNode can host 3 pods; tier 1: s0 2/3, s1 2/3 (+2 more)")
	e.expectNoneBound()
	pg, err := e.c.scheduling.SchedulingV1alpha1().PodGroups(e.ns).Get(context.Background(), "tier1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitForObjectEvent(t, e.c, e.ns, "PodGroup", pg.UID, "TopologyUnsatisfiable", plugins.SchedulerName,
		"hard topology (tier<=1): no HyperNode can host 3 pods; tier 1: s0 2/3, s1 2/3 (+2 more)")
}

// Test 2: seed 004 example 1, four 8-CPU pods hard at the spine tier: both strategies choose
// spine-1 (node-5..node-8), the exact fit.
func TestTopologySeed004BothStrategies(t *testing.T) {
	for _, strategy := range []string{"BinPack", "LeastWaste"} {
		t.Run(strategy, func(t *testing.T) {
			e := newTopoEnv(t, nodesWithCPU("8", seed004Nodes()...), nil, util.Seed004Tree()...)
			startScheduler(t, map[string]map[string]any{"NetworkTopologyAware": {"candidateScoringStrategy": strategy}})
			got := e.waitBound(e.gang("train", 4, `{"mode":"hard","highestTierAllowed":2}`, cpu("8")))
			if diff := cmp.Diff([]string{"node-5", "node-6", "node-7", "node-8"}, nodeSet(got)); diff != "" {
				t.Errorf("nodes (-want,+got):\n%s", diff)
			}
		})
	}
}

// Test 3: seed 002 section 15: ToRs of two 4-GPU nodes under two spines; eight 1-GPU pods,
// hard at tier 2, all land in one ToR (tier 1 is tried first).
func TestTopologySeed002OneToR(t *testing.T) {
	gpus := v1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}
	nodes := nodesWithCPU("8", "node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7")
	tor := func(name string, a, b string) *topologyv1alpha1.HyperNode {
		return hntesting.MakeHyperNode(name).Tier(1).Nodes(a, b).Obj()
	}
	e := newTopoEnv(t, nodes, gpus,
		tor("tor-0", "node-0", "node-1"), tor("tor-1", "node-2", "node-3"),
		tor("tor-2", "node-4", "node-5"), tor("tor-3", "node-6", "node-7"),
		hntesting.MakeHyperNode("spine-0").Tier(2).Children("tor-0", "tor-1").Obj(),
		hntesting.MakeHyperNode("spine-1").Tier(2).Children("tor-2", "tor-3").Obj(),
	)
	startScheduler(t, nil)
	got := e.waitBound(e.gang("train", 8, `{"mode":"hard","highestTierAllowed":2}`, v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}))
	set := nodeSet(got)
	pairs := [][]string{{"node-0", "node-1"}, {"node-2", "node-3"}, {"node-4", "node-5"}, {"node-6", "node-7"}}
	ok := false
	for _, p := range pairs {
		if cmp.Equal(set, p) {
			ok = true
		}
	}
	if !ok {
		t.Errorf("8 pods not in one ToR: %v", got)
	}
}

// Test 4: soft mode: a gang that fits no leaf (tier 1) still runs, over the fewest leaves.
func TestTopologySoftSpansFewestLeaves(t *testing.T) {
	e := newTopoEnv(t, nodesWithCPU("1", "node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"), nil, seedHyperNodes(t)...)
	startScheduler(t, nil)
	got := e.waitBound(e.gang("train", 5, `{"mode":"soft","highestTierAllowed":1}`, cpu("1")))
	leaves := map[string]bool{}
	leafOf := map[string]string{"node-0": "s0", "node-1": "s0", "node-2": "s1", "node-3": "s1", "node-4": "s2", "node-5": "s2", "node-6": "s3", "node-7": "s3"}
	for _, n := range got {
		leaves[leafOf[n]] = true
	}
	if len(got) != 5 || len(leaves) != 3 {
		t.Errorf("5 pods over %d leaves (want 3 = ceil(5/2)): %v", len(leaves), got)
	}
}

// Test 5: fragmentation: a leaf whose free CPU adds up but where no single node fits a pod is
// not chosen, although bin-packing by summed resources would prefer it.
func TestTopologyFragmentationIsNotCapacity(t *testing.T) {
	e := newTopoEnv(t, nodesWithCPU("2", "a-0", "a-1", "a-2", "b-0", "b-1"), nil,
		hntesting.MakeHyperNode("leaf-a").Tier(1).Nodes("a-0", "a-1", "a-2").Obj(),
		hntesting.MakeHyperNode("leaf-b").Tier(1).Nodes("b-0", "b-1").Obj(),
	)
	for _, n := range []string{"a-0", "a-1", "a-2"} {
		e.filler(n, "1") // leaf-a: 3 CPUs free in total, 1 per node
	}
	startScheduler(t, nil)
	got := e.waitBound(e.gang("train", 1, `{"mode":"hard","highestTierAllowed":1}`, cpu("2")))
	if !within(got, "b-0", "b-1") {
		t.Errorf("placed in the fragmented leaf: %v", got)
	}
}

// Test 6: two hard gangs submitted together, each fitting one leaf: the ledger keeps their
// plans apart, so each ends in its own leaf and both bind.
func TestTopologyTwoGangsOwnLeaves(t *testing.T) {
	e := newTopoEnv(t, nodesWithCPU("1", "node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"), nil, seedHyperNodes(t)...)
	startScheduler(t, nil)
	a := e.gang("a", 2, `{"mode":"hard","highestTierAllowed":1}`, cpu("1"))
	b := e.gang("b", 2, `{"mode":"hard","highestTierAllowed":1}`, cpu("1"))
	gotA, gotB := e.waitBound(a), e.waitBound(b)
	leafOf := map[string]string{"node-0": "s0", "node-1": "s0", "node-2": "s1", "node-3": "s1", "node-4": "s2", "node-5": "s2", "node-6": "s3", "node-7": "s3"}
	leaves := func(p map[string]string) []string {
		set := map[string]bool{}
		for _, n := range p {
			set[leafOf[n]] = true
		}
		var out []string
		for l := range set {
			out = append(out, l)
		}
		sort.Strings(out)
		return out
	}
	if la, lb := leaves(gotA), leaves(gotB); len(la) != 1 || len(lb) != 1 || la[0] == lb[0] {
		t.Errorf("gang a in %v, gang b in %v; want one leaf each, different", la, lb)
	}
}

// Test 7: a running hard tier-1 gang loses a pod; the replacement returns to the gang's leaf
// although other leaves are emptier, also after a scheduler restart (no stored state).
func TestTopologyReplacementReturnsToLeaf(t *testing.T) {
	e := newTopoEnv(t, nodesWithCPU("2", "node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"), nil, seedHyperNodes(t)...)
	config, err := util.SchedulerConfig(controlPlane, nil)
	if err != nil {
		t.Fatal(err)
	}
	sched, err := util.StartScheduler(context.Background(), config)
	if err != nil {
		t.Fatal(err)
	}
	names := e.gang("train", 2, `{"mode":"hard","highestTierAllowed":1}`, cpu("1"))
	first := e.waitBound(names)
	leafOf := map[string]string{"node-0": "s0", "node-1": "s0", "node-2": "s1", "node-3": "s1", "node-4": "s2", "node-5": "s2", "node-6": "s3", "node-7": "s3"}
	leaf := leafOf[first[names[0]]]
	if leafOf[first[names[1]]] != leaf {
		t.Fatalf("gang not in one leaf: %v", first)
	}
	// Make another leaf the one a fresh plan would choose: BinPack prefers it once its
	// nodes are half used, so only the placed member can bring the replacement back.
	other := map[string][]string{"s0": {"node-2", "node-3"}, "s1": {"node-0", "node-1"}, "s2": {"node-0", "node-1"}, "s3": {"node-0", "node-1"}}[leaf]
	for _, n := range other {
		e.filler(n, "1")
	}

	replace := func(name string) string {
		t.Helper()
		ctx := context.Background()
		e.deletePodNow(name)
		pod := util.GangPods(e.ns, "train", plugins.SchedulerName, "1", 2)[0]
		pod.Name = name
		if _, err := util.CreatePods(ctx, e.c.kube, pod); err != nil {
			t.Fatal(err)
		}
		return e.waitBound([]string{name})[name]
	}
	if node := replace(names[0]); leafOf[node] != leaf {
		t.Errorf("replacement went to %s (leaf %s), want leaf %s", node, leafOf[node], leaf)
	}
	if err := sched.Stop(); err != nil {
		t.Fatal(err)
	}
	second, err := util.StartScheduler(context.Background(), config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Stop() })
	if node := replace(names[1]); leafOf[node] != leaf {
		t.Errorf("after a restart the replacement went to %s (leaf %s), want leaf %s", node, leafOf[node], leaf)
	}
}

// Test 8: every bad annotation leaves the members pending with a message that names the
// annotation and the problem.
func TestTopologyBadAnnotations(t *testing.T) {
	hns := seedHyperNodes(t)
	for _, hn := range hns {
		switch hn.Name {
		case "s0", "s1", "s2", "s3", "s6":
			hn.Spec.TierName = "leaf" // s6 makes "leaf" ambiguous
		case "s4", "s5":
			hn.Spec.TierName = "spine"
		}
	}
	e := newTopoEnv(t, nodesWithCPU("1", "node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"), nil, hns...)
	startScheduler(t, nil)
	const a = "annotation hypernode.dev/network-topology: "
	tests := []struct {
		group, annotation, want string
	}{
		{"json", `{"mode":"hard",`, a + "is not a valid constraint: unexpected EOF"},
		{"unknown", `{"mode":"hard","highestTier":2}`, a + `is not a valid constraint: json: unknown field "highestTier"`},
		{"mode", `{"mode":"firm","highestTierAllowed":2}`, a + `mode "firm" is not supported: use "hard" or "soft"`},
		{"tier", `{"highestTierAllowed":0}`, a + "highestTierAllowed must be at least 1, got 0"},
		{"notier", `{"mode":"hard"}`, a + "mode hard needs highestTierAllowed or highestTierName"},
		{"both", `{"highestTierAllowed":2,"highestTierName":"spine"}`, a + "set only one of highestTierAllowed and highestTierName"},
		{"unknownname", `{"highestTierName":"core"}`, a + `no HyperNode has tierName "core" (known tierNames: leaf, spine)`},
		{"ambiguous", `{"highestTierName":"leaf"}`, a + `tierName "leaf" is ambiguous: HyperNodes of tiers [1 3] carry it`},
	}
	var all []string
	for _, tc := range tests {
		all = append(all, e.gang(tc.group, 1, tc.annotation, cpu("1"))...)
	}
	for i, tc := range tests {
		e.waitCondition(all[i], v1.PodReasonUnschedulable, fmt.Sprintf("PodGroup %s/%s: %s", e.ns, tc.group, tc.want))
	}
	e.expectNoneBound()
	pg, err := e.c.scheduling.SchedulingV1alpha1().PodGroups(e.ns).Get(context.Background(), "mode", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitForObjectEvent(t, e.c, e.ns, "PodGroup", pg.UID, "InvalidTopologyConstraint", plugins.SchedulerName,
		fmt.Sprintf("PodGroup %s/mode: %s", e.ns, tests[2].want))
	// A name that resolves works.
	e.waitBound(e.gang("spine", 3, `{"highestTierName":"spine"}`, cpu("1")))
}

// Test 9: pods without a topology constraint prefer the fuller leaf (seed 000 section 5.1).
func TestTopologyNormalPodPrefersFullerLeaf(t *testing.T) {
	e := newTopoEnv(t, nodesWithCPU("4", "node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"), nil, seedHyperNodes(t)...)
	e.filler("node-5", "2") // s2 (node-4, node-5) is the fuller leaf
	startScheduler(t, nil)
	pod := util.Pod(e.ns, "web", plugins.SchedulerName, "1", nil)
	if _, err := util.CreatePods(context.Background(), e.c.kube, pod); err != nil {
		t.Fatal(err)
	}
	got := e.waitBound([]string{"web"})
	if !within(got, "node-4", "node-5") {
		t.Errorf("normal pod placed on %v, want the fuller leaf s2 (node-4, node-5)", got)
	}
	// While the scheduler runs, it fills node-1 (a pod pinned there): s0 is now 4/8 used, s2
	// 3/8, so the next pod goes to node-0. Scores that missed the new pod would still say s2.
	pinned := util.Pod(e.ns, "pinned", plugins.SchedulerName, "4", nil)
	pinned.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"node-1"}}}}}}}}
	if _, err := util.CreatePods(context.Background(), e.c.kube, pinned); err != nil {
		t.Fatal(err)
	}
	e.waitBound([]string{"pinned"})
	next := util.Pod(e.ns, "web-2", plugins.SchedulerName, "1", nil)
	if _, err := util.CreatePods(context.Background(), e.c.kube, next); err != nil {
		t.Fatal(err)
	}
	if got := e.waitBound([]string{"web-2"}); got["web-2"] != "node-0" {
		t.Errorf("second normal pod placed on %v, want node-0 (s0 became the fuller leaf)", got)
	}
}

// TestTopologyGPUPodsPackByGPUByDefault: with the default args, pods that request
// only GPUs (the usual training pod) are packed by GPUs. A pod bound without a scheduler uses
// 4 of node-5's 8 GPUs, so s2 (node-4, node-5) is the fuller leaf. A plain 1-GPU pod prefers
// s2; then a gang of two 4-GPU pods, hard at tier 1, fits in every leaf and is placed in s2,
// where weighing cpu and memory alone scores every leaf 0 and picks s0 by name.
func TestTopologyGPUPodsPackByGPUByDefault(t *testing.T) {
	gpus := func(q string) v1.ResourceList { return v1.ResourceList{"nvidia.com/gpu": resource.MustParse(q)} }
	e := newTopoEnv(t, nodesWithCPU("8", "node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"),
		gpus("8"), seedHyperNodes(t)...)
	withGPUs := func(p *v1.Pod, q string) *v1.Pod {
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: gpus(q), Limits: gpus(q)}
		return p
	}
	filler := withGPUs(util.Pod(e.ns, "filler-node-5", "no-scheduler", "", nil), "4")
	filler.Spec.NodeName = "node-5"
	if _, err := util.CreatePods(context.Background(), e.c.kube, filler); err != nil {
		t.Fatal(err)
	}
	// Args without `resources`: the plugin's defaults fill it in.
	startScheduler(t, map[string]map[string]any{"NetworkTopologyAware": {"hyperNodeBinPack": map[string]any{"cpu": 1, "memory": 1}}})
	e.packsIntoS2(gpus("1"), gpus("4"))
}

// packsIntoS2 creates a plain pod requesting plain, then a gang of two members requesting
// member, hard at tier 1, and checks that each is bound in seed 001's leaf s2 (node-4,
// node-5), the fuller one in the tests that call it.
func (e *topoEnv) packsIntoS2(plain, member v1.ResourceList) {
	e.t.Helper()
	web := util.Pod(e.ns, "web", plugins.SchedulerName, "", nil)
	web.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: plain, Limits: plain}
	if _, err := util.CreatePods(context.Background(), e.c.kube, web); err != nil {
		e.t.Fatal(err)
	}
	if got := e.waitBound([]string{"web"}); !within(got, "node-4", "node-5") {
		e.t.Errorf("plain pod placed on %v, want the fuller leaf s2 (node-4, node-5)", got)
	}
	got := e.waitBound(e.gang("train", 2, `{"mode":"hard","highestTierAllowed":1}`, member))
	if len(got) != 2 || !within(got, "node-4", "node-5") {
		e.t.Errorf("gang placed on %v, want both members in the fuller leaf s2 (node-4, node-5)", got)
	}
}
