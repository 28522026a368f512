// Command local-up runs the local control plane of pkg/localcluster (etcd, kube-apiserver with
// RBAC, the Job controller, kwok, and hypernode-scheduler and hypernode-controller under their
// manifests' RBAC identities) until it is interrupted, then stops every process it started.
//
//	make local-up            # or: go run ./hack/local-up [-dir DIR] [-v N]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/localcluster"
)

func main() {
	dir := flag.String("dir", "", "working directory for certificates, kubeconfigs, data and logs (default: a new temporary directory)")
	root := flag.String("repo", ".", "repository root (holds bin/ and manifests/)")
	v := flag.Int("v", 2, "scheduler log verbosity")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cluster, err := localcluster.Start(ctx, localcluster.Options{RepoRoot: *root, Dir: *dir, Log: os.Stderr, SchedulerVerbosity: *v})
	if err != nil {
		fmt.Fprintln(os.Stderr, "local-up: FAILED:", err)
		os.Exit(1)
	}
	defer cluster.Stop()
	if err := cluster.StartController(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "local-up: FAILED:", err)
		cluster.Stop()
		os.Exit(1)
	}
	node := `{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-'$i'", "annotations": {"` +
		localcluster.KwokNodeAnnotation + `": "fake"}}, "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}, "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}}}`
	fmt.Printf(`local-up: the control plane is running. In another shell:

  export KUBECONFIG=%s PATH=$PWD/bin:$PATH
  export SCHEDULER=%s CONTROLLER=%s   # for docs/troubleshooting.md
  for i in 0 1 2 3 4 5 6 7; do echo '%s' | kubectl create -f -; done
  kubectl apply -f manifests/examples/seed-001-hypernodes.yaml
  kubectl apply -f manifests/examples/seed-001-job-tier1.yaml
  kubectl hypernode tree

hypernode-controller runs too: it writes every HyperNode's status. To discover HyperNodes from
topograph node labels (fabric.topograph.run/tier-N), turn its label source on:

  kubectl apply -f manifests/examples/discovery-topograph.yaml

Nodes annotated %s=fake are simulated by kwok (Ready; their pods Running).
Logs: %s/logs. Press Ctrl-C to stop everything.
`, cluster.AdminKubeconfig, cluster.SchedulerAddress(), cluster.ControllerAddress(), node, localcluster.KwokNodeAnnotation, cluster.Dir)
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "local-up: stopping")
}
