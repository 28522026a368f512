package devices_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
)

// TestCatchUp: a change the inventory has not had yet is applied; a change it had, or one
// older than what it holds, is not.
func TestCatchUp(t *testing.T) {
	inv := devices.NewInventory()
	inv.SetClass(selecting(className, driver, ""))
	_, v1 := gpuNode("node-a", 4)
	v1.ResourceVersion = "1"
	v2 := v1.DeepCopy()
	v2.ResourceVersion = "2"
	v2.Spec.Devices = append(v2.Spec.Devices, v2.Spec.Devices[0])
	v2.Spec.Devices[4].Name = "dev-4"
	v3 := v2.DeepCopy()
	v3.ResourceVersion = "3"
	v3.Spec.Devices = v3.Spec.Devices[:2]
	total := func() int64 { return inv.Counts("node-a")[className].Total }

	inv.CatchUp(nil, v1) // an add the inventory has not had
	if got := total(); got != 4 {
		t.Fatalf("after the add: %d devices, want 4", got)
	}
	inv.CatchUp(v1, v2) // the next update
	if got := total(); got != 5 {
		t.Fatalf("after the update: %d devices, want 5", got)
	}
	inv.SetSlice(v3)    // its own handler, ahead of a hint
	inv.CatchUp(v1, v2) // late: must not take it back
	inv.CatchUp(nil, v1)
	if diff := cmp.Diff(int64(2), total()); diff != "" {
		t.Errorf("devices after late changes (-want +got):\n%s", diff)
	}
	var nilInv *devices.Inventory
	nilInv.CatchUp(nil, v1) // no inventory: nothing to do
}
