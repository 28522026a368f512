package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/demo"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/inspect"
)

// TestDemoScenes runs every scene of `make demo` and asserts exact placements, as the number
// of each job's pods on each leaf switch: that is what the planner decides (the lowest tier
// that holds the gang, the best bin-packing candidate of that tier with ties by name, as few
// leaves as possible). Which node of a leaf takes which pod is kube-scheduler's choice among
// equally scored nodes, which it makes at random.
func TestDemoScenes(t *testing.T) {
	t.Cleanup(func() { assertSchedulerAuthorized(t, cluster.Dir) })
	ctx := t.Context()
	want := map[string]map[string]int{
		// Nothing fits 3 pods in one 2-node leaf, ever.
		"seed-001/too-big": {},
		// The first leaf by name.
		"seed-001/tier1-gang": {"s0": 2},
		// s4 has 2 free nodes left, s5 has 4: s5, filling s2 before using s3.
		"seed-001/tier2-gang": {"s2": 2, "s3": 1},
		// Soft: no leaf nor spine has 3 free nodes, so the gang runs across the core, on
		// the last free nodes.
		"seed-001/soft-gang": {"s1": 2, "s3": 1},
		// 8 pods of 1 GPU: one ToR switch (two 4-GPU nodes) holds them; the first by name.
		"seed-002/seed-002-job": {"tor-1": 8},
		// 24 pods: three whole leaves of the first spine.
		"fabric-64/spine-job": {"leaf-0": 8, "leaf-1": 8, "leaf-2": 8},
		// Two partitions of 4, in the same spine as spine-job (bin-packing), both in its
		// last free leaf.
		"fabric-64/llm-train": {"leaf-3": 8},
		// spine-0 is full: the first leaf of spine-1.
		"fabric-64/leaf-job": {"leaf-4": 8},
	}
	got := map[string]map[string]int{}
	for _, scene := range demo.Scenes() {
		if err := runner.Setup(ctx, scene); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			// Also after a failure, so that the next test starts from an empty cluster.
			if err := runner.Teardown(context.Background(), scene); err != nil {
				t.Errorf("teardown of %s: %v", scene.Namespace, err)
			}
		})
		var results []demo.Result
		for _, job := range scene.Jobs {
			var plan inspect.PlanReport
			if job.Plan {
				var err error
				if plan, err = runner.Plan(ctx, scene, job); err != nil {
					t.Fatal(err)
				}
			}
			res, err := runner.Submit(ctx, scene, job)
			if err != nil {
				t.Fatal(err)
			}
			results = append(results, res)
			explanation, err := runner.Report(ctx, scene.Namespace, job.Name)
			if err != nil {
				t.Fatal(err)
			}
			if job.Plan {
				if err := demo.CheckPlan(plan, res, explanation); err != nil {
					t.Error(err)
				}
			}
			if err := demo.Check(res, explanation); err != nil {
				t.Error(err)
			}
			if job.Pending {
				const wantReason = "hard topology (tier<=1): no HyperNode can host 3 pods; tier 1: s0 2/3, s1 2/3 (+2 more)"
				if !strings.Contains(res.Message, wantReason) {
					t.Errorf("%s: the scheduler's explanation\n%s\ndoes not contain\n%s", job.Name, res.Message, wantReason)
				}
			}
		}
		// Re-read every job once all are submitted: a pending gang must still have nothing bound.
		for _, res := range results {
			final, err := runner.Observe(ctx, scene, res.Job)
			if err != nil {
				t.Fatal(err)
			}
			perLeaf := map[string]int{}
			for _, node := range final.Bound {
				perLeaf[leafIn(t, scene.Namespace, node)]++
			}
			got[scene.Namespace+"/"+res.Job.Name] = perLeaf
			if res.Job.Name == "llm-train" {
				assertPartitions(t, final.Bound)
			}
		}
		if scene.Namespace == "seed-001" {
			assertKubectlPlugin(t, ctx)
		}
		if err := runner.Teardown(ctx, scene); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("placements (-want,+got):\n%s", diff)
	}
}

// assertPartitions checks the sub-groups of llm-train (partitionSize 4, hard tier 1): workers
// 0-3 share one leaf, workers 4-7 share one leaf.
func assertPartitions(t *testing.T, bound map[string]string) {
	t.Helper()
	for _, part := range [][]string{{"0", "1", "2", "3"}, {"4", "5", "6", "7"}} {
		leaves := map[string]bool{}
		for _, idx := range part {
			node, ok := bound["llm-train-"+idx]
			if !ok {
				t.Errorf("llm-train worker %s is not bound (bound: %v)", idx, bound)
				continue
			}
			leaves[leafIn(t, "fabric-64", node)] = true
		}
		if len(leaves) != 1 {
			t.Errorf("llm-train partition %v spans leaves %v, want one", part, leaves)
		}
	}
}

// assertKubectlPlugin runs bin/kubectl-hypernode against the cluster, as an admin would.
func assertKubectlPlugin(t *testing.T, ctx context.Context) {
	t.Helper()
	run := func(args ...string) string {
		cmd := exec.CommandContext(ctx, filepath.Join(repoRoot, "bin", "kubectl-hypernode"), append([]string{"--kubeconfig", cluster.AdminKubeconfig}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl-hypernode %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	text := run("explain", "too-big", "-n", "seed-001")
	for _, want := range []string{"PodGroup seed-001/too-big: Pending", "minMember 3; members: 3 live (0 bound, 3 pending)"} {
		if !strings.Contains(text, want) {
			t.Errorf("kubectl-hypernode explain output lacks %q:\n%s", want, text)
		}
	}
	for i, line := range strings.Split(text, "\n") {
		if len(line) > 80 {
			t.Errorf("explain line %d is %d columns wide: %q", i+1, len(line), line)
		}
	}
	var e inspect.Explanation
	if err := json.Unmarshal([]byte(run("explain", "tier2-gang", "-n", "seed-001", "-o", "json")), &e); err != nil {
		t.Fatalf("explain -o json: %v", err)
	}
	if e.PodGroup != "seed-001/tier2-gang" || e.Members.Bound != 3 || e.Placement == nil {
		t.Errorf("explain -o json: podGroup %q, bound %d, placement %v; want seed-001/tier2-gang, 3, set", e.PodGroup, e.Members.Bound, e.Placement)
	}
	var tree inspect.TreeReport
	if err := json.Unmarshal([]byte(run("tree", "-o", "json")), &tree); err != nil {
		t.Fatalf("tree -o json: %v", err)
	}
	if tree.Resource != string(demo.GPU) {
		t.Errorf("tree -o json: resource %q, want %q", tree.Resource, demo.GPU)
	}
	treeText := run("tree")
	if !strings.Contains(treeText, "seed-001/tier1-gang (2)") {
		t.Errorf("kubectl-hypernode tree does not show tier1-gang's two pods:\n%s", treeText)
	}
}

// leafIn is the leaf switch of a node in a demo scene: in seed-001 node-N is in s(N/2), in
// seed-002 node-N in tor-((N+1)/2), in the 64-node fabric (and the restart tests) gpu-NN in
// leaf-(NN/8).
func leafIn(t *testing.T, scene, node string) string {
	t.Helper()
	var n int
	switch {
	case scene == "seed-001":
		if _, err := fmt.Sscanf(node, "node-%d", &n); err == nil {
			return fmt.Sprintf("s%d", n/2)
		}
	case scene == "seed-002":
		if _, err := fmt.Sscanf(node, "node-%d", &n); err == nil {
			return fmt.Sprintf("tor-%d", (n+1)/2)
		}
	default:
		if _, err := fmt.Sscanf(node, "gpu-%d", &n); err == nil {
			return fmt.Sprintf("leaf-%d", n/8)
		}
	}
	t.Fatalf("node %s is not in scene %s", node, scene)
	return ""
}
