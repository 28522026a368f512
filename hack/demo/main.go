// Command demo is `make demo`: it starts the local control plane (pkg/localcluster), submits
// the seed examples of manifests/examples one by one (pkg/demo), prints where each job's pods
// landed (or why a job waits) as kubectl-hypernode explains it, and the HyperNode tree; then
// it stops everything it started and ends with one success or failure line.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/demo"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/inspect"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/localcluster"
)

func main() {
	root := flag.String("repo", ".", "repository root (holds bin/ and manifests/)")
	keep := flag.Bool("keep", false, "keep the working directory (certificates, kubeconfigs, logs) after a successful run")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	summary, err := run(ctx, *root, *keep)
	banner("=", "Summary")
	for _, line := range summary {
		fmt.Println("  " + line)
	}
	if err != nil {
		fmt.Printf("DEMO FAILED after %s: %v\n", time.Since(start).Round(time.Second), err)
		os.Exit(1)
	}
	fmt.Printf("DEMO OK in %s: every job placed inside its network domain, also on the HyperNodes discovered from node labels and as Kubernetes' own pod group; the job that cannot fit is pending with its explanation, nothing of it bound.\n",
		time.Since(start).Round(time.Second))
}

func run(ctx context.Context, root string, keep bool) (summary []string, err error) {
	fmt.Println("Starting the local control plane (etcd, kube-apiserver, the Job controller, kwok, hypernode-scheduler; hypernode-controller for the discovery scene)...")
	cluster, err := localcluster.Start(ctx, localcluster.Options{RepoRoot: root, Log: os.Stdout})
	if err != nil {
		return nil, err
	}
	defer func() {
		cluster.Stop()
		if err != nil || keep {
			fmt.Printf("Logs and kubeconfigs kept in %s\n", cluster.Dir)
			return
		}
		_ = os.RemoveAll(cluster.Dir)
	}()
	runner, err := demo.NewRunner(cluster, os.Stdout)
	if err != nil {
		return nil, err
	}
	// The scenes with hand-written HyperNodes, then the same fabric discovered from node
	// labels by hypernode-controller.
	for _, scene := range append(demo.Scenes(), demo.DiscoveryScene()) {
		if summary, err = runScene(ctx, runner, scene, summary); err != nil {
			return summary, err
		}
	}
	// Kubernetes' own pod groups, on a control plane of their own with their gates on.
	fmt.Println("\nStarting a second control plane with Kubernetes' own pod groups turned on (GenericWorkload, TopologyAwareWorkloadScheduling, WorkloadWithJob)...")
	native, err := localcluster.Start(ctx, localcluster.Options{RepoRoot: root, Log: os.Stdout, NativePodGroups: true})
	if err != nil {
		return summary, err
	}
	defer func() {
		native.Stop()
		if err != nil || keep {
			fmt.Printf("Logs and kubeconfigs of the native pod groups' control plane kept in %s\n", native.Dir)
			return
		}
		_ = os.RemoveAll(native.Dir)
	}()
	nativeRunner, err := demo.NewRunner(native, os.Stdout)
	if err != nil {
		return summary, err
	}
	return runScene(ctx, nativeRunner, demo.NativeScene(), summary)
}

// runScene sets a scene up, submits its jobs one by one (with plan first where asked), prints
// and checks each outcome and the tree, and tears it down.
func runScene(ctx context.Context, runner *demo.Runner, scene demo.Scene, summary []string) ([]string, error) {
	banner("=", scene.Title)
	if err := runner.Setup(ctx, scene); err != nil {
		return summary, err
	}
	for _, job := range scene.Jobs {
		var plan *inspect.PlanReport
		if job.Plan {
			banner("-", fmt.Sprintf("kubectl hypernode plan -f manifests/examples/%s -n %s (before submitting)", job.File, scene.Namespace))
			p, err := runner.Plan(ctx, scene, job)
			if err != nil {
				return summary, err
			}
			plan = &p
		}
		banner("-", fmt.Sprintf("%s/%s (manifests/examples/%s)", scene.Namespace, job.Name, job.File))
		res, err := runner.Submit(ctx, scene, job)
		if err != nil {
			return summary, err
		}
		explanation, err := runner.ReportJob(ctx, scene.Namespace, job)
		if err != nil {
			return summary, err
		}
		if plan != nil {
			if err := demo.CheckPlan(*plan, res, explanation); err != nil {
				return summary, err
			}
			summary = append(summary, fmt.Sprintf("%s: landed where kubectl hypernode plan said before it was submitted", plan.Job))
		}
		summary = append(summary, demo.Summary(res, explanation))
		if err := demo.Check(res, explanation); err != nil {
			return summary, err
		}
	}
	banner("-", "kubectl hypernode tree")
	if err := runner.ReportTree(ctx); err != nil {
		return summary, err
	}
	return summary, runner.Teardown(ctx, scene)
}

func banner(char, title string) {
	fmt.Println()
	fmt.Println(strings.Repeat(char, 3) + " " + title)
}
