package devices_test

import (
	"testing"

	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices/devicestest"
)

// The shared fake and builders (devicestest), by the short names these tests use.
const (
	driver    = devicestest.Driver
	className = devicestest.ClassName
	namespace = devicestest.Namespace
)

type fakeDRA = devicestest.FakeDRA

var (
	newFakeDRA  = devicestest.NewFakeDRA
	gpuNode     = devicestest.GPUNode
	claimPod    = devicestest.ClaimPod
	sharingPod  = devicestest.SharingPod
	sharedClaim = devicestest.SharedClaim
	allocation  = devicestest.Allocation
	allocate    = devicestest.Allocate
	bound       = devicestest.Bound
	copyOf      = devicestest.CopyOf
	nodeInfo    = devicestest.NodeInfo
)

// stateFor is a simulation's CycleState with a device source over dra attached.
func stateFor(t *testing.T, dra fwk.SharedDRAManager) fwk.CycleState {
	t.Helper()
	state := framework.NewCycleState()
	devices.Attach(state, devices.NewSource(dra, structured.Features{}).WithVictims())
	return state
}

// verdict is what Fits answers, compared whole.
type verdict struct {
	Fits   bool
	Reason string
}
