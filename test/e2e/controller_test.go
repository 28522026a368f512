package e2e

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	topologyclient "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/status"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/crdclient"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/inspect"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/localcluster"
)

// TestControllerRunsUnderManifestRBAC checks who the controller is and what it may not do.
// That it may do everything it needs is checked by every controller test's cleanup: its log
// must show no refused request.
func TestControllerRunsUnderManifestRBAC(t *testing.T) {
	startController(t, nil)
	ctx := t.Context()
	cfg, err := clientcmd.BuildConfigFromFlags("", cluster.ControllerKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	topo, err := topologyclient.NewForConfig(crdclient.JSONConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const wantUser = "system:serviceaccount:" + localcluster.SchedulerNamespace + ":" + localcluster.ControllerServiceAccount
	if got := review.Status.UserInfo.Username; got != wantUser {
		t.Errorf("the controller authenticates as %q, want %q", got, wantUser)
	}
	ns := localcluster.SchedulerNamespace
	forbidden := map[string]error{}
	_, forbidden["list Secrets in its namespace"] = kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	_, forbidden["get a Secret its config does not name"] = kube.CoreV1().Secrets(ns).Get(ctx, "other-secret", metav1.GetOptions{})
	_, forbidden["get a Secret in kube-system"] = kube.CoreV1().Secrets("kube-system").Get(ctx, "ufm-credentials", metav1.GetOptions{})
	_, forbidden["list every ConfigMap of its namespace"] = kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	_, forbidden["get another ConfigMap"] = kube.CoreV1().ConfigMaps(ns).Get(ctx, "hypernode-scheduler-config", metav1.GetOptions{})
	_, forbidden["get the scheduler's Lease"] = kube.CoordinationV1().Leases(ns).Get(ctx, localcluster.SchedulerLease, metav1.GetOptions{})
	_, forbidden["list pods"] = kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	forbidden["update a node"] = kube.CoreV1().Nodes().Delete(ctx, "no-such-node", metav1.DeleteOptions{})
	_, forbidden["create Events in kube-system"] = kube.EventsV1().Events("kube-system").Create(ctx, nil, metav1.CreateOptions{})
	for what, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s as the controller: got %v, want Forbidden", what, err)
		}
	}
	// What it needs, by name (NotFound is fine: the request was authorized).
	if _, err := kube.CoreV1().Secrets(ns).Get(ctx, "ufm-credentials", metav1.GetOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("reading the credentials Secret its config names: %v", err)
	}
	if _, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + localcluster.ControllerConfigMap}); err != nil {
		t.Errorf("listing its ConfigMap by name: %v", err)
	}
	if _, err := topo.TopologyV1alpha1().HyperNodes().Create(ctx, hntesting.MakeHyperNode("rbac-probe").Tier(1).Nodes("x").Obj(),
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("creating a HyperNode (dry run): %v", err)
	}
	holder, err := kube.CoordinationV1().Leases(ns).Get(ctx, localcluster.ControllerLease, metav1.GetOptions{})
	if err != nil || holder.Spec.HolderIdentity == nil || *holder.Spec.HolderIdentity == "" {
		t.Errorf("the controller's Lease %s/%s: %v, %v", ns, localcluster.ControllerLease, holder, err)
	}
}

// TestControllerStatus: every HyperNode, hand-made, gets status.nodeCount (existing nodes
// below, recursively) and Valid with the scheduler validator's reason; status follows nodes
// joining and a fix.
func TestControllerStatus(t *testing.T) {
	var nodes []string
	startController(t, &nodes)
	ctx := t.Context()
	createNodes(t, &nodes,
		st.MakeNode().Name("status-n0").Obj(), st.MakeNode().Name("status-n1").Obj(), st.MakeNode().Name("status-n2").Obj(),
		st.MakeNode().Name("status-n3").Obj())
	hns := runner.Clients.Topology.TopologyV1alpha1().HyperNodes()
	for _, hn := range []*topologyv1alpha1.HyperNode{
		hntesting.MakeHyperNode("status-leaf-a").Tier(1).Nodes("status-n0", "status-n1", "status-missing").Obj(),
		hntesting.MakeHyperNode("status-leaf-b").Tier(1).NodeRegex("^status-n2$").Obj(),
		hntesting.MakeHyperNode("status-bad").Tier(1).Nodes("status-n3").NodeRegex("([").Obj(),
		hntesting.MakeHyperNode("status-spine").Tier(2).Children("status-leaf-a", "status-leaf-b", "status-not-yet").Obj(),
	} {
		if _, err := hns.Create(ctx, hn, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitStatus(t, map[string]wantStatus{
		"status-leaf-a": {2, metav1.ConditionTrue, status.ReasonValid},
		"status-leaf-b": {1, metav1.ConditionTrue, status.ReasonValid},
		"status-bad":    {1, metav1.ConditionFalse, "InvalidMember"},
		"status-spine":  {3, metav1.ConditionFalse, "MissingMember"},
	})
	// A node joins; the missing member appears.
	createNodes(t, &nodes, st.MakeNode().Name("status-missing").Obj())
	if _, err := hns.Create(ctx, hntesting.MakeHyperNode("status-not-yet").Tier(1).Nodes("status-other").Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, map[string]wantStatus{
		"status-leaf-a":  {3, metav1.ConditionTrue, status.ReasonValid},
		"status-not-yet": {0, metav1.ConditionTrue, status.ReasonValid},
		"status-spine":   {4, metav1.ConditionTrue, status.ReasonValid},
	})
	hn, err := hns.Get(ctx, "status-bad", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range hn.Status.Conditions {
		if c.Type == status.ConditionValid && !strings.Contains(c.Message, `regexMatch pattern "([" does not compile`) {
			t.Errorf("status-bad's Valid message %q does not say why", c.Message)
		}
	}
}

// TestControllerLabelDiscovery: the label source builds a topograph tree keyed by full path
// (the same leaf name under two spines is two HyperNodes), reports nodes without a level, and
// a conflicting hand-made HyperNode; kubectl hypernode tree shows source, count and validity;
// node labels that change move the node; disabling the source keeps its HyperNodes.
func TestControllerLabelDiscovery(t *testing.T) {
	var nodes []string
	startController(t, &nodes)
	ctx := t.Context()
	start := time.Now()
	tier := func(n int) string { return fmt.Sprintf("fabric.topograph.run/tier-%d", n) }
	node := func(name, spine, leaf string) *v1.Node {
		w := st.MakeNode().Name(name).Label(tier(1), spine)
		if leaf != "" {
			w = w.Label(tier(0), leaf)
		}
		return w.Obj()
	}
	createNodes(t, &nodes,
		node("lbl-0", "sp-a", "leaf-1"), node("lbl-1", "sp-a", "leaf-1"),
		node("lbl-2", "sp-b", "leaf-1"), node("lbl-3", "sp-b", "leaf-2"),
		node("lbl-4", "sp-b", ""), // no leaf label: attached to its spine
	)
	// A hand-made HyperNode holds a name the source wants.
	handMade := hntesting.MakeHyperNode("topograph.sp-a").Tier(5).Nodes("elsewhere").Obj()
	if _, err := runner.Clients.Topology.TopologyV1alpha1().HyperNodes().Create(ctx, handMade, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setDiscoveryConfig(t, "networkTopologyDiscovery:\n- source: label\n  enabled: true\n  config:\n    presets: [topograph]\n")
	wrapper := source.Name("topograph", "sp-b\x00no-leaf")
	got := waitDiscovered(t, "label", "topograph.sp-a.leaf-1", "topograph.sp-b", "topograph.sp-b.leaf-1", "topograph.sp-b.leaf-2", wrapper)
	if sp := got["topograph.sp-b"]; sp.Spec.Tier != 2 || sp.Spec.TierName != "spine" || len(sp.Spec.Members) != 3 {
		t.Errorf("topograph.sp-b: tier %d %q, %d members", sp.Spec.Tier, sp.Spec.TierName, len(sp.Spec.Members))
	}
	waitStatus(t, map[string]wantStatus{
		"topograph.sp-a.leaf-1": {2, metav1.ConditionTrue, status.ReasonValid},
		"topograph.sp-b":        {3, metav1.ConditionTrue, status.ReasonValid},
		"topograph.sp-b.leaf-1": {1, metav1.ConditionTrue, status.ReasonValid},
		wrapper:                 {1, metav1.ConditionTrue, status.ReasonValid},
	})
	if hn, err := runner.Clients.Topology.TopologyV1alpha1().HyperNodes().Get(ctx, "topograph.sp-a", metav1.GetOptions{}); err != nil || hn.Spec.Tier != 5 || hn.Labels[source.Label] != "" {
		t.Errorf("the hand-made HyperNode changed: %+v, %v", hn, err)
	}
	waitEvent(t, start, metav1.NamespaceDefault, discovery.ReasonConflict, "the discovery source label wants a HyperNode of this name")
	waitEvent(t, start, localcluster.SchedulerNamespace, "NodesMissingTopologyLabel", "1 node(s) carry some of its labels but not fabric.topograph.run/tier-0 (lbl-4)")

	// kubectl hypernode tree: source, count, validity.
	c, err := inspect.LoadWith(ctx, runner.Clients, inspect.LoadOptions{SkipEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := inspect.WriteTree(&buf, c.Tree(v1.ResourceCPU)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"VALID  SOURCE", "topograph.sp-b.leaf-2", "label"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("kubectl hypernode tree lacks %q:\n%s", want, buf.String())
		}
	}

	// lbl-3 moves to leaf-1 of sp-b: leaf-2 is gone, leaf-1 has two nodes.
	n3, err := cluster.Kube.CoreV1().Nodes().Get(ctx, "lbl-3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n3.Labels[tier(0)] = "leaf-1"
	if _, err := cluster.Kube.CoreV1().Nodes().Update(ctx, n3, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDiscovered(t, "label", "topograph.sp-a.leaf-1", "topograph.sp-b", "topograph.sp-b.leaf-1", wrapper)
	waitStatus(t, map[string]wantStatus{"topograph.sp-b.leaf-1": {2, metav1.ConditionTrue, status.ReasonValid}})

	// Disabled: the source stops, its HyperNodes stay, new nodes are not discovered.
	stopped := time.Now()
	setDiscoveryConfig(t, "networkTopologyDiscovery:\n- source: label\n  enabled: false\n  config:\n    presets: [topograph]\n")
	waitEvent(t, stopped, localcluster.SchedulerNamespace, discovery.ReasonSourceStopped, "its HyperNodes are kept")
	createNodes(t, &nodes, node("lbl-5", "sp-c", "leaf-9"))
	waitStatus(t, map[string]wantStatus{"topograph.sp-b.leaf-1": {2, metav1.ConditionTrue, status.ReasonValid}})
	if got := discovered(t, "label"); len(got) != 4 {
		t.Errorf("after disabling, the source owns %v, want the 4 HyperNodes it had", names(got))
	}
}
