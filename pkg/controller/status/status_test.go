package status

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2/ktesting"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	topologyfake "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned/fake"
	topologyinformers "github.com/hypernode-dev/hypernode-scheduler/pkg/client/informers/externalversions"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/metrics"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

// fixture is a status controller on fake clients, driven by hand: events go in through the
// informers (or OnNode), Flush queues the dirty HyperNodes, drain writes them.
type fixture struct {
	ctx  context.Context
	topo *topologyfake.Clientset
	c    *Controller
}

func newFixture(t *testing.T, nodes []*v1.Node, hns ...*topologyv1alpha1.HyperNode) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	var kubeObjs, topoObjs []runtime.Object
	for _, n := range nodes {
		kubeObjs = append(kubeObjs, n)
	}
	for _, hn := range hns {
		topoObjs = append(topoObjs, hn)
	}
	f := &fixture{ctx: ctx, topo: topologyfake.NewSimpleClientset(topoObjs...)}
	factory := informers.NewSharedInformerFactory(kubefake.NewClientset(kubeObjs...), 0)
	topoFactory := topologyinformers.NewSharedInformerFactory(f.topo, 0)
	c, err := New(f.topo, factory.Core().V1().Nodes(), topoFactory.Topology().V1alpha1().HyperNodes(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	factory.Start(ctx.Done())
	topoFactory.Start(ctx.Done())
	// The handlers, not only the informers' stores, must have seen the initial lists.
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("the informers did not sync")
	}
	return f
}

// drain queues every dirty HyperNode and writes them; it returns the writes made.
func (f *fixture) drain(t *testing.T) int64 {
	t.Helper()
	before := f.c.Writes()
	f.c.Flush()
	for f.c.queue.Len() > 0 {
		f.c.processNext(f.ctx)
	}
	return f.c.Writes() - before
}

// syncAll checks every HyperNode once, as the controller does at start.
func (f *fixture) syncAll(t *testing.T) int64 {
	t.Helper()
	before := f.c.Writes()
	list, _ := f.topo.TopologyV1alpha1().HyperNodes().List(f.ctx, metav1.ListOptions{})
	for _, hn := range list.Items {
		if err := f.c.sync(f.ctx, hn.Name); err != nil {
			t.Fatal(err)
		}
	}
	return f.c.Writes() - before
}

type statusView struct {
	NodeCount int64
	Valid     metav1.ConditionStatus
	Reason    string
}

// statuses reads every HyperNode's status from the API.
func (f *fixture) statuses(t *testing.T) (map[string]statusView, map[string]string) {
	t.Helper()
	list, err := f.topo.TopologyV1alpha1().HyperNodes().List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	views, messages := map[string]statusView{}, map[string]string{}
	for _, hn := range list.Items {
		v := statusView{NodeCount: hn.Status.NodeCount}
		if c := meta.FindStatusCondition(hn.Status.Conditions, ConditionValid); c != nil {
			v.Valid, v.Reason = c.Status, c.Reason
			messages[hn.Name] = c.Message
		}
		views[hn.Name] = v
	}
	return views, messages
}

func nodes(names ...string) []*v1.Node {
	var out []*v1.Node
	for _, n := range names {
		out = append(out, st.MakeNode().Name(n).Label("rack", "r-"+n).Obj())
	}
	return out
}

// TestStatus: the count of existing nodes below every HyperNode, and Valid with the
// validator's reasons, for a valid tree and each kind of defect.
func TestStatus(t *testing.T) {
	f := newFixture(t, nodes("n0", "n1", "n2", "n3", "n4", "n5", "n6"),
		// A valid tree; s0 names a node that does not exist (Volcano would count it).
		hntesting.MakeHyperNode("s0").Tier(1).Nodes("n0", "n1", "ghost").Obj(),
		hntesting.MakeHyperNode("s1").Tier(1).Nodes("n2").Obj(),
		hntesting.MakeHyperNode("s4").Tier(2).Children("s0", "s1").Obj(),
		// A leaf whose regex does not compile.
		hntesting.MakeHyperNode("bad").Tier(1).Nodes("n3").NodeRegex("([").Obj(),
		// A cycle with a valid leaf below it.
		hntesting.MakeHyperNode("x").Tier(3).Children("y", "under").Obj(),
		hntesting.MakeHyperNode("y").Tier(2).Children("x").Obj(),
		hntesting.MakeHyperNode("under").Tier(1).Nodes("n4").Obj(),
		// A parent with a member that does not exist.
		hntesting.MakeHyperNode("p").Tier(2).Children("s9", "q").Obj(),
		hntesting.MakeHyperNode("q").Tier(1).Nodes("n5").Obj(),
		// A node in two leaves.
		hntesting.MakeHyperNode("d1").Tier(1).Nodes("n6").Obj(),
		hntesting.MakeHyperNode("d2").Tier(1).NodeLabels(map[string]string{"rack": "r-n6"}).Obj(),
		// A parent whose tier is not above its child's.
		hntesting.MakeHyperNode("flat").Tier(1).Children("s1x").Obj(),
		hntesting.MakeHyperNode("s1x").Tier(1).Nodes("n2").Obj(),
	)
	f.drain(t)
	got, messages := f.statuses(t)
	want := map[string]statusView{
		"s0":    {2, metav1.ConditionTrue, ReasonValid},
		"s1":    {1, metav1.ConditionFalse, "NodeInMultipleLeaves"},
		"s4":    {3, metav1.ConditionTrue, ReasonValid},
		"bad":   {1, metav1.ConditionFalse, "InvalidMember"},
		"x":     {1, metav1.ConditionFalse, "Cycle"},
		"y":     {0, metav1.ConditionFalse, "Cycle"},
		"under": {1, metav1.ConditionTrue, ReasonAncestorInvalid},
		"p":     {1, metav1.ConditionFalse, "MissingMember"},
		"q":     {1, metav1.ConditionTrue, ReasonValid},
		"d1":    {1, metav1.ConditionFalse, "NodeInMultipleLeaves"},
		"d2":    {1, metav1.ConditionFalse, "NodeInMultipleLeaves"},
		"flat":  {1, metav1.ConditionFalse, "TierOrder"},
		"s1x":   {1, metav1.ConditionFalse, "NodeInMultipleLeaves"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statuses (-want,+got):\n%s", diff)
	}
	for name, text := range map[string]string{
		"bad":   `member 1: regexMatch pattern "([" does not compile`,
		"under": "it lies below the invalid HyperNode x",
		"p":     "member HyperNode(s) s9 do not exist; placement uses the members that exist",
		"s0":    "topology placement uses it",
	} {
		if !strings.Contains(messages[name], text) {
			t.Errorf("%s: message %q does not contain %q", name, messages[name], text)
		}
	}
	// Everything is up to date: checking again writes nothing.
	if n := f.syncAll(t); n != 0 {
		t.Errorf("a second pass wrote %d statuses, want 0", n)
	}
}

// TestOneWritePerChange: a burst of 1,000 nodes joining is one write per HyperNode whose
// count changed; a change nobody sees in status (another node label, a node outside every
// HyperNode) writes nothing; a fix writes the HyperNodes it fixes.
func TestOneWritePerChange(t *testing.T) {
	var hns []*topologyv1alpha1.HyperNode
	var leaves []string
	for l := range 10 {
		leaf := fmt.Sprintf("leaf-%d", l)
		leaves = append(leaves, leaf)
		hns = append(hns, hntesting.MakeHyperNode(leaf).Tier(1).NodeRegex(fmt.Sprintf("^n-%d-", l)).Obj())
	}
	hns = append(hns, hntesting.MakeHyperNode("spine").Tier(2).Children(leaves...).Obj())
	f := newFixture(t, nil, hns...)
	metrics.Register()
	successes := func() int64 {
		v, err := testutil.GetCounterMetricValue(metrics.StatusWrites.WithLabelValues(metrics.ResultSuccess))
		if err != nil {
			t.Fatal(err)
		}
		return int64(v)
	}
	successesBefore, writesBefore := successes(), f.c.Writes()
	t.Cleanup(func() {
		if got, want := successes()-successesBefore, f.c.Writes()-writesBefore; got != want {
			t.Errorf("hypernode_status_writes_total{result=success} moved by %d, want %d (the writes made)", got, want)
		}
	})
	if n := f.drain(t); n != 11 {
		t.Errorf("initial status: %d writes, want 11", n)
	}
	for i := range 1000 {
		f.c.OnNode(nil, st.MakeNode().Name(fmt.Sprintf("n-%d-%03d", i%10, i)).Obj())
	}
	if n := f.drain(t); n != 11 {
		t.Errorf("1,000 nodes joining: %d writes, want 11 (one per HyperNode)", n)
	}
	got, _ := f.statuses(t)
	if got["spine"].NodeCount != 1000 || got["leaf-3"].NodeCount != 100 {
		t.Errorf("counts after the burst: spine %d, leaf-3 %d", got["spine"].NodeCount, got["leaf-3"].NodeCount)
	}

	old := st.MakeNode().Name("n-3-003").Obj()
	f.c.OnNode(old, st.MakeNode().Name("n-3-003").Label("unrelated", "x").Obj())
	f.c.OnNode(nil, st.MakeNode().Name("elsewhere").Obj())
	if n := f.drain(t); n != 0 {
		t.Errorf("changes that do not change any status: %d writes, want 0", n)
	}

	f.c.OnNode(st.MakeNode().Name("n-3-003").Obj(), nil)
	if n := f.drain(t); n != 2 {
		t.Errorf("a node leaves leaf-3: %d writes, want 2 (leaf-3 and spine)", n)
	}
}

// TestRun: the controller, run for real with a short delay, writes the status of a
// HyperNode created while it runs.
func TestRun(t *testing.T) {
	f := newFixture(t, nodes("n0"))
	f.c.delay = 10 * time.Millisecond
	go f.c.Run(f.ctx, 2)
	if _, err := f.topo.TopologyV1alpha1().HyperNodes().Create(f.ctx, hntesting.MakeHyperNode("s0").Tier(1).Nodes("n0").Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(f.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got, _ := f.statuses(t)
		return got["s0"] == statusView{1, metav1.ConditionTrue, ReasonValid}, nil
	})
	if err != nil {
		got, _ := f.statuses(t)
		t.Fatalf("status of s0: %+v", got["s0"])
	}
}

// TestWriteRecordOutlivesItsOwnIntermediateVersions: two writes in a row while the informer
// lags (rv1 -> rv2 -> rv3); the informer then delivers rv2, the first write's own version. The
// record still stands for it, so the next write goes over rv3 (not rv2, a conflict); rv3 or a
// version of somebody else ends it.
func TestWriteRecordOutlivesItsOwnIntermediateVersions(t *testing.T) {
	hn := hntesting.MakeHyperNode("leaf").Tier(1).Nodes("n0").Obj()
	f := newFixture(t, nil, hn)
	at := func(rv string) *topologyv1alpha1.HyperNode {
		c := hn.DeepCopy()
		c.ResourceVersion = rv
		return c
	}
	f.c.mu.Lock()
	f.c.written["leaf"] = writeRecord{over: "1", rv: "3", chain: []string{"2"}}
	f.c.mu.Unlock()
	recorded := func() bool {
		f.c.mu.Lock()
		defer f.c.mu.Unlock()
		_, ok := f.c.written["leaf"]
		return ok
	}
	f.c.OnHyperNode(at("1"), at("2"))
	if !recorded() {
		t.Fatal("the informer's delivery of the record's own intermediate version dropped the record")
	}
	f.c.OnHyperNode(at("2"), at("3"))
	if recorded() {
		t.Error("the record survived the informer catching up with its last write")
	}
}
