package discovery

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2/ktesting"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	topologyfake "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned/fake"
	topologyinformers "github.com/hypernode-dev/hypernode-scheduler/pkg/client/informers/externalversions"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/eventlog"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/metrics"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

const (
	testNamespace = "hypernode-system"
	testConfigMap = "hypernode-controller"
)

// harness runs a Manager on fake clients.
type harness struct {
	kube *kubefake.Clientset
	topo *topologyfake.Clientset
	m    *Manager
}

func newHarness(t *testing.T, kubeObjs []runtime.Object, hns ...runtime.Object) *harness {
	t.Helper()
	return newHarnessWith(t, nil, kubeObjs, hns...)
}

// newHarnessWith is newHarness with a node labels configurer.
func newHarnessWith(t *testing.T, nodeLabels NodeLabelsConfigurer, kubeObjs []runtime.Object, hns ...runtime.Object) *harness {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	h := &harness{kube: kubefake.NewClientset(kubeObjs...), topo: topologyfake.NewSimpleClientset(hns...)}
	factory := informers.NewSharedInformerFactory(h.kube, 0)
	topoFactory := topologyinformers.NewSharedInformerFactory(h.topo, 0)
	nodes := factory.Core().V1().Nodes()
	events := eventlog.New(h.kube.EventsV1(), "hypernode.dev/hypernode-controller", "test")
	m, err := NewManager(Options{
		Namespace: testNamespace, ConfigMap: testConfigMap, Client: h.topo,
		Env:        source.Env{Nodes: nodes.Lister(), Secrets: h.kube.CoreV1(), Namespace: testNamespace},
		Events:     events,
		NodeLabels: nodeLabels,
		Timing:     Timing{Debounce: 20 * time.Millisecond, RetryBase: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond},
	}, factory.Core().V1().ConfigMaps(), nodes, topoFactory.Topology().V1alpha1().HyperNodes())
	if err != nil {
		t.Fatal(err)
	}
	h.m = m
	factory.Start(ctx.Done())
	topoFactory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	topoFactory.WaitForCacheSync(ctx.Done())
	done := make(chan struct{})
	go events.Run(ctx)
	go func() {
		m.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return h
}

func configMap(conf string) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: testConfigMap, Namespace: testNamespace, UID: "cm-uid"}, Data: map[string]string{config.Key: conf}}
}

func gkeNode(name, block, subblock string) *v1.Node {
	return st.MakeNode().Name(name).Label("cloud.google.com/gce-topology-block", block).Label("cloud.google.com/gce-topology-subblock", subblock).Obj()
}

const labelConfig = "networkTopologyDiscovery:\n- source: label\n  enabled: true\n  config:\n    presets: [gke]\n"

// hyperNodes returns the names of the HyperNodes in the API, sorted.
func (h *harness) hyperNodes(t *testing.T) []string {
	t.Helper()
	list, err := h.topo.TopologyV1alpha1().HyperNodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, hn := range list.Items {
		names = append(names, hn.Name)
	}
	sort.Strings(names)
	return names
}

func (h *harness) waitHyperNodes(t *testing.T, want []string) {
	t.Helper()
	var got []string
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got = h.hyperNodes(t)
		return cmp.Equal(want, got), nil
	})
	if err != nil {
		t.Fatalf("HyperNodes %v, want %v", got, want)
	}
}

// waitEvent waits for an Event with the reason whose note contains every text.
func (h *harness) waitEvent(t *testing.T, namespace, reason string, texts ...string) string {
	t.Helper()
	var seen []string
	var note string
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := h.kube.EventsV1().Events(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		seen = nil
		for _, ev := range list.Items {
			seen = append(seen, ev.Reason+": "+ev.Note)
			if ev.Reason != reason {
				continue
			}
			match := true
			for _, text := range texts {
				match = match && strings.Contains(ev.Note, text)
			}
			if match {
				note = ev.Note
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no Event %s containing %q; Events:\n%s", reason, texts, strings.Join(seen, "\n"))
	}
	return note
}

// TestUnknownSourceNextToAGoodOne: an unknown source is reported with the supported ones, and
// the good source runs.
func TestUnknownSourceNextToAGoodOne(t *testing.T) {
	conf := "networkTopologyDiscovery:\n- source: roce\n  enabled: true\n  config: {endpoint: https://roce}\n" + strings.TrimPrefix(labelConfig, "networkTopologyDiscovery:\n")
	h := newHarness(t, []runtime.Object{configMap(conf), gkeNode("n0", "b1", "s1"), gkeNode("n1", "b1", "s2")})
	h.waitHyperNodes(t, []string{"gke.b1", "gke.b1.s1", "gke.b1.s2"})
	h.waitEvent(t, testNamespace, ReasonInvalidConfig, `networkTopologyDiscovery[0].source: Unsupported value: "roce": supported values: "label", "ufm"`, "the others run")
	h.waitEvent(t, testNamespace, ReasonConfigLoaded, "discovery sources running: label")
	if diff := cmp.Diff([]string{"label"}, h.m.Running()); diff != "" {
		t.Errorf("running sources (-want,+got):\n%s", diff)
	}
	// Every discovered HyperNode carries the source label.
	list, _ := h.topo.TopologyV1alpha1().HyperNodes().List(context.Background(), metav1.ListOptions{})
	for _, hn := range list.Items {
		if hn.Labels[source.Label] != "label" {
			t.Errorf("HyperNode %s has labels %v", hn.Name, hn.Labels)
		}
	}
}

// TestConfigChanges: new nodes are discovered without a restart; a malformed config is
// reported and changes nothing; disabling a source stops it and keeps its HyperNodes; a
// deleted ConfigMap is reported.
func TestConfigChanges(t *testing.T) {
	h := newHarness(t, []runtime.Object{configMap(labelConfig), gkeNode("n0", "b1", "s1")})
	h.waitHyperNodes(t, []string{"gke.b1", "gke.b1.s1"})
	ctx := context.Background()

	if _, err := h.kube.CoreV1().Nodes().Create(ctx, gkeNode("n1", "b2", "s1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitHyperNodes(t, []string{"gke.b1", "gke.b1.s1", "gke.b2", "gke.b2.s1"})

	if _, err := h.kube.CoreV1().ConfigMaps(testNamespace).Update(ctx, configMap("networkTopologyDiscovery: [\n"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitEvent(t, testNamespace, ReasonInvalidConfig, "hypernode-controller.conf is not valid YAML", "keep running as they were (label)")
	if diff := cmp.Diff([]string{"label"}, h.m.Running()); diff != "" {
		t.Errorf("running sources after a malformed config (-want,+got):\n%s", diff)
	}

	if _, err := h.kube.CoreV1().ConfigMaps(testNamespace).Update(ctx, configMap(strings.Replace(labelConfig, "enabled: true", "enabled: false", 1)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitEvent(t, testNamespace, ReasonSourceStopped, "the discovery source label is disabled", "its HyperNodes are kept")
	if len(h.m.Running()) != 0 {
		t.Errorf("running sources %v after disabling", h.m.Running())
	}
	// Nodes change, nothing follows: the source is off, its HyperNodes stay.
	if err := h.kube.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"gke.b1", "gke.b1.s1", "gke.b2", "gke.b2.s1"}, h.hyperNodes(t)); diff != "" {
		t.Errorf("HyperNodes of the disabled source (-want,+got):\n%s", diff)
	}

	if err := h.kube.CoreV1().ConfigMaps(testNamespace).Delete(ctx, testConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitEvent(t, testNamespace, ReasonConfigMissing, "the ConfigMap hypernode-system/hypernode-controller does not exist")
}

// TestReconcileOwnership: the source creates, updates and deletes only what it owns; a
// HyperNode of the same name that it does not own is a reported conflict, never overwritten.
func TestReconcileOwnership(t *testing.T) {
	handMade := hntesting.MakeHyperNode("gke.b1").Tier(5).Nodes("x").Obj()
	otherSource := hntesting.MakeHyperNode("gke.b3").Tier(5).Nodes("y").Label(source.Label, "ufm").Obj()
	stale := hntesting.MakeHyperNode("gke.b9").Tier(2).Nodes("z").Label(source.Label, "label").Obj()
	outdated := hntesting.MakeHyperNode("gke.b2").Tier(7).Nodes("w").Label(source.Label, "label").Obj()
	h := newHarness(t, []runtime.Object{
		configMap(labelConfig), gkeNode("n0", "b1", "s1"), gkeNode("n1", "b2", "s1"), gkeNode("n2", "b3", "s1"),
	}, handMade, otherSource, stale, outdated)
	h.waitHyperNodes(t, []string{"gke.b1", "gke.b1.s1", "gke.b2", "gke.b2.s1", "gke.b3", "gke.b3.s1"})
	ctx := context.Background()
	get := func(name string) *topologyv1alpha1.HyperNode {
		hn, err := h.topo.TopologyV1alpha1().HyperNodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return hn
	}
	if got := get("gke.b1"); !cmp.Equal(got.Spec, handMade.Spec) || got.Labels[source.Label] != "" {
		t.Errorf("the hand-made HyperNode changed: %+v", got)
	}
	if got := get("gke.b3"); !cmp.Equal(got.Spec, otherSource.Spec) || got.Labels[source.Label] != "ufm" {
		t.Errorf("the other source's HyperNode changed: %+v", got)
	}
	if got := get("gke.b2"); got.Spec.Tier != 2 || got.Spec.TierName != "block" {
		t.Errorf("the outdated owned HyperNode was not updated: %+v", got.Spec)
	}
	if _, err := h.topo.TopologyV1alpha1().HyperNodes().Get(ctx, "gke.b9", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the stale owned HyperNode still exists: %v", err)
	}
	h.waitEvent(t, metav1.NamespaceDefault, ReasonConflict, "the discovery source label wants a HyperNode of this name", "it was not made by a discovery source")
	h.waitEvent(t, metav1.NamespaceDefault, ReasonConflict, "it belongs to the source ufm")
	h.waitEvent(t, testNamespace, ReasonConflict, "2 wanted HyperNode name(s) are taken", "gke.b1, gke.b3")
}

// fixedSource wants the same HyperNodes whatever happens and records the refresh argument
// of every Discover. No node change matters to it: only its start, its interval (1h) and
// HyperNode events make it discover.
type fixedSource struct {
	want []*topologyv1alpha1.HyperNode

	mu      sync.Mutex
	refresh []bool
}

func (s *fixedSource) Name() string                         { return "fixed" }
func (s *fixedSource) NodeChangeMatters(_, _ *v1.Node) bool { return false }

func (s *fixedSource) Discover(_ context.Context, refresh bool) (*source.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refresh = append(s.refresh, refresh)
	out := make([]*topologyv1alpha1.HyperNode, 0, len(s.want))
	for _, hn := range s.want {
		out = append(out, hn.DeepCopy())
	}
	return &source.Result{HyperNodes: out}, nil
}

func (s *fixedSource) discoveries() []bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.refresh)
}

// useFixedSource registers src as the source "fixed" for the test and returns a
// configuration that enables it.
func useFixedSource(t *testing.T, src *fixedSource) string {
	t.Helper()
	Factories["fixed"] = func(config.Entry, source.Env) (source.Source, field.ErrorList) { return src, nil }
	t.Cleanup(func() { delete(Factories, "fixed") })
	return "networkTopologyDiscovery:\n- source: fixed\n  enabled: true\n"
}

// TestDeletedBlockerWakesTheSource: deleting the HyperNode that holds a name a source wants
// (what the HyperNodeConflict Event says to do) makes the source create its own at once, from
// its last answer, not after its interval (1h), whoever the blocker belonged to.
func TestDeletedBlockerWakesTheSource(t *testing.T) {
	wanted := hntesting.MakeHyperNode("fixed.1").Tier(1).Nodes("n0").Obj()
	for _, tc := range []struct {
		name    string
		blocker *topologyv1alpha1.HyperNode
		// owner is how the conflict's Event names the blocker's owner.
		owner string
	}{
		{name: "hand-made", blocker: hntesting.MakeHyperNode("fixed.1").Tier(5).Nodes("x").Obj(), owner: "it was not made by a discovery source"},
		// A source that does not run: its HyperNode's deletion wakes nobody as its owner.
		{name: "another source's", blocker: hntesting.MakeHyperNode("fixed.1").Tier(5).Nodes("x").Label(source.Label, "label").Obj(), owner: "it belongs to the source label"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &fixedSource{want: []*topologyv1alpha1.HyperNode{wanted}}
			h := newHarness(t, []runtime.Object{configMap(useFixedSource(t, src))}, tc.blocker)
			ctx := context.Background()
			h.waitEvent(t, metav1.NamespaceDefault, ReasonConflict, "the discovery source fixed wants a HyperNode of this name", tc.owner, "delete or rename it")
			if diff := cmp.Diff([]bool{true}, src.discoveries()); diff != "" {
				t.Fatalf("discoveries before the deletion, by refresh (-want,+got):\n%s", diff)
			}
			if err := h.topo.TopologyV1alpha1().HyperNodes().Delete(ctx, "fixed.1", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			var got *topologyv1alpha1.HyperNode
			err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
				hn, err := h.topo.TopologyV1alpha1().HyperNodes().Get(ctx, "fixed.1", metav1.GetOptions{})
				if err != nil {
					return false, nil
				}
				got = hn
				return hn.Labels[source.Label] == "fixed", nil
			})
			if err != nil {
				t.Fatalf("5 s after fixed.1 was deleted the source has not created its own (fixed.1: %+v; discoveries: %v)", got, src.discoveries())
			}
			if diff := cmp.Diff(wanted.Spec, got.Spec); diff != "" {
				t.Errorf("fixed.1's spec (-want,+got):\n%s", diff)
			}
			// Rebuilds from the last answer: a deletion does not ask the external system. (The
			// source's own create of fixed.1 wakes it once more, as any change of a HyperNode it
			// owns does: that rebuild may or may not have run yet.)
			if d := src.discoveries(); len(d) < 2 || !d[0] || slices.Contains(d[1:], true) {
				t.Errorf("discoveries, by refresh: %v, want true (the first) and then only false", d)
			}
		})
	}
}

// TestReconcileIsIdempotent: a second reconcile of the same answer writes nothing.
func TestReconcileIsIdempotent(t *testing.T) {
	var nodes []runtime.Object
	for i := range 40 {
		nodes = append(nodes, gkeNode(fmt.Sprintf("n%d", i), fmt.Sprintf("b%d", i%4), fmt.Sprintf("s%d", i%8)))
	}
	h := newHarness(t, nodes)
	src, errs := Factories["label"](mustEntry(t, labelConfig), h.m.opts.Env)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	ctx := context.Background()
	res, err := src.Discover(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	metrics.Register()
	created := func() float64 {
		v, err := testutil.GetCounterMetricValue(metrics.HyperNodeWrites.WithLabelValues("label", metrics.OperationCreate))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	createdBefore := created()
	sum, err := h.m.reconciler.Reconcile(ctx, "label", res.HyperNodes)
	if err != nil || sum.Created != 12 || sum.Updated+sum.Deleted != 0 {
		t.Fatalf("first reconcile: %s, %v", sum, err)
	}
	if n := created() - createdBefore; n != 12 {
		t.Errorf("hypernode_discovery_hypernode_writes_total{source=label,operation=create} moved by %v, want 12", n)
	}
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		list, _ := h.m.reconciler.lister.List(labels.Everything())
		return len(list) == 12, nil
	})
	if err != nil {
		t.Fatal("the lister never saw the 12 HyperNodes")
	}
	before := len(h.topo.Actions())
	sum, err = h.m.reconciler.Reconcile(ctx, "label", res.HyperNodes)
	if err != nil || sum.Changed() || sum.Unchanged != 12 {
		t.Errorf("second reconcile: %s, %v", sum, err)
	}
	if writes := len(h.topo.Actions()) - before; writes != 0 {
		t.Errorf("the second reconcile made %d API calls, want 0", writes)
	}
	if n := created() - createdBefore; n != 12 {
		t.Errorf("after the second reconcile, hypernode_discovery_hypernode_writes_total{create} moved by %v, want 12", n)
	}
}

func mustEntry(t *testing.T, text string) config.Entry {
	t.Helper()
	parsed, err := config.Parse(text, testNamespace)
	if err != nil || len(parsed.Entries[0].Errs) > 0 {
		t.Fatalf("%v %v", err, parsed.Entries[0].Errs)
	}
	return parsed.Entries[0]
}

// TestParentLeavesOutATakenChild: a wanted parent does not claim a child whose name a
// HyperNode the source does not own holds; a parent left with no member is not created.
func TestParentLeavesOutATakenChild(t *testing.T) {
	handMade := hntesting.MakeHyperNode("f.s1.l1").Tier(1).Nodes("x").Obj()
	h := newHarness(t, nil, handMade)
	wanted := []*topologyv1alpha1.HyperNode{
		hntesting.MakeHyperNode("f.s1.l1").Tier(1).Nodes("n0").Obj(),
		hntesting.MakeHyperNode("f.s1.l2").Tier(1).Nodes("n1").Obj(),
		hntesting.MakeHyperNode("f.s1").Tier(2).Children("f.s1.l1", "f.s1.l2").Obj(),
		hntesting.MakeHyperNode("f.s2").Tier(2).Children("f.s1.l1").Obj(),
	}
	ctx := context.Background()
	sum, err := h.m.reconciler.Reconcile(ctx, "label", wanted)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"f.s1.l1"}, sum.Conflicts); diff != "" {
		t.Errorf("conflicts (-want,+got):\n%s", diff)
	}
	s1, err := h.topo.TopologyV1alpha1().HyperNodes().Get(ctx, "f.s1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var members []string
	for _, m := range s1.Spec.Members {
		members = append(members, m.Selector.ExactMatch.Name)
	}
	if diff := cmp.Diff([]string{"f.s1.l2"}, members); diff != "" {
		t.Errorf("f.s1's members (-want,+got):\n%s", diff)
	}
	if _, err := h.topo.TopologyV1alpha1().HyperNodes().Get(ctx, "f.s2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("f.s2, whose only member is taken, was created: %v", err)
	}
}

// TestDuplicateWantedNamesWriteNothing: an answer that names two HyperNodes alike is refused.
func TestDuplicateWantedNamesWriteNothing(t *testing.T) {
	h := newHarness(t, nil)
	wanted := []*topologyv1alpha1.HyperNode{
		hntesting.MakeHyperNode("f.1").Tier(1).Nodes("n0").Obj(),
		hntesting.MakeHyperNode("f.1").Tier(2).Nodes("n1").Obj(),
	}
	_, err := h.m.reconciler.Reconcile(context.Background(), "label", wanted)
	if err == nil || err.Error() != "discovery source label wants two HyperNodes named f.1; nothing was written" {
		t.Errorf("Reconcile = %v", err)
	}
	list, _ := h.topo.TopologyV1alpha1().HyperNodes().List(context.Background(), metav1.ListOptions{})
	if len(list.Items) != 0 {
		t.Errorf("%d HyperNodes written", len(list.Items))
	}
}

// nodeLabelsRecorder records the node labels settings the manager hands over.
type nodeLabelsRecorder struct {
	mu  sync.Mutex
	got []string
}

func (r *nodeLabelsRecorder) Configure(_ context.Context, cfg config.NodeLabels) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, cfg.String())
}

func (r *nodeLabelsRecorder) wait(t *testing.T, want ...string) {
	t.Helper()
	var got []string
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		got = slices.Clone(r.got)
		return cmp.Equal(want, got), nil
	})
	if err != nil {
		t.Fatalf("node labels settings %q, want %q", got, want)
	}
}

// TestNodeLabelsConfig: the nodeLabels section reaches the publisher when it is valid; a
// mistake in it is reported and changes nothing (the sources still start); a deleted
// ConfigMap turns node labels off.
func TestNodeLabelsConfig(t *testing.T) {
	rec := &nodeLabelsRecorder{}
	h := newHarnessWith(t, rec, []runtime.Object{configMap(labelConfig + "nodeLabels:\n  enabled: true\n"), gkeNode("n0", "b1", "s1")})
	rec.wait(t, "on (at most 50 node writes per second)")
	h.waitEvent(t, testNamespace, ReasonConfigLoaded, "discovery sources running: label; node labels: on (at most 50 node writes per second)")
	ctx := context.Background()

	if _, err := h.kube.CoreV1().ConfigMaps(testNamespace).Update(ctx, configMap(labelConfig+"nodeLabels:\n  enabled: true\n  writesPerSecond: 0\n"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitEvent(t, testNamespace, ReasonInvalidConfig, "nodeLabels.writesPerSecond: Invalid value: 0: must be a positive number",
		"node labels keep their previous setting (on (at most 50 node writes per second))")

	if _, err := h.kube.CoreV1().ConfigMaps(testNamespace).Update(ctx, configMap(labelConfig+"nodeLabels:\n  enabled: true\n  writesPerSecond: 5\n"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.wait(t, "on (at most 50 node writes per second)", "on (at most 5 node writes per second)")
	if diff := cmp.Diff([]string{"label"}, h.m.Running()); diff != "" {
		t.Errorf("running sources (-want,+got):\n%s", diff)
	}

	if err := h.kube.CoreV1().ConfigMaps(testNamespace).Delete(ctx, testConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.wait(t, "on (at most 50 node writes per second)", "on (at most 5 node writes per second)", "off")
	h.waitEvent(t, testNamespace, ReasonConfigMissing, "node labels are off")
}
