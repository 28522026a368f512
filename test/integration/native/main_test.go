// Package native runs this project's scheduler in-process against a kube-apiserver with
// Kubernetes' own pod groups turned on (gates GenericWorkload and
// TopologyAwareWorkloadScheduling, API scheduling.k8s.io/v1beta1). It is a package of its own
// because the gates are process-wide and decided when the apiserver starts: the other
// integration tests run with them off, as a default cluster does.
package native

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// gates are the feature gates of the apiserver and, through the process-wide gate, of the
// scheduler.
const gates = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"

var controlPlane *util.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	tb := &util.MainTB{Verbose: os.Getenv("HYPERNODE_TEST_VERBOSE") != ""}
	defer tb.RunCleanups()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cp, err := util.StartControlPlane(ctx, tb, "--feature-gates="+gates, "--runtime-config=scheduling.k8s.io/v1beta1=true")
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the control plane: %v\n", err)
		return 1
	}
	defer cp.Stop()
	controlPlane = cp
	return m.Run()
}
