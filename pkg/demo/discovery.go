package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/status"
)

// DiscoveryScene is the 64-node fabric again, but nobody writes its HyperNodes:
// hypernode-controller discovers them from the topograph labels its nodes carry (leaf, spine
// and core switch of each node), and keeps their status; then jobs run on them.
func DiscoveryScene() Scene {
	return Scene{
		Namespace:  "discovery",
		Title:      "Discovery: the 64-node fabric built by hypernode-controller from topograph node labels",
		Discovery:  "discovery-topograph.yaml",
		Discovered: 11, // 8 leaves, 2 spines, 1 core
		Nodes: gpuNodes(nodeNames("gpu-%02d", 0, 63), 8, func(i int) map[string]string {
			return map[string]string{
				"fabric.topograph.run/tier-2": "core-0",
				"fabric.topograph.run/tier-1": fmt.Sprintf("spine-%d", i/32),
				"fabric.topograph.run/tier-0": fmt.Sprintf("leaf-%d", i/8),
			}
		}),
		Jobs: []Job{
			{Name: "spine-job", File: "fabric-64-job-tier2.yaml", Pods: 24},
			{Name: "leaf-job", File: "fabric-64-job-tier1.yaml", Pods: 8},
		},
	}
}

// discover starts hypernode-controller if it is not running, turns on the scene's discovery
// configuration, and waits until the controller has created the scene's HyperNodes and
// written their status (every one valid, with its nodes counted).
func (r *Runner) discover(ctx context.Context, s Scene) error {
	if p := r.Cluster.Controller(); p == nil || exited(p.Exited) {
		if err := r.Cluster.StartController(ctx); err != nil {
			return err
		}
	}
	start := time.Now()
	if _, err := r.Cluster.Applier.ApplyFile(ctx, r.example(s.Discovery), ""); err != nil {
		return err
	}
	var ready, total int
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, r.Timeout, true, func(ctx context.Context) (bool, error) {
		list, err := r.Clients.Topology.TopologyV1alpha1().HyperNodes().List(ctx, metav1.ListOptions{LabelSelector: source.Label})
		if err != nil {
			return false, err
		}
		total, ready = len(list.Items), 0
		for _, hn := range list.Items {
			c := meta.FindStatusCondition(hn.Status.Conditions, status.ConditionValid)
			if c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == hn.Generation && hn.Status.NodeCount > 0 {
				ready++
			}
		}
		return total == s.Discovered && ready == total, nil
	})
	if err != nil {
		return fmt.Errorf("discovery: %d HyperNodes, %d with a valid status, want %d: %w", total, ready, s.Discovered, err)
	}
	_, _ = fmt.Fprintf(r.Out, "hypernode-controller discovered %d HyperNodes from node labels and wrote their status in %s (manifests/examples/%s)\n",
		total, time.Since(start).Round(100*time.Millisecond), s.Discovery)
	return nil
}

// stopDiscovery stops the controller and puts its ConfigMap back as the manifests have it
// (every source off), so that nothing discovers the scene's HyperNodes again.
func (r *Runner) stopDiscovery(ctx context.Context) error {
	if err := r.Cluster.StopController(false); err != nil {
		return err
	}
	_, err := r.Cluster.Applier.ApplyFile(ctx, filepath.Join(r.Cluster.RepoRoot, "manifests", "install", "05-controller-configmap.yaml"), "")
	return err
}

func exited(f func() (bool, error)) bool {
	done, _ := f()
	return done
}
