package e2e

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/status"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/localcluster"
)

// startController runs hypernode-controller (localcluster.StartController: the manifests'
// ServiceAccount and RBAC, leader election) for one test. The cleanup stops it, puts the
// ConfigMap back as the manifests have it, deletes the HyperNodes and nodes the test made
// (hyperNodes: also every discovered one), and fails the test if the apiserver refused the
// controller anything or its log shows a credential.
func startController(t *testing.T, nodes *[]string, secrets ...string) {
	t.Helper()
	if err := cluster.StartController(t.Context(), "--status-delay=200ms"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := cluster.StopController(false); err != nil {
			t.Errorf("stopping the controller: %v", err)
		}
		if _, err := cluster.Applier.ApplyFile(ctx, filepath.Join(repoRoot, "manifests/install/05-controller-configmap.yaml"), ""); err != nil {
			t.Errorf("restoring the controller's ConfigMap: %v", err)
		}
		topo := runner.Clients.Topology.TopologyV1alpha1().HyperNodes()
		if err := topo.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Errorf("deleting HyperNodes: %v", err)
		}
		if nodes != nil {
			for _, n := range *nodes {
				if err := cluster.Kube.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("deleting node %s: %v", n, err)
				}
			}
		}
		lines := controllerLogLines(t, func(l string) bool { return strings.Contains(strings.ToLower(l), "forbidden") })
		if len(lines) > 0 {
			t.Errorf("the controller, running under manifests/install/04-controller-rbac.yaml, was refused %d requests; first:\n%s", len(lines), lines[0])
		}
		for _, s := range secrets {
			if leaked := controllerLogLines(t, func(l string) bool { return strings.Contains(l, s) }); len(leaked) > 0 {
				t.Errorf("the controller's log shows a credential: %s", leaked[0])
			}
		}
	})
}

// controllerLogLines returns the lines of the controller's log (every run) that match.
func controllerLogLines(t *testing.T, match func(string) bool) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(cluster.Dir, "logs", "hypernode-controller.log"))
	if err != nil {
		t.Fatalf("reading the controller's log: %v", err)
	}
	defer func() { _ = f.Close() }()
	var out []string
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<22)
	for scanner.Scan() {
		if match(scanner.Text()) {
			out = append(out, scanner.Text())
		}
	}
	return out
}

// setDiscoveryConfig writes the controller's ConfigMap key.
func setDiscoveryConfig(t *testing.T, text string) {
	t.Helper()
	cms := cluster.Kube.CoreV1().ConfigMaps(localcluster.SchedulerNamespace)
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		cm, err := cms.Get(ctx, localcluster.ControllerConfigMap, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cm.Data = map[string]string{config.Key: text}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("updating the controller's ConfigMap: %v", err)
	}
}

// waitEvent waits for an Event on the controller's ConfigMap (namespace hypernode-system) or
// on a HyperNode (namespace default), recorded after since, with the reason and a note that
// contains every text; it returns the note.
func waitEvent(t *testing.T, since time.Time, namespace, reason string, texts ...string) string {
	t.Helper()
	var note string
	var seen []string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := cluster.Kube.EventsV1().Events(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		seen = nil
		for _, ev := range list.Items {
			if ev.ReportingController != "hypernode.dev/hypernode-controller" || ev.EventTime.Time.Before(since) {
				continue
			}
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
		t.Fatalf("no Event %s with %q since %s; the controller's Events:\n%s", reason, texts, since.Format(time.TimeOnly), strings.Join(seen, "\n"))
	}
	return note
}

// discovered returns the HyperNodes a source owns, by name.
func discovered(t *testing.T, sourceName string) map[string]*topologyv1alpha1.HyperNode {
	t.Helper()
	list, err := runner.Clients.Topology.TopologyV1alpha1().HyperNodes().List(t.Context(), metav1.ListOptions{LabelSelector: source.Label + "=" + sourceName})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*topologyv1alpha1.HyperNode{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

func names[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// waitDiscovered waits until a source owns exactly the HyperNodes named.
func waitDiscovered(t *testing.T, sourceName string, want ...string) map[string]*topologyv1alpha1.HyperNode {
	t.Helper()
	slices.Sort(want)
	var got map[string]*topologyv1alpha1.HyperNode
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		got = discovered(t, sourceName)
		return slices.Equal(want, names(got)), nil
	})
	if err != nil {
		t.Fatalf("HyperNodes of source %s: %v, want %v", sourceName, names(got), want)
	}
	return got
}

// wantStatus is a HyperNode's expected status.
type wantStatus struct {
	nodeCount int64
	valid     metav1.ConditionStatus
	reason    string
}

// waitStatus waits until each HyperNode's status is as expected.
func waitStatus(t *testing.T, want map[string]wantStatus) {
	t.Helper()
	got := map[string]wantStatus{}
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for name := range want {
			hn, err := runner.Clients.Topology.TopologyV1alpha1().HyperNodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				got[name] = wantStatus{reason: err.Error()}
				continue
			}
			s := wantStatus{nodeCount: hn.Status.NodeCount}
			if c := meta.FindStatusCondition(hn.Status.Conditions, status.ConditionValid); c != nil {
				s.valid, s.reason = c.Status, c.Reason
				if c.ObservedGeneration != hn.Generation {
					s.reason += " (stale generation)"
				}
			}
			got[name] = s
		}
		for name, w := range want {
			if got[name] != w {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("HyperNode status: got %+v, want %+v", got, want)
	}
}

// createNodes creates plain nodes (not simulated by kwok: the controller reads names and
// labels only) and records them for the cleanup.
func createNodes(t *testing.T, record *[]string, nodes ...*v1.Node) {
	t.Helper()
	for _, n := range nodes {
		if _, err := cluster.Kube.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating node %s: %v", n.Name, err)
		}
		*record = append(*record, n.Name)
	}
}
