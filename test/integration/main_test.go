// Package integration runs this project's scheduler in-process against a real kube-apiserver
// (with embedded etcd and the project's CRDs). All in-process tests live in this one package:
// each package linking kube-apiserver and the scheduler is a large test binary that is slow to
// link, and one shared apiserver per package keeps the suite fast.
package integration

import (
	"context"
	"fmt"
	"os"
	"testing"

	clientset "k8s.io/client-go/kubernetes"
	schedclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	topologyclient "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// controlPlane is shared by every test of the package; tests isolate themselves with their own
// namespace and delete the cluster-scoped objects (nodes, HyperNodes) they create.
var controlPlane *util.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	tb := &util.MainTB{Verbose: os.Getenv("HYPERNODE_TEST_VERBOSE") != ""}
	defer tb.RunCleanups()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cp, err := util.StartControlPlane(ctx, tb)
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the control plane: %v\n", err)
		return 1
	}
	defer cp.Stop()
	controlPlane = cp
	return m.Run()
}

// clients are the typed clients of the shared control plane.
type clients struct {
	kube       clientset.Interface
	topology   topologyclient.Interface
	scheduling schedclientset.Interface
}

func newClients(t *testing.T) clients {
	t.Helper()
	c, err := util.NewClients(controlPlane.Config)
	if err != nil {
		t.Fatal(err)
	}
	return clients{kube: c.Kube, topology: c.Topology, scheduling: c.Scheduling}
}
