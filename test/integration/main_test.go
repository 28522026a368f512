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
	"github.com/hypernode-dev/hypernode-scheduler/pkg/metrics/metricstest"
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
	code := m.Run()
	// Every scheduler the tests ran kept its gangs' state inside the table of their life.
	if n, err := metricstest.GangStateViolations(); err != nil || n > 0 {
		fmt.Fprintf(os.Stderr, "gang state changes outside the table (hypernode_gang_state_violations_total): %v, %v; the scheduler's log names them\n", n, err)
		return 1
	}
	return code
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
