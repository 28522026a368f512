package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/demo"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/inspect"
)

// TestDiscoveryDemoScene runs the discovery scene of `make demo`: hypernode-controller builds
// the 64-node fabric's HyperNodes from topograph node labels and writes their status, and the
// scheduler places jobs on them exactly as on the hand-written fabric (24 pods in three whole
// leaves of the first spine, 8 in the next free leaf); kubectl hypernode tree names the
// source of every HyperNode.
func TestDiscoveryDemoScene(t *testing.T) {
	t.Cleanup(func() { assertSchedulerAuthorized(t, cluster.Dir) })
	ctx := t.Context()
	scene := demo.DiscoveryScene()
	t.Cleanup(func() {
		if err := runner.Teardown(context.Background(), scene); err != nil {
			t.Errorf("teardown: %v", err)
		}
		if lines := controllerLogLines(t, func(l string) bool { return strings.Contains(strings.ToLower(l), "forbidden") }); len(lines) > 0 {
			t.Errorf("the controller was refused %d requests; first:\n%s", len(lines), lines[0])
		}
	})
	if err := runner.Setup(ctx, scene); err != nil {
		t.Fatal(err)
	}
	leafOf := func(node string) string {
		var n int
		if _, err := fmt.Sscanf(node, "gpu-%d", &n); err != nil {
			t.Fatalf("node %s", node)
		}
		return fmt.Sprintf("topograph.core-0.spine-%d.leaf-%d", n/32, n/8)
	}
	got := map[string]map[string]int{}
	for _, job := range scene.Jobs {
		res, err := runner.Submit(ctx, scene, job)
		if err != nil {
			t.Fatal(err)
		}
		e, err := runner.Report(ctx, scene.Namespace, job.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := demo.Check(res, e); err != nil {
			t.Error(err)
		}
		perLeaf := map[string]int{}
		for _, node := range res.Bound {
			perLeaf[leafOf(node)]++
		}
		got[job.Name] = perLeaf
	}
	want := map[string]map[string]int{
		"spine-job": {"topograph.core-0.spine-0.leaf-0": 8, "topograph.core-0.spine-0.leaf-1": 8, "topograph.core-0.spine-0.leaf-2": 8},
		"leaf-job":  {"topograph.core-0.spine-0.leaf-3": 8},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("placements (-want,+got):\n%s", diff)
	}
	c, err := inspect.LoadWith(ctx, runner.Clients, inspect.LoadOptions{SkipEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	var walk func(h inspect.HyperNodeReport)
	count := 0
	walk = func(h inspect.HyperNodeReport) {
		if !h.Virtual {
			count++
			if h.Source != "label" || h.Valid == nil || !*h.Valid || h.Status == nil || h.Status.Valid != "True" || h.Status.NodeCount != int64(h.Nodes) {
				t.Errorf("tree row %s: source %q, valid %v, status %+v, nodes %d", h.Name, h.Source, h.Valid, h.Status, h.Nodes)
			}
		}
		for _, c := range h.Children {
			walk(c)
		}
	}
	walk(c.Tree(demo.GPU).Root)
	if count != scene.Discovered {
		t.Errorf("the tree shows %d HyperNodes, want %d", count, scene.Discovered)
	}
}
