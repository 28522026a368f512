package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	topologyclient "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/crdclient"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

const cacheTestController = "hypernode-cache-test"

// TestHyperNodeCycleIsolatedAndRepaired runs the HyperNode cache against the real apiserver
// (and the scheduler, which runs its own cache): a cycle introduced in one subtree is reported
// as Events on the HyperNodes involved while the other subtree keeps serving placement, and
// fixing the object brings the subtree back.
func TestHyperNodeCycleIsolatedAndRepaired(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newClients(t)

	var nodeNames []string
	for i := range 8 {
		nodeNames = append(nodeNames, fmt.Sprintf("node-%d", i))
	}
	nodeNames = append(nodeNames, "x-0", "x-1")
	withNodes(t, c, nodeNames...)

	hyperNodes, err := util.ReadHyperNodes(filepath.Join(util.RepoRoot(), "manifests", "examples", "seed-001-hypernodes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	hyperNodes = append(hyperNodes,
		hntesting.MakeHyperNode("x0").Tier(1).Nodes("x-0", "x-1").Obj(),
		hntesting.MakeHyperNode("x1").Tier(2).Children("x0").Obj(),
		hntesting.MakeHyperNode("x2").Tier(3).Children("x1").Obj(),
	)
	for _, hn := range hyperNodes {
		createHyperNode(t, c, hn)
	}

	// The scheduler runs its own cache (through NetworkTopologyAware) and reports too.
	startScheduler(t, nil)

	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: c.kube.EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	defer broadcaster.Shutdown()
	logger, _ := ktesting.NewTestContext(t)
	cache := hypernode.NewCache(logger, broadcaster.NewRecorder(scheme.Scheme, cacheTestController))
	factory := informers.NewSharedInformerFactory(c.kube, 0)
	if err := cache.Run(ctx, factory, topologyclient.NewForConfigOrDie(crdclient.JSONConfig(controlPlane.Config))); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if err := cache.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}

	healthy := map[int][]string{1: {"s0", "s1", "s2", "s3", "x0"}, 2: {"s4", "s5", "x1"}, 3: {"s6", "x2"}}
	waitForCandidates(t, cache, healthy)

	// x1 now also contains x2, which contains x1: a cycle in the x subtree only.
	updateHyperNode(t, c, "x1", []topologyv1alpha1.MemberSpec{hntesting.ChildMember("x0"), hntesting.ChildMember("x2")})
	waitForCandidates(t, cache, map[int][]string{1: {"s0", "s1", "s2", "s3"}, 2: {"s4", "s5"}, 3: {"s6"}})
	snap := cache.Snapshot()
	if leaf, ok := snap.LeafOf("node-5"); !ok || leaf != "s2" {
		t.Errorf("LeafOf(node-5) = %q, %v; want s2", leaf, ok)
	}
	if leaf, ok := snap.LeafOf("x-0"); ok {
		t.Errorf("x-0 is still placed in leaf %s under the cycle", leaf)
	}
	if got, _ := snap.HyperNode("s6"); got.NodeCount != 8 {
		t.Errorf("s6 node count = %d, want 8", got.NodeCount)
	}
	for _, name := range []string{"x1", "x2"} {
		for _, controller := range []string{cacheTestController, plugins.SchedulerName} {
			note := waitForEvent(t, c, name, hypernode.ReasonCycle, controller)
			if want := "HyperNode " + name + ": it is on a membership cycle of HyperNodes x1, x2; it and everything below it are excluded from topology placement"; !strings.HasPrefix(note, want) {
				t.Errorf("%s event of %s from %s = %q, want prefix %q", hypernode.ReasonCycle, name, controller, note, want)
			}
		}
	}

	// Fixing x1 brings the x subtree back, without a restart.
	updateHyperNode(t, c, "x1", []topologyv1alpha1.MemberSpec{hntesting.ChildMember("x0")})
	waitForCandidates(t, cache, healthy)
	if leaf, ok := cache.Snapshot().LeafOf("x-1"); !ok || leaf != "x0" {
		t.Errorf("LeafOf(x-1) = %q, %v; want x0", leaf, ok)
	}
	for _, name := range []string{"x1", "x2"} {
		waitForEvent(t, c, name, hypernode.EventReasonTopologyValid, cacheTestController)
	}
}

func createHyperNode(t *testing.T, c clients, hn *topologyv1alpha1.HyperNode) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.topology.TopologyV1alpha1().HyperNodes().Create(ctx, hn, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating HyperNode %s: %v", hn.Name, err)
	}
	t.Cleanup(func() {
		_ = c.topology.TopologyV1alpha1().HyperNodes().Delete(ctx, hn.Name, metav1.DeleteOptions{})
	})
}

func updateHyperNode(t *testing.T, c clients, name string, members []topologyv1alpha1.MemberSpec) {
	t.Helper()
	ctx := context.Background()
	hn, err := c.topology.TopologyV1alpha1().HyperNodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hn.Spec.Members = members
	if _, err := c.topology.TopologyV1alpha1().HyperNodes().Update(ctx, hn, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("updating HyperNode %s: %v", name, err)
	}
}

func waitForCandidates(t *testing.T, cache *hypernode.Cache, want map[int][]string) {
	t.Helper()
	var got map[int][]string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		s := cache.Snapshot()
		got = map[int][]string{}
		for _, tier := range s.Tiers() {
			if c := s.Candidates(tier); len(c) > 0 {
				got[tier] = c
			}
		}
		return cmp.Equal(want, got), nil
	})
	if err != nil {
		t.Fatalf("candidates never became %v (last %v): %v", want, got, err)
	}
}

// waitForEvent waits for an Event about the current HyperNode object of that name (earlier
// objects of the same name do not count) with the given reason, reported by the given
// controller, and returns its note.
func waitForEvent(t *testing.T, c clients, hyperNode, reason, controller string) string {
	t.Helper()
	obj, err := c.topology.TopologyV1alpha1().HyperNodes().Get(context.Background(), hyperNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return waitForObjectEvent(t, c, metav1.NamespaceDefault, "HyperNode", obj.UID, reason, controller, "")
}

// waitForObjectEvent waits for an Event in namespace about the object with the given kind and
// UID, with the given reason, reported by controller ("" for any), whose note contains
// contains; it returns the note.
func waitForObjectEvent(t *testing.T, c clients, namespace, kind string, uid types.UID, reason, controller, contains string) string {
	t.Helper()
	var note string
	var seen []string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := c.kube.EventsV1().Events(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		seen = nil
		for _, e := range list.Items {
			if e.Regarding.UID == uid {
				seen = append(seen, fmt.Sprintf("%s/%s: %s", e.ReportingController, e.Reason, e.Note))
			}
			if e.Regarding.Kind == kind && e.Regarding.UID == uid && e.Reason == reason &&
				(controller == "" || e.ReportingController == controller) && strings.Contains(e.Note, contains) {
				note = e.Note
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s Event on %s %s from %q containing %q (events about it: %q): %v", reason, kind, uid, controller, contains, seen, err)
	}
	return note
}
