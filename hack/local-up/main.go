// Command local-up runs the local control plane of pkg/localcluster (etcd, kube-apiserver with
// RBAC, the Job controller, kwok and hypernode-scheduler under its manifests' RBAC identity)
// until it is interrupted, then stops every process it started.
//
//	make local-up            # or: go run ./hack/local-up [-dir DIR] [-nodes-from-seed]
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
	fmt.Printf(`local-up: the control plane is running. In another shell:

  export KUBECONFIG=%s
  kubectl apply -f manifests/examples/seed-001-hypernodes.yaml
  bin/kubectl-hypernode tree

Logs: %s/logs. Nodes are simulated by kwok: create them with the annotation
%s=fake. Press Ctrl-C to stop everything.
`, cluster.AdminKubeconfig, cluster.Dir, localcluster.KwokNodeAnnotation)
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "local-up: stopping")
}
