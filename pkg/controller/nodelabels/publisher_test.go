package nodelabels

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2/ktesting"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	topologyfake "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned/fake"
	topologyinformers "github.com/hypernode-dev/hypernode-scheduler/pkg/client/informers/externalversions"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/metrics"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

const record = hypernode.TierLabelsAnnotation

// eventCounter records the Events the publisher asks for.
type eventCounter struct {
	mu    sync.Mutex
	notes map[string][]string // by node
}

func (e *eventCounter) Eventf(ref *v1.ObjectReference, _, reason, _, format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.notes[ref.Name] = append(e.notes[ref.Name], reason+": "+fmt.Sprintf(format, args...))
}

func (e *eventCounter) count() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]int{}
	for n, notes := range e.notes {
		out[n] = len(notes)
	}
	return out
}

// fixture is a publisher on a fake clientset whose nodes go through a real informer; the
// HyperNodes are fed to it directly (OnHyperNode), so that a rename is one step. No worker
// runs: settle processes the queue.
type fixture struct {
	ctx     context.Context
	kube    *kubefake.Clientset
	p       *Publisher
	events  *eventCounter
	patches atomic.Int64
	// conflicts makes the next patch of each listed node fail with a conflict.
	conflicts sync.Map
	// testUpdates is set while the test itself updates a node.
	testUpdates atomic.Bool
}

func node(name string, nodeLabels map[string]string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: k8stypes.UID("uid-" + name), Labels: nodeLabels}}
}

func newFixture(t *testing.T, nodes ...*v1.Node) *fixture {
	t.Helper()
	metrics.Register()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	var objs []runtime.Object
	for _, n := range nodes {
		objs = append(objs, n)
	}
	f := &fixture{ctx: ctx, kube: kubefake.NewClientset(objs...), events: &eventCounter{notes: map[string][]string{}}}
	f.kube.PrependReactor("patch", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		f.patches.Add(1)
		name := action.(k8stesting.PatchAction).GetName()
		if _, ok := f.conflicts.LoadAndDelete(name); ok {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, name, fmt.Errorf("the object has been modified"))
		}
		return false, nil, nil
	})
	f.kube.PrependReactor("update", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if !f.testUpdates.Load() {
			t.Errorf("a node was updated (%v): the publisher must only patch", action)
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(f.kube, 0)
	topoFactory := topologyinformers.NewSharedInformerFactory(topologyfake.NewSimpleClientset(), 0)
	p, err := New(f.kube, factory.Core().V1().Nodes(), topoFactory.Topology().V1alpha1().HyperNodes(), f.events, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.p = p
	t.Cleanup(p.queue.ShutDown)
	factory.Start(ctx.Done())
	topoFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), p.synced...) {
		t.Fatal("the informers did not sync")
	}
	return f
}

// nodeState is what the test compares: a node's labels and ownership record.
type nodeState struct {
	Labels map[string]string
	Record string
}

// state returns every node's labels and record from the API.
func (f *fixture) state(t *testing.T) map[string]nodeState {
	t.Helper()
	list, err := f.kube.CoreV1().Nodes().List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]nodeState{}
	for _, n := range list.Items {
		out[n.Name] = nodeState{Labels: n.Labels, Record: n.Annotations[record]}
	}
	return out
}

// informerCaughtUp reports whether the publisher's lister holds the API's labels and records.
func (f *fixture) informerCaughtUp(t *testing.T, api map[string]nodeState) bool {
	for name, want := range api {
		n, err := f.p.nodes.Get(name)
		if err != nil || !cmp.Equal(want, nodeState{Labels: n.Labels, Record: n.Annotations[record]}) {
			return false
		}
	}
	return true
}

// settle processes the queue until the nodes are in the wanted state and the informer has
// delivered it, and returns the patches sent meanwhile.
func (f *fixture) settle(t *testing.T, want map[string]nodeState) int64 {
	t.Helper()
	before := f.patches.Load()
	var got map[string]nodeState
	err := wait.PollUntilContextTimeout(f.ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		for f.p.queue.Len() > 0 {
			f.p.processNext(f.ctx)
		}
		got = f.state(t)
		return cmp.Equal(want, got) && f.informerCaughtUp(t, got) && f.p.queue.Len() == 0, nil
	})
	if err != nil {
		t.Fatalf("nodes (-want +got):\n%s", cmp.Diff(want, got))
	}
	return f.patches.Load() - before
}

// resync looks at every node again, as a start or a configuration change does, and returns
// the patches that cost.
func (f *fixture) resync(t *testing.T) int64 {
	t.Helper()
	before := f.patches.Load()
	f.p.enqueueAll(f.ctx)
	for f.p.queue.Len() > 0 {
		f.p.processNext(f.ctx)
	}
	return f.patches.Load() - before
}

func (f *fixture) updateNode(t *testing.T, name string, change func(*v1.Node)) {
	t.Helper()
	n, err := f.kube.CoreV1().Nodes().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	change(n)
	f.testUpdates.Store(true)
	defer f.testUpdates.Store(false)
	if _, err := f.kube.CoreV1().Nodes().Update(f.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func notOwnedGauge(t *testing.T) float64 {
	t.Helper()
	v, err := testutil.GetGaugeMetricValue(metrics.NodeLabelsNotOwned)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func enabled(on bool) config.NodeLabels {
	cfg := config.DefaultNodeLabels()
	cfg.Enabled = on
	return cfg
}

const (
	t1, t2, t3, t5 = "hypernode.dev/tier-1", "hypernode.dev/tier-2", "hypernode.dev/tier-3", "hypernode.dev/tier-5"
	all3           = t1 + "," + t2 + "," + t3
)

// TestPublisher follows a tree through discovery, a rename, a node moving leaf and one
// leaving every leaf, labels someone else wrote, and publishing turned off: after each step
// every node has exactly its labels, with one write per node whose labels change.
func TestPublisher(t *testing.T) {
	f := newFixture(t,
		node("n0", map[string]string{"leaf": "a"}),
		node("n1", map[string]string{"leaf": "a"}),
		node("n2", map[string]string{"leaf": "b"}),
		node("n3", map[string]string{"leaf": "b", t5: "admin"}),
		node("n4", map[string]string{"zone": "z"}),
		node("n5", map[string]string{"leaf": "a", t1: "theirs"}),
	)
	for _, hn := range []*topologyv1alpha1.HyperNode{
		hntesting.MakeHyperNode("leaf-a").Tier(1).NodeLabels(map[string]string{"leaf": "a"}).Obj(),
		hntesting.MakeHyperNode("leaf-b").Tier(1).NodeLabels(map[string]string{"leaf": "b"}).Obj(),
		hntesting.MakeHyperNode("spine-0").Tier(2).Children("leaf-a").Obj(),
		hntesting.MakeHyperNode("spine-1").Tier(2).Children("leaf-b").Obj(),
		hntesting.MakeHyperNode("core").Tier(3).Children("spine-0", "spine-1").Obj(),
	} {
		f.p.OnHyperNode(nil, hn)
	}
	// Not configured yet: nothing is written.
	if n := f.resync(t); n != 0 {
		t.Fatalf("%d writes before the configuration says anything", n)
	}

	f.p.Configure(f.ctx, enabled(true))
	want := map[string]nodeState{
		"n0": {Labels: map[string]string{"leaf": "a", t1: "leaf-a", t2: "spine-0", t3: "core"}, Record: all3},
		"n1": {Labels: map[string]string{"leaf": "a", t1: "leaf-a", t2: "spine-0", t3: "core"}, Record: all3},
		"n2": {Labels: map[string]string{"leaf": "b", t1: "leaf-b", t2: "spine-1", t3: "core"}, Record: all3},
		"n3": {Labels: map[string]string{"leaf": "b", t1: "leaf-b", t2: "spine-1", t3: "core", t5: "admin"}, Record: all3},
		"n4": {Labels: map[string]string{"zone": "z"}},
		// Its tier-1 label is someone else's: kept, not published over.
		"n5": {Labels: map[string]string{"leaf": "a", t1: "theirs", t2: "spine-0", t3: "core"}, Record: t2 + "," + t3},
	}
	if n := f.settle(t, want); n != 5 {
		t.Errorf("first publish: %d writes, want 5 (every node in a leaf)", n)
	}
	if n := f.resync(t); n != 0 {
		t.Errorf("a resync with nothing changed: %d writes, want 0", n)
	}
	if diff := cmp.Diff(map[string]int{"n3": 1, "n5": 1}, f.events.count()); diff != "" {
		t.Errorf("TierLabelNotOwned Events by node, once each (-want +got):\n%s", diff)
	}
	if got := notOwnedGauge(t); got != 2 {
		t.Errorf("hypernode_node_labels_not_owned = %v, want 2", got)
	}

	// spine-0 renamed: deleted, created as spine-a, and the core names the new one.
	f.p.OnHyperNode(hntesting.MakeHyperNode("spine-0").Tier(2).Children("leaf-a").Obj(), nil)
	f.p.OnHyperNode(nil, hntesting.MakeHyperNode("spine-a").Tier(2).Children("leaf-a").Obj())
	f.p.OnHyperNode(hntesting.MakeHyperNode("core").Tier(3).Children("spine-0", "spine-1").Obj(),
		hntesting.MakeHyperNode("core").Tier(3).Children("spine-a", "spine-1").Obj())
	for _, n := range []string{"n0", "n1", "n5"} {
		want[n].Labels[t2] = "spine-a"
	}
	if n := f.settle(t, want); n != 3 {
		t.Errorf("rename: %d writes, want 3 (the nodes below spine-0)", n)
	}

	// n1 moves to leaf-b: its leaf and spine change, and nothing else is written.
	f.updateNode(t, "n1", func(n *v1.Node) { n.Labels["leaf"] = "b" })
	want["n1"] = nodeState{Labels: map[string]string{"leaf": "b", t1: "leaf-b", t2: "spine-1", t3: "core"}, Record: all3}
	if n := f.settle(t, want); n != 1 {
		t.Errorf("a node moving leaf: %d writes, want 1", n)
	}

	// n0 leaves every leaf: its labels and record go.
	f.updateNode(t, "n0", func(n *v1.Node) { delete(n.Labels, "leaf") })
	want["n0"] = nodeState{Labels: map[string]string{}}
	if n := f.settle(t, want); n != 1 {
		t.Errorf("a node leaving every leaf: %d writes, want 1", n)
	}

	// Someone removes the label that was in the way: the tier is published there now.
	f.updateNode(t, "n5", func(n *v1.Node) { delete(n.Labels, t1) })
	want["n5"] = nodeState{Labels: map[string]string{"leaf": "a", t1: "leaf-a", t2: "spine-a", t3: "core"}, Record: all3}
	if n := f.settle(t, want); n != 1 {
		t.Errorf("a foreign label removed: %d writes, want 1", n)
	}
	if got := notOwnedGauge(t); got != 1 {
		t.Errorf("hypernode_node_labels_not_owned = %v, want 1 (n3's)", got)
	}

	// Off: exactly the labels it wrote go, with their records; n3's own tier-5 stays.
	f.p.Configure(f.ctx, enabled(false))
	want = map[string]nodeState{
		"n0": {Labels: map[string]string{}},
		"n1": {Labels: map[string]string{"leaf": "b"}},
		"n2": {Labels: map[string]string{"leaf": "b"}},
		"n3": {Labels: map[string]string{"leaf": "b", t5: "admin"}},
		"n4": {Labels: map[string]string{"zone": "z"}},
		"n5": {Labels: map[string]string{"leaf": "a"}},
	}
	if n := f.settle(t, want); n != 4 {
		t.Errorf("turned off: %d writes, want 4 (the nodes with labels of its own)", n)
	}
	if n := f.resync(t); n != 0 {
		t.Errorf("a resync while off: %d writes, want 0", n)
	}
	// Tree changes while off write nothing.
	f.p.OnHyperNode(nil, hntesting.MakeHyperNode("leaf-z").Tier(1).Nodes("n4").Obj())
	if n := f.resync(t); n != 0 {
		t.Errorf("a tree change while off: %d writes, want 0", n)
	}
	if got := notOwnedGauge(t); got != 0 {
		t.Errorf("hypernode_node_labels_not_owned = %v while off, want 0", got)
	}
	if diff := cmp.Diff(map[string]int{"n3": 1, "n5": 1}, f.events.count()); diff != "" {
		t.Errorf("TierLabelNotOwned Events by node (-want +got):\n%s", diff)
	}
}

// TestConflictIsRetried: a node that changed since the informer's copy refuses the patch (its
// resourceVersion is a precondition); the publisher retries and the node ends right.
func TestConflictIsRetried(t *testing.T) {
	f := newFixture(t, node("n0", map[string]string{"leaf": "a"}))
	f.p.OnHyperNode(nil, hntesting.MakeHyperNode("leaf-a").Tier(1).NodeLabels(map[string]string{"leaf": "a"}).Obj())
	f.conflicts.Store("n0", true)
	before, err := testutil.GetCounterMetricValue(metrics.NodeLabelWrites.WithLabelValues(metrics.ResultError))
	if err != nil {
		t.Fatal(err)
	}
	f.p.Configure(f.ctx, enabled(true))
	want := map[string]nodeState{"n0": {Labels: map[string]string{"leaf": "a", t1: "leaf-a"}, Record: t1}}
	if n := f.settle(t, want); n != 2 {
		t.Errorf("%d patches, want 2 (a conflict, then the write)", n)
	}
	after, _ := testutil.GetCounterMetricValue(metrics.NodeLabelWrites.WithLabelValues(metrics.ResultError))
	if after-before != 1 {
		t.Errorf("hypernode_node_label_writes_total{result=error} moved by %v, want 1", after-before)
	}
}

// TestAffectedNodes: a tree change queues the nodes whose labels it can change, no more.
// The tree: n0, n1 in leaf-0, n2, n3 in leaf-1, both leaves under spine.
func TestAffectedNodes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*hypernode.Tree)
		want   []string
	}{
		{name: "a node joins a leaf", change: func(t *hypernode.Tree) { t.SetNode("n9", map[string]string{"leaf": "1"}) }, want: []string{"n9"}},
		{name: "a node moves", change: func(t *hypernode.Tree) { t.SetNode("n0", map[string]string{"leaf": "1"}) }, want: []string{"n0"}},
		{name: "a node's other labels change", change: func(t *hypernode.Tree) { t.SetNode("n1", map[string]string{"leaf": "0", "x": "y"}) }},
		{name: "a core above", change: func(t *hypernode.Tree) {
			t.SetHyperNode(hntesting.MakeHyperNode("core").Tier(3).Children("spine").Obj())
		}, want: []string{"n0", "n1", "n2", "n3"}},
		{name: "a leaf goes", change: func(t *hypernode.Tree) { t.DeleteHyperNode("leaf-1") }, want: []string{"n2", "n3"}},
		{name: "a leaf becomes invalid", change: func(t *hypernode.Tree) {
			t.SetHyperNode(hntesting.MakeHyperNode("leaf-0").Tier(1).NodeLabels(map[string]string{"leaf": "0"}).NodeRegex("([").Obj())
		}, want: []string{"n0", "n1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tree := hypernode.NewTree()
			for i := range 4 {
				tree.SetNode(fmt.Sprintf("n%d", i), map[string]string{"leaf": fmt.Sprint(i / 2)})
			}
			tree.SetHyperNode(hntesting.MakeHyperNode("leaf-0").Tier(1).NodeLabels(map[string]string{"leaf": "0"}).Obj())
			tree.SetHyperNode(hntesting.MakeHyperNode("leaf-1").Tier(1).NodeLabels(map[string]string{"leaf": "1"}).Obj())
			tree.SetHyperNode(hntesting.MakeHyperNode("spine").Tier(2).Children("leaf-0", "leaf-1").Obj())
			before := tree.Snapshot()
			tc.change(tree)
			got := sets.List(AffectedNodes(before, tree.Snapshot()))
			slices.Sort(tc.want)
			if diff := cmp.Diff(tc.want, got, cmp.Transformer("nilEmpty", func(s []string) []string {
				if len(s) == 0 {
					return nil
				}
				return s
			})); diff != "" {
				t.Errorf("affected nodes (-want +got):\n%s", diff)
			}
		})
	}
}
