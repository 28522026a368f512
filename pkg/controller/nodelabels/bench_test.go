package nodelabels

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	kubefake "k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

// benchTree is the 10,000-node fabric of the status benchmark (pkg/controller/status): 313
// leaves of 32 nodes selected by label, 20 spines of 16 leaves, 4 cores of 5 spines.
func benchTree() ([]*v1.Node, []*topologyv1alpha1.HyperNode) {
	const n = 10000
	var nodes []*v1.Node
	for i := range n {
		name := fmt.Sprintf("gpu-%05d", i)
		nodes = append(nodes, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1",
			Labels: map[string]string{"leaf": fmt.Sprint(i / 32), "kubernetes.io/hostname": name}}})
	}
	var hns []*topologyv1alpha1.HyperNode
	leaves := (n + 31) / 32
	spineOf := map[int][]string{}
	for l := range leaves {
		name := fmt.Sprintf("leaf-%d", l)
		hns = append(hns, hntesting.MakeHyperNode(name).Tier(1).NodeLabels(map[string]string{"leaf": fmt.Sprint(l)}).Obj())
		spineOf[l/16] = append(spineOf[l/16], name)
	}
	coreOf := map[int][]string{}
	for s := 0; s < len(spineOf); s++ {
		name := fmt.Sprintf("spine-%d", s)
		hns = append(hns, hntesting.MakeHyperNode(name).Tier(2).Children(spineOf[s]...).Obj())
		coreOf[s/5] = append(coreOf[s/5], name)
	}
	for c := 0; c < len(coreOf); c++ {
		hns = append(hns, hntesting.MakeHyperNode(fmt.Sprintf("core-%d", c)).Tier(3).Children(coreOf[c]...).Obj())
	}
	return nodes, hns
}

// benchAPI is an instant apiserver and informer: a patch is applied to the lister's store
// at once, so that the next look at the node sees it. It counts the patches.
type benchAPI struct {
	store   cache.Indexer
	patches atomic.Int64
}

func (a *benchAPI) patch(action k8stesting.Action) (bool, runtime.Object, error) {
	a.patches.Add(1)
	pa := action.(k8stesting.PatchAction)
	obj, _, _ := a.store.GetByKey(pa.GetName())
	node := obj.(*v1.Node).DeepCopy()
	var patch struct {
		Metadata struct {
			Labels      map[string]*string `json:"labels"`
			Annotations map[string]*string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(pa.GetPatch(), &patch); err != nil {
		return true, nil, err
	}
	apply := func(m map[string]string, p map[string]*string) map[string]string {
		if m == nil {
			m = map[string]string{}
		}
		for k, v := range p {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = *v
			}
		}
		return m
	}
	node.Labels = apply(node.Labels, patch.Metadata.Labels)
	node.Annotations = apply(node.Annotations, patch.Metadata.Annotations)
	_ = a.store.Update(node)
	return true, node, nil
}

// benchPublisher is a publishing Publisher over benchAPI with the whole tree fed in, the
// rate limit out of the way (the benchmarks measure the controller's work; the rate bounds
// the wall time, see TestWritesAreRateBound), and its queue full of every node.
func benchPublisher(b *testing.B, nodes []*v1.Node, hns []*topologyv1alpha1.HyperNode) (*Publisher, *benchAPI) {
	api := &benchAPI{store: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})}
	for _, n := range nodes {
		_ = api.store.Add(n.DeepCopy())
	}
	kube := kubefake.NewClientset()
	kube.PrependReactor("patch", "nodes", api.patch)
	p := &Publisher{
		client:   kube,
		nodes:    corelisters.NewNodeLister(api.store),
		queue:    workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		tree:     hypernode.NewTree(),
		mode:     on,
		notOwned: map[string]sets.Set[string]{},
	}
	p.setRate(1e9)
	b.Cleanup(p.queue.ShutDown)
	for _, hn := range hns {
		p.OnHyperNode(nil, hn)
	}
	for _, n := range nodes {
		p.OnNode(nil, n)
	}
	return p, api
}

// drain processes the queue until it is empty.
func (p *Publisher) drain(ctx context.Context) {
	for p.queue.Len() > 0 {
		p.processNext(ctx)
	}
}

// BenchmarkPublish10kNodes is the first publish of a 10,000-node tree of three tiers (337
// HyperNodes): every HyperNode and node event fed to the publisher's tree (with the
// affected-node bookkeeping), then every queued node planned and patched. writes is the
// number of patches (one per node); ms-writing the part spent planning and patching.
func BenchmarkPublish10kNodes(b *testing.B) {
	nodes, hns := benchTree()
	ctx := context.Background()
	b.ReportAllocs()
	var writes int64
	var publish time.Duration
	for b.Loop() {
		p, api := benchPublisher(b, nodes, hns)
		start := time.Now()
		p.drain(ctx)
		publish += time.Since(start)
		writes = api.patches.Load()
		p.queue.ShutDown()
	}
	b.ReportMetric(float64(writes), "writes")
	b.ReportMetric(float64(publish.Milliseconds())/float64(b.N), "ms-writing")
}

// BenchmarkResync10kNodes looks at every node of the published 10,000-node tree again with
// nothing changed (a restart of the leader, or publishing turned on again): writes must be 0.
func BenchmarkResync10kNodes(b *testing.B) {
	nodes, hns := benchTree()
	ctx := context.Background()
	p, api := benchPublisher(b, nodes, hns)
	p.drain(ctx)
	before := api.patches.Load()
	b.ReportAllocs()
	for b.Loop() {
		p.enqueueAll(ctx)
		p.drain(ctx)
	}
	b.ReportMetric(float64(api.patches.Load()-before)/float64(b.N), "writes")
}

// BenchmarkRenameCore10k renames a core of the published tree (a delete and a create, and
// back): the 2,560 nodes below it are written, each once per rename.
func BenchmarkRenameCore10k(b *testing.B) {
	nodes, hns := benchTree()
	ctx := context.Background()
	p, api := benchPublisher(b, nodes, hns)
	p.drain(ctx)
	core := hns[len(hns)-4]
	renamed := core.DeepCopy()
	renamed.Name = "core-0-renamed"
	before := api.patches.Load()
	b.ReportAllocs()
	for b.Loop() {
		p.OnHyperNode(core, nil)
		p.OnHyperNode(nil, renamed)
		p.drain(ctx)
		p.OnHyperNode(renamed, nil)
		p.OnHyperNode(nil, core)
		p.drain(ctx)
	}
	b.ReportMetric(float64(api.patches.Load()-before)/float64(2*b.N), "writes")
}

// TestWritesAreRateBound: writes go through the token bucket of writesPerSecond; 30 writes
// at 100 per second with a burst of 10 take at least 0.2 s.
func TestWritesAreRateBound(t *testing.T) {
	var nodes []*v1.Node
	for i := range 30 {
		nodes = append(nodes, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), Labels: map[string]string{"leaf": "a"}}})
	}
	f := newFixture(t, nodes...)
	f.p.OnHyperNode(nil, hntesting.MakeHyperNode("leaf-a").Tier(1).NodeLabels(map[string]string{"leaf": "a"}).Obj())
	cfg := enabled(true)
	rate := 100.0
	cfg.WritesPerSecond = &rate
	start := time.Now()
	f.p.Configure(f.ctx, cfg)
	f.p.drain(f.ctx)
	if elapsed, n := time.Since(start), f.patches.Load(); n != 30 || elapsed < 200*time.Millisecond {
		t.Errorf("%d writes in %v, want 30 in at least 200ms", n, elapsed)
	}
}
