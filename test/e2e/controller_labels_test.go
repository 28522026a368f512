package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/nodelabels"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/status"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

// scrapeController parses the running controller's /metrics.
func scrapeController(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+cluster.ControllerAddress()+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// labelWrites is the controller's count of node label patches that succeeded.
func labelWrites(t *testing.T) int {
	t.Helper()
	return int(sample(scrapeController(t), "hypernode_node_label_writes_total", map[string]string{"result": "success"}))
}

// tierState is what the test compares on a node: every label, and the ownership record.
type tierState struct {
	Labels map[string]string
	Record string
}

// waitTierLabels waits until the nodes have exactly these labels and records.
func waitTierLabels(t *testing.T, want map[string]tierState) {
	t.Helper()
	got := map[string]tierState{}
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for name := range want {
			n, err := cluster.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			got[name] = tierState{Labels: n.Labels, Record: n.Annotations[hypernode.TierLabelsAnnotation]}
		}
		return cmp.Equal(want, got), nil
	})
	if err != nil {
		t.Fatalf("node labels (-want +got):\n%s", cmp.Diff(want, got))
	}
}

// TestControllerTreeLabels: with nodeLabels on, the tree the label source discovered is
// published as node labels, hypernode.dev/tier-<tier> = the HyperNode's name (a long one
// mapped), one write per node; a label someone else wrote stays and is reported; a rename of
// a HyperNode, a node moving leaf and publishing turned off change exactly the labels they
// must, and off leaves no label or record of the controller's.
func TestControllerTreeLabels(t *testing.T) {
	var nodes []string
	startController(t, &nodes)
	ctx := t.Context()
	start := time.Now()
	const spine, leaf = "fabric.topograph.run/tier-1", "fabric.topograph.run/tier-0"
	const t1, t2, t3 = "hypernode.dev/tier-1", "hypernode.dev/tier-2", "hypernode.dev/tier-3"
	node := func(name, sp, lf string, extra ...string) *v1.Node {
		l := map[string]string{spine: sp, leaf: lf}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	}
	createNodes(t, &nodes,
		node("tl-0", "sp-a", "leaf-1"), node("tl-1", "sp-a", "leaf-1"),
		node("tl-2", "sp-b", "leaf-1"), node("tl-3", "sp-b", "leaf-2"),
		// Someone else's label of a tier the tree has.
		node("tl-4", "sp-a", "leaf-1", t2, "mine"),
	)
	discoveryOnly := "networkTopologyDiscovery:\n- source: label\n  enabled: true\n  config:\n    presets: [topograph]\n"
	setDiscoveryConfig(t, discoveryOnly)
	waitDiscovered(t, "label", "topograph.sp-a", "topograph.sp-a.leaf-1", "topograph.sp-b", "topograph.sp-b.leaf-1", "topograph.sp-b.leaf-2")
	waitStatus(t, map[string]wantStatus{
		"topograph.sp-a": {3, metav1.ConditionTrue, status.ReasonValid},
		"topograph.sp-b": {2, metav1.ConditionTrue, status.ReasonValid},
	})

	// On: the discovered tree as labels, one write per node.
	before := labelWrites(t)
	setDiscoveryConfig(t, discoveryOnly+"nodeLabels:\n  enabled: true\n  writesPerSecond: 20\n")
	both := t1 + "," + t2
	want := map[string]tierState{
		"tl-0": {map[string]string{spine: "sp-a", leaf: "leaf-1", t1: "topograph.sp-a.leaf-1", t2: "topograph.sp-a"}, both},
		"tl-1": {map[string]string{spine: "sp-a", leaf: "leaf-1", t1: "topograph.sp-a.leaf-1", t2: "topograph.sp-a"}, both},
		"tl-2": {map[string]string{spine: "sp-b", leaf: "leaf-1", t1: "topograph.sp-b.leaf-1", t2: "topograph.sp-b"}, both},
		"tl-3": {map[string]string{spine: "sp-b", leaf: "leaf-2", t1: "topograph.sp-b.leaf-2", t2: "topograph.sp-b"}, both},
		"tl-4": {map[string]string{spine: "sp-a", leaf: "leaf-1", t1: "topograph.sp-a.leaf-1", t2: "mine"}, t1},
	}
	waitTierLabels(t, want)
	if n := labelWrites(t) - before; n != 5 {
		t.Errorf("first publish: %d node writes, want 5", n)
	}
	waitEvent(t, start, metav1.NamespaceDefault, nodelabels.ReasonTierLabelNotOwned, "node tl-4 has the label(s) hypernode.dev/tier-2=mine")

	// A hand-made core above both spines, with a name too long for a label value.
	hns := runner.Clients.Topology.TopologyV1alpha1().HyperNodes()
	long := "tl-core." + strings.Repeat("c", 60)
	if _, err := hns.Create(ctx, hntesting.MakeHyperNode(long).Tier(3).Children("topograph.sp-a", "topograph.sp-b").Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Its first 52 characters, '-', the first 10 hex digits of its SHA-256.
	mapped := "tl-core." + strings.Repeat("c", 44) + "-" + fmt.Sprintf("%x", sha256.Sum256([]byte(long)))[:10]
	all := t1 + "," + t2 + "," + t3
	for name, s := range want {
		s.Labels[t3] = mapped
		if name != "tl-4" {
			s.Record = all
		} else {
			s.Record = t1 + "," + t3
		}
		want[name] = s
	}
	waitTierLabels(t, want)

	// The core renamed: deleted, created under another name. The delete and the create are
	// usually one write per node (--status-delay collects them); a slow machine may see them
	// apart, two writes.
	before = labelWrites(t)
	if err := hns.Delete(ctx, long, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := hns.Create(ctx, hntesting.MakeHyperNode("tl-core-2").Tier(3).Children("topograph.sp-a", "topograph.sp-b").Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, s := range want {
		s.Labels[t3] = "tl-core-2"
	}
	waitTierLabels(t, want)
	n := labelWrites(t) - before
	t.Logf("rename: %d node writes for 5 nodes", n)
	if n < 5 || n > 10 {
		t.Errorf("rename: %d node writes, want 5 (one per node), 10 at most", n)
	}

	// tl-3 moves to leaf-1 of its spine.
	before = labelWrites(t)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := cluster.Kube.CoreV1().Nodes().Get(ctx, "tl-3", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n.Labels[leaf] = "leaf-1"
		_, err = cluster.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil // the controller wrote the node meanwhile
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	want["tl-3"].Labels[leaf] = "leaf-1"
	want["tl-3"].Labels[t1] = "topograph.sp-b.leaf-1"
	waitTierLabels(t, want)
	waitDiscovered(t, "label", "topograph.sp-a", "topograph.sp-a.leaf-1", "topograph.sp-b", "topograph.sp-b.leaf-1")
	if n := labelWrites(t) - before; n != 1 {
		t.Errorf("a node moving leaf: %d node writes, want 1", n)
	}

	// Off: exactly the labels the controller wrote go, with its records; tl-4's own label stays.
	before = labelWrites(t)
	setDiscoveryConfig(t, discoveryOnly+"nodeLabels:\n  enabled: false\n")
	waitTierLabels(t, map[string]tierState{
		"tl-0": {Labels: map[string]string{spine: "sp-a", leaf: "leaf-1"}},
		"tl-1": {Labels: map[string]string{spine: "sp-a", leaf: "leaf-1"}},
		"tl-2": {Labels: map[string]string{spine: "sp-b", leaf: "leaf-1"}},
		"tl-3": {Labels: map[string]string{spine: "sp-b", leaf: "leaf-1"}},
		"tl-4": {Labels: map[string]string{spine: "sp-a", leaf: "leaf-1", t2: "mine"}},
	})
	if n := labelWrites(t) - before; n != 5 {
		t.Errorf("turned off: %d node writes, want 5", n)
	}
	list, err := cluster.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range list.Items {
		if r, ok := n.Annotations[hypernode.TierLabelsAnnotation]; ok {
			t.Errorf("node %s still has the record %q after turning node labels off", n.Name, r)
		}
	}
}
