package networktopology

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
)

// seedCache is seedTree as a live tree cache, so that tests can change the tree.
func seedCache() *hypernode.Cache {
	cache := hypernode.NewCache(klog.Background(), nil)
	for i := range 8 {
		cache.SetNode(st.MakeNode().Name(fmt.Sprintf("node-%d", i)).Obj())
	}
	cache.SetNode(st.MakeNode().Name("outside").Obj())
	for _, hn := range seedHyperNodes() {
		cache.SetHyperNode(hn)
	}
	return cache
}

func nodeInfos(names ...string) []fwk.NodeInfo {
	var out []fwk.NodeInfo
	for _, n := range names {
		ni := framework.NewNodeInfo()
		ni.SetNode(st.MakeNode().Name(n).Obj())
		out = append(out, ni)
	}
	return out
}

var allSeedNodes = []string{"node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7", "outside"}

// TestNodeScores: seed 000 section 5.1 with fading 0.5 (tier weights 1, 0.5, 0.25), CPU only,
// nodes of 4 CPUs, a pod of 1 CPU; a tier where no HyperNode holds the node scores 1. Each
// step is an event, and the scores follow it.
func TestNodeScores(t *testing.T) {
	tree := seedCache()
	u := newUsageCache([]v1.ResourceName{v1.ResourceCPU}, 0.5)
	for _, n := range allSeedNodes {
		u.setNode(n, []int64{4000})
	}
	u.setPod("a", 0, "node-0", []int64{2000})
	u.setPod("b", 0, "node-2", []int64{1000})
	u.setPod("c", 0, "node-4", []int64{4000})
	u.setPod("d", 0, "outside", []int64{3000})
	request := int64(1000)
	scores := func() map[string]int64 {
		return byLeaf(t, tree.Snapshot(), nodeScores(t, u, tree.Snapshot(), nodeInfos(allSeedNodes...), []int64{request}))
	}
	steps := []struct {
		name  string
		event func()
		want  map[string]int64
	}{{
		name: "initial",
		// rack-0: 3000/8000, tor-0: 4000/16000, spine-0: 8000/32000
		//   -> (0.375 + 0.5*0.25 + 0.25*0.25) / 1.75 = 0.3214
		// rack-1: 2000/8000 -> (0.25 + 0.125 + 0.0625) / 1.75 = 0.25
		// rack-2: 5000/8000, tor-1: 5000/16000 -> (0.625 + 0.15625 + 0.0625) / 1.75 = 0.4821
		// rack-3: 1000/8000 -> (0.125 + 0.15625 + 0.0625) / 1.75 = 0.1964
		want: map[string]int64{"rack-0": 32, "rack-1": 25, "rack-2": 48, "rack-3": 20, "(no leaf)": 100},
	}, {
		name:  "the pod on node-4 finishes",
		event: func() { u.removePod("c") },
		// rack-0/1: spine-0 4000/32000; rack-2 = rack-3: 1000/8000, tor-1 1000/16000
		//   -> rack-0 (0.375 + 0.125 + 0.03125) / 1.75, rack-2 (0.125 + 0.03125 + 0.03125) / 1.75
		want: map[string]int64{"rack-0": 30, "rack-1": 23, "rack-2": 11, "rack-3": 11, "(no leaf)": 100},
	}, {
		name:  "the same pod reported again (Reserve, then bound): no change",
		event: func() { u.setPod("a", 0, "node-0", []int64{2000}) },
		want:  map[string]int64{"rack-0": 30, "rack-1": 23, "rack-2": 11, "rack-3": 11, "(no leaf)": 100},
	}, {
		name:  "node-7 deleted: rack-3 has one node left",
		event: func() { u.removeNode("node-7") },
		// spine-0: 4000/28000 for every rack; rack-3: 1000/4000, tor-1: 1000/12000
		//   -> (0.25 + 0.5*0.0833 + 0.25*0.1429) / 1.75 = 0.1871; rack-2: 1000/8000 -> 0.1156;
		//   rack-0: (0.375 + 0.5*0.25 + 0.25*0.1429) / 1.75 = 0.3061
		want: map[string]int64{"rack-0": 31, "rack-1": 23, "rack-2": 12, "rack-3": 19, "(no leaf)": 100},
	}, {
		name: "node-1 moves from rack-0 to rack-1 (a new tree generation)",
		event: func() {
			tree.SetHyperNode(hntesting.MakeHyperNode("rack-0").Tier(1).Nodes("node-0").Obj())
			tree.SetHyperNode(hntesting.MakeHyperNode("rack-1").Tier(1).Nodes("node-1", "node-2", "node-3").Obj())
		},
		// rack-0: 3000/4000 -> (0.75 + 0.125 + 0.0357) / 1.75 = 0.5204
		// rack-1: 2000/12000 -> (0.1667 + 0.125 + 0.0357) / 1.75 = 0.1871
		want: map[string]int64{"rack-0": 52, "rack-1": 19, "rack-2": 12, "rack-3": 19, "(no leaf)": 100},
	}, {
		name:  "a pod of another shape: every HyperNode is scored for its request",
		event: func() { request = 2000 },
		// rack-0: 4000/4000, tor-0: 5000/16000, spine-0: 5000/28000
		//   -> (1 + 0.5*0.3125 + 0.25*0.1786) / 1.75 = 0.6862; rack-1: 3000/12000 -> 0.2577;
		//   rack-2: 2000/8000, tor-1 2000/12000 -> (0.25 + 0.0833 + 0.0446) / 1.75 = 0.2160;
		//   rack-3: 2000/4000 -> (0.5 + 0.0833 + 0.0446) / 1.75 = 0.3588
		want: map[string]int64{"rack-0": 69, "rack-1": 26, "rack-2": 22, "rack-3": 36, "(no leaf)": 100},
	}}
	for _, step := range steps {
		if step.event != nil {
			step.event()
		}
		if diff := cmp.Diff(step.want, scores()); diff != "" {
			t.Errorf("%s: scores (-want,+got):\n%s", step.name, diff)
		}
	}
}

// TestNodeScoresWithDRAProvidedGPUs: TestNodeScores' first step with every pod also asking
// for a GPU that no node lists as allocatable (a DeviceClass provides it through DRA): the
// CPUs alone rank the racks, as without the GPUs, where counting them scored every rack 0.
func TestNodeScoresWithDRAProvidedGPUs(t *testing.T) {
	tree := seedCache()
	u := newUsageCache([]v1.ResourceName{v1.ResourceCPU, "nvidia.com/gpu"}, 0.5)
	for _, n := range allSeedNodes {
		u.setNode(n, []int64{4000, 0})
	}
	u.setPod("a", 0, "node-0", []int64{2000, 1})
	u.setPod("b", 0, "node-2", []int64{1000, 1})
	u.setPod("c", 0, "node-4", []int64{4000, 1})
	u.setPod("d", 0, "outside", []int64{3000, 1})
	got := byLeaf(t, tree.Snapshot(), nodeScores(t, u, tree.Snapshot(), nodeInfos(allSeedNodes...), []int64{1000, 1}))
	want := map[string]int64{"rack-0": 32, "rack-1": 25, "rack-2": 48, "rack-3": 20, "(no leaf)": 100}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want,+got):\n%s", diff)
	}
}

// nodeScores prepares u for a pod requesting req and scores each of nodes.
func nodeScores(t *testing.T, u *usageCache, tree *hypernode.Snapshot, nodes []fwk.NodeInfo, req []int64) map[fwk.NodeInfo]int64 {
	t.Helper()
	return scoredNodes(t, u, tree, nodes, nodes, req)
}

// scoredNodes prepares u for a pod requesting req, scored on scored of the node list list,
// and scores each of scored.
func scoredNodes(t *testing.T, u *usageCache, tree *hypernode.Snapshot, list, scored []fwk.NodeInfo, req []int64) map[fwk.NodeInfo]int64 {
	t.Helper()
	weights := make([]float64, len(req))
	for i := range weights {
		weights[i] = 1
	}
	scores := u.prepare(tree, list, scored, req, weights)
	out := map[fwk.NodeInfo]int64{}
	for _, ni := range scored {
		score, ok := scores.score(ni)
		if !ok {
			t.Fatalf("node %s not prepared", ni.Node().Name)
		}
		out[ni] = score
	}
	return out
}

// byLeaf turns per-node scores into per-leaf scores ("(no leaf)" for a node in none), and
// checks that the nodes of a leaf score the same.
func byLeaf(t *testing.T, tree *hypernode.Snapshot, scores map[fwk.NodeInfo]int64) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for ni, score := range scores {
		leaf, ok := tree.LeafOf(ni.Node().Name)
		if !ok {
			leaf = "(no leaf)"
		}
		if prev, seen := out[leaf]; seen && prev != score {
			t.Errorf("nodes of %s score %d and %d", leaf, prev, score)
		}
		out[leaf] = score
	}
	return out
}

// TestTierWeights: weights go by the rank of the tier among the tiers present, so tier 0,
// fading 0 and fading above 1 all give finite weights.
func TestTierWeights(t *testing.T) {
	for _, tc := range []struct {
		tiers  int
		fading float64
		want   []float64
	}{
		{3, 0.5, []float64{1, 0.5, 0.25}},
		{3, 0, []float64{1, 0, 0}},
		{3, 1, []float64{1, 1, 1}},
		{3, 2, []float64{0.25, 0.5, 1}},
		{1, 0.8, []float64{1}},
	} {
		if diff := cmp.Diff(tc.want, tierWeights(tc.tiers, tc.fading)); diff != "" {
			t.Errorf("tierWeights(%d, %v) (-want,+got):\n%s", tc.tiers, tc.fading, diff)
		}
	}
}

// TestNormalScoreTierZero: a tree whose leaves are tier 0 (the CRD allows it) and fading 0
// score by the leaves alone, with no NaN and every score in [0, MaxScore].
func TestNormalScoreTierZero(t *testing.T) {
	cache := hypernode.NewCache(klog.Background(), nil)
	for _, n := range []string{"a", "b", "c"} {
		cache.SetNode(st.MakeNode().Name(n).Obj())
	}
	cache.SetHyperNode(hntesting.MakeHyperNode("leaf-0").Tier(0).Nodes("a").Obj())
	cache.SetHyperNode(hntesting.MakeHyperNode("leaf-1").Tier(0).Nodes("b").Obj())
	cache.SetHyperNode(hntesting.MakeHyperNode("top").Tier(1).Children("leaf-0", "leaf-1").Obj())
	for _, fading := range []float64{0, 0.8, 3} {
		u := newUsageCache([]v1.ResourceName{v1.ResourceCPU}, fading)
		for _, n := range []string{"a", "b", "c"} {
			u.setNode(n, []int64{4000})
		}
		u.setPod("p", 0, "a", []int64{1000})
		got := byLeaf(t, cache.Snapshot(), nodeScores(t, u, cache.Snapshot(), nodeInfos("a", "b", "c"), []int64{1000}))
		// leaf-0: 2000/4000, leaf-1: 1000/4000, top (a and b): 2000/8000
		want := map[float64]map[string]int64{
			0:   {"leaf-0": 50, "leaf-1": 25, "(no leaf)": 100},
			0.8: {"leaf-0": 39, "leaf-1": 25, "(no leaf)": 100}, // (0.5 + 0.8*0.25) / 1.8
			3:   {"leaf-0": 31, "leaf-1": 25, "(no leaf)": 100}, // (0.5/3 + 0.25) / (4/3)
		}[fading]
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("fading %v: scores (-want,+got):\n%s", fading, diff)
		}
	}
}

// TestUsageSumsMatchARecount: after a random sequence of pod, node and tree events, the
// incremental sums equal sums recounted from scratch.
func TestUsageSumsMatchARecount(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tree := seedCache()
	u := newUsageCache([]v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}, 0.8)
	m := newUsageMirror(u, rng)
	for step := range 2000 {
		node := allSeedNodes[rng.IntN(len(allSeedNodes))]
		uid := types.UID(fmt.Sprintf("pod-%d", rng.IntN(40)))
		switch op := rng.IntN(10); {
		case op < 4:
			m.setPod(uid, node)
		case op < 7:
			m.removePod(uid)
		case op < 8:
			m.setNode(node, 0)
		case op < 9:
			m.removeNode(node)
		default:
			// Move a random node between rack-0 and rack-3.
			moved := fmt.Sprintf("node-%d", rng.IntN(8))
			tree.SetHyperNode(hntesting.MakeHyperNode("rack-0").Tier(1).Nodes("node-0", moved).Obj())
		}
		u.prepare(tree.Snapshot(), nil, nil, []int64{0, 0}, []float64{1, 1}) // syncs the tree
		if diff := cmp.Diff(recount(tree.Snapshot(), m.nodes, m.pods), u.nonZeroSums()); diff != "" {
			t.Fatalf("step %d: sums (-recount,+incremental):\n%s", step, diff)
		}
	}
}

// usageMirror applies random pod and node events to a usage cache and keeps the nodes'
// allocatable and the pods' requests, which a recount reads.
type usageMirror struct {
	u     *usageCache
	rng   *rand.Rand
	nodes map[string][]int64
	pods  map[types.UID]podUsage
}

func newUsageMirror(u *usageCache, rng *rand.Rand) *usageMirror {
	return &usageMirror{u: u, rng: rng, nodes: map[string][]int64{}, pods: map[types.UID]podUsage{}}
}

// setPod puts pod uid on node with a random request of CPU and memory.
func (m *usageMirror) setPod(uid types.UID, node string) {
	req := []int64{m.rng.Int64N(4000), m.rng.Int64N(1 << 34)}
	m.u.setPod(uid, 0, node, req)
	m.pods[uid] = podUsage{node: node, req: req}
}

func (m *usageMirror) removePod(uid types.UID) {
	m.u.removePod(uid)
	delete(m.pods, uid)
}

// setNode gives node a random allocatable of at least minCPU milli-CPU (and as many MiB); with
// minCPU 0, a third of the time no memory, as a node lists no GPU that DRA provides.
func (m *usageMirror) setNode(node string, minCPU int64) {
	alloc := []int64{minCPU + m.rng.Int64N(64000), minCPU<<20 + m.rng.Int64N(1<<40)}
	if minCPU == 0 && m.rng.IntN(3) == 0 {
		alloc[1] = 0
	}
	m.u.setNode(node, alloc)
	m.nodes[node] = alloc
}

func (m *usageMirror) removeNode(node string) {
	m.u.removeNode(node)
	delete(m.nodes, node)
}

func recount(tree *hypernode.Snapshot, nodes map[string][]int64, pods map[types.UID]podUsage) map[string][2][]int64 {
	out := map[string][2][]int64{}
	add := func(node string, used, alloc []int64) {
		leaf, ok := tree.LeafOf(node)
		if !ok {
			return
		}
		for _, h := range append([]string{leaf}, tree.Ancestors(leaf)...) {
			if h == hypernode.VirtualRootName {
				continue
			}
			s, ok := out[h]
			if !ok {
				s = [2][]int64{make([]int64, 2), make([]int64, 2)}
			}
			for i := range 2 {
				s[0][i] += used[i]
				s[1][i] += alloc[i]
			}
			out[h] = s
		}
	}
	for name, alloc := range nodes {
		add(name, []int64{0, 0}, alloc)
	}
	for _, p := range pods {
		if alloc, ok := nodes[p.node]; ok {
			// A request counts on a node only for the resources the node lists.
			used := slices.Clone(p.req)
			for i := range used {
				if alloc[i] == 0 {
					used[i] = 0
				}
			}
			add(p.node, used, []int64{0, 0})
		}
	}
	return nonZero(out)
}

func (u *usageCache) nonZeroSums() map[string][2][]int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := map[string][2][]int64{}
	for h, s := range u.sums {
		out[h] = [2][]int64{slices.Clone(s.used), slices.Clone(s.alloc)}
	}
	return nonZero(out)
}

func nonZero(m map[string][2][]int64) map[string][2][]int64 {
	for h, s := range m {
		if !slices.ContainsFunc(append(slices.Clone(s[0]), s[1]...), func(v int64) bool { return v != 0 }) {
			delete(m, h)
		}
	}
	return m
}

// TestNormalPodScoreFollowsReserve: a pod reserved on a node counts at once (the next pod's
// score sees it, as kube-scheduler's cache sees an assumed pod), and no longer after
// Unreserve.
func TestNormalPodScoreFollowsReserve(t *testing.T) {
	p, _ := newTestPlugin(t)
	for _, n := range allSeedNodes {
		p.usageSums.setNode(n, []int64{4000})
	}
	nodes := nodeInfos(allSeedNodes...)
	score := func() int64 {
		return nodeScores(t, p.usageSums, p.cache.Snapshot(), nodes, []int64{1000})[nodes[1]] // node-1
	}
	before := score()
	placed := st.MakePod().Namespace("ns").Name("placed").UID("placed").Req(map[v1.ResourceName]string{v1.ResourceCPU: "2"}).Obj()
	p.Reserve(context.Background(), framework.NewCycleState(), placed, "node-0")
	// rack-0: 3000/8000, tor-0: 3000/16000, spine-0: 3000/32000, fading 0.8 (weights 1, 0.8, 0.64)
	//   -> (0.375 + 0.8*0.1875 + 0.64*0.09375) / 2.44 = 0.2398
	if got, want := score(), int64(24); got != want {
		t.Errorf("after Reserve: score of node-1 = %d, want %d (before: %d)", got, want, before)
	}
	p.Unreserve(context.Background(), framework.NewCycleState(), placed, "node-0")
	if got := score(); got != before {
		t.Errorf("after Unreserve: score of node-1 = %d, want %d as before", got, before)
	}
}

// TestUsageWatch: the informer handlers count assigned, non-terminal pods on existing nodes.
func TestUsageWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	u := newUsageCache([]v1.ResourceName{v1.ResourceCPU}, 0.8)
	u.syncTreeLocked(seedCache().Snapshot())
	if err := u.watch(factory); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer func() {
		cancel() // Shutdown waits for the informers, which stop with ctx
		factory.Shutdown()
	}()
	pod := func(name, node string) *v1.Pod {
		return st.MakePod().Namespace("ns").Name(name).UID(name).Node(node).Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()
	}
	waitFor := func(step string, want map[string][2][]int64) {
		t.Helper()
		var got map[string][2][]int64
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			got = u.nonZeroSums()
			return cmp.Equal(want, got), nil
		})
		if err != nil {
			t.Fatalf("%s: sums (-want,+got):\n%s", step, cmp.Diff(want, got))
		}
	}
	sums := func(used, alloc int64) [2][]int64 { return [2][]int64{{used}, {alloc}} }
	if _, err := client.CoreV1().Nodes().Create(ctx, st.MakeNode().Name("node-0").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4"}).Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("node added", map[string][2][]int64{"rack-0": sums(0, 4000), "tor-0": sums(0, 4000), "spine-0": sums(0, 4000)})
	for _, p := range []*v1.Pod{pod("bound", "node-0"), pod("pending", ""), pod("elsewhere", "node-7")} {
		if _, err := client.CoreV1().Pods("ns").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// node-7 has no Node object: its pod waits, uncounted.
	waitFor("pods added", map[string][2][]int64{"rack-0": sums(1000, 4000), "tor-0": sums(1000, 4000), "spine-0": sums(1000, 4000)})
	done := pod("bound", "node-0")
	done.Status.Phase = v1.PodSucceeded
	if _, err := client.CoreV1().Pods("ns").UpdateStatus(ctx, done, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("pod succeeded", map[string][2][]int64{"rack-0": sums(0, 4000), "tor-0": sums(0, 4000), "spine-0": sums(0, 4000)})
	if _, err := client.CoreV1().Nodes().Create(ctx, st.MakeNode().Name("node-7").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "8"}).Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("node-7 added with its pod", map[string][2][]int64{"rack-0": sums(0, 4000), "tor-0": sums(0, 4000),
		"rack-3": sums(1000, 8000), "tor-1": sums(1000, 8000), "spine-0": sums(1000, 12000)})
	if err := client.CoreV1().Nodes().Delete(ctx, "node-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Pods("ns").Delete(ctx, "elsewhere", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("node-0 and the pod on node-7 deleted", map[string][2][]int64{"rack-3": sums(0, 8000), "tor-1": sums(0, 8000), "spine-0": sums(0, 8000)})
}

// TestNodeScoresMatchThePathWalk: on an irregular tree the scores equal the definition
// computed from scratch (a recount of the sums, weights by tier rank along each node's path),
// through random events, a moved node and an epoch that wraps. The tree: tier-1 racks a and b
// under tor-x (tier 2); rack-c, a tier-2 leaf, and rack-d, a tier-1 leaf, straight under
// spine (tier 3), so that two siblings of different tiers share a parent; rack-e, a tier-1
// leaf with no parent; node-6 in no leaf.
func TestNodeScoresMatchThePathWalk(t *testing.T) {
	names := []string{"node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6"}
	tree := hypernode.NewCache(klog.Background(), nil)
	for _, n := range names {
		tree.SetNode(st.MakeNode().Name(n).Obj())
	}
	for _, hn := range []*topologyv1alpha1.HyperNode{
		hntesting.MakeHyperNode("rack-a").Tier(1).Nodes("node-0", "node-1").Obj(),
		hntesting.MakeHyperNode("rack-b").Tier(1).Nodes("node-2").Obj(),
		hntesting.MakeHyperNode("rack-c").Tier(2).Nodes("node-3").Obj(),
		hntesting.MakeHyperNode("rack-d").Tier(1).Nodes("node-4").Obj(),
		hntesting.MakeHyperNode("rack-e").Tier(1).Nodes("node-5").Obj(),
		hntesting.MakeHyperNode("tor-x").Tier(2).Children("rack-a", "rack-b").Obj(),
		hntesting.MakeHyperNode("spine").Tier(3).Children("tor-x", "rack-c", "rack-d").Obj(),
	} {
		tree.SetHyperNode(hn)
	}
	const fading = 0.8
	rng := rand.New(rand.NewPCG(3, 4))
	u := newUsageCache([]v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}, fading)
	m := newUsageMirror(u, rng)
	infos := nodeInfos(names...)
	for step := range 500 {
		node := names[rng.IntN(len(names))]
		uid := types.UID(fmt.Sprintf("pod-%d", rng.IntN(20)))
		switch op := rng.IntN(10); {
		case op < 5:
			m.setPod(uid, node)
		case op < 7:
			m.removePod(uid)
		case op < 9:
			// Never empty: a node of no allocatable makes the bin-pack value degenerate.
			m.setNode(node, 8000)
		default:
			// node-1 moves between rack-a and rack-d: a new tree generation.
			if step%2 == 0 {
				tree.SetHyperNode(hntesting.MakeHyperNode("rack-a").Tier(1).Nodes("node-0").Obj())
				tree.SetHyperNode(hntesting.MakeHyperNode("rack-d").Tier(1).Nodes("node-1", "node-4").Obj())
			} else {
				tree.SetHyperNode(hntesting.MakeHyperNode("rack-d").Tier(1).Nodes("node-4").Obj())
				tree.SetHyperNode(hntesting.MakeHyperNode("rack-a").Tier(1).Nodes("node-0", "node-1").Obj())
			}
		}
		if step == 1 || step == 250 {
			// The next prepare wraps to epoch 1, the epoch of step 0's memos (at step 1) or of
			// none (at step 250): no memo of an earlier pod may survive.
			u.epoch = math.MaxUint32
		}
		req := []int64{rng.Int64N(4000), rng.Int64N(1 << 34)}
		snap := tree.Snapshot()
		// Some of the nodes, in any order, as Filter's workers list them.
		scored := slices.Clone(infos)
		rng.Shuffle(len(scored), func(i, j int) { scored[i], scored[j] = scored[j], scored[i] })
		scored = scored[:1+rng.IntN(len(scored))]
		got, scoredNames := map[string]int64{}, []string{}
		for ni, score := range scoredNodes(t, u, snap, infos, scored, req) {
			got[ni.Node().Name] = score
		}
		for _, ni := range scored {
			scoredNames = append(scoredNames, ni.Node().Name)
		}
		if diff := cmp.Diff(pathWalkScores(snap, scoredNames, recount(snap, m.nodes, m.pods), req, fading), got); diff != "" {
			t.Fatalf("step %d: scores (-path walk,+incremental):\n%s", step, diff)
		}
	}
}

// pathWalkScores is the normal-pod score by its definition: for each node, the tier-weighted
// bin-pack values of the HyperNodes on its leaf's path (weights 1 each resource), the tiers
// with no HyperNode on the path scoring 1.
func pathWalkScores(tree *hypernode.Snapshot, names []string, sums map[string][2][]int64, req []int64, fading float64) map[string]int64 {
	tiers := tree.Tiers()
	weights := tierWeights(len(tiers), fading)
	totalWeight := 0.0
	for _, w := range weights {
		totalWeight += w
	}
	floats := func(v []int64) []float64 { return toFloats(v, nil) }
	out := map[string]int64{}
	for _, node := range names {
		covered := make([]bool, len(tiers))
		total := 0.0
		if leaf, ok := tree.LeafOf(node); ok {
			for _, h := range append([]string{leaf}, tree.Ancestors(leaf)...) {
				info, ok := tree.HyperNode(h)
				if !ok || h == hypernode.VirtualRootName {
					continue
				}
				rank := slices.Index(tiers, info.Tier)
				if rank < 0 || covered[rank] {
					continue
				}
				covered[rank] = true
				used, alloc := make([]int64, 2), make([]int64, 2)
				if s, ok := sums[h]; ok {
					used, alloc = s[0], s[1]
				}
				total += weights[rank] * placement.BinPackScore(floats(used), floats(alloc), floats(req), 1, []float64{1, 1})
			}
		}
		for rank, c := range covered {
			if !c {
				total += weights[rank]
			}
		}
		out[node] = int64(math.Round(float64(fwk.MaxScore) * total / totalWeight))
	}
	return out
}

// TestNodeScoresWithDRADevices: a node's DRA devices stand for a resource it does not list
// as allocatable (devices.Inventory.Amounts): the scores equal those of the same GPUs from a
// device plugin, whatever the pods request of the resource, on any order of events; and
// without devices they are TestNodeScoresWithDRAProvidedGPUs' again.
func TestNodeScoresWithDRADevices(t *testing.T) {
	tree := seedCache()
	resources := []v1.ResourceName{v1.ResourceCPU, "nvidia.com/gpu"}
	gpusUsed := map[string]int64{"node-0": 6, "node-2": 1, "node-4": 8, "outside": 2}
	cpuUsed := map[string]int64{"node-0": 2000, "node-2": 1000, "node-4": 4000, "outside": 3000}
	plugin, dra := newUsageCache(resources, 0.5), newUsageCache(resources, 0.5)
	for _, n := range allSeedNodes {
		plugin.setNode(n, []int64{4000, 8})
		plugin.setPod(types.UID(n), 0, n, []int64{cpuUsed[n], gpusUsed[n]})
	}
	for i, n := range allSeedNodes {
		// Devices before the node for some, after for others; the pods' own GPU requests
		// (an extended resource a class provides) do not count next to the devices.
		if i%2 == 0 {
			dra.setDevices(n, []int64{0, gpusUsed[n]}, []int64{0, 8})
		}
		dra.setNode(n, []int64{4000, 0})
		dra.setPod(types.UID(n), 0, n, []int64{cpuUsed[n], 1})
		if i%2 == 1 {
			dra.setDevices(n, []int64{0, gpusUsed[n]}, []int64{0, 8})
		}
	}
	req := []int64{1000, 1}
	want := byLeaf(t, tree.Snapshot(), nodeScores(t, plugin, tree.Snapshot(), nodeInfos(allSeedNodes...), req))
	got := byLeaf(t, tree.Snapshot(), nodeScores(t, dra, tree.Snapshot(), nodeInfos(allSeedNodes...), req))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores with DRA devices (-device plugin,+DRA):\n%s", diff)
	}
	if want["rack-0"] == want["rack-1"] {
		t.Fatalf("the GPUs change no score: %v", want)
	}
	for _, n := range allSeedNodes {
		dra.setDevices(n, nil, []int64{0, 0})
	}
	got = byLeaf(t, tree.Snapshot(), nodeScores(t, dra, tree.Snapshot(), nodeInfos(allSeedNodes...), req))
	withoutDevices := map[string]int64{"rack-0": 32, "rack-1": 25, "rack-2": 48, "rack-3": 20, "(no leaf)": 100}
	if diff := cmp.Diff(withoutDevices, got); diff != "" {
		t.Errorf("scores once the devices are gone (-want,+got):\n%s", diff)
	}
}
