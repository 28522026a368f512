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

// TestCatchUpNeverBringsBackADeletedSlice: a hint for a slice's add that comes after the
// slice was deleted (the informer's store no longer holds it) applies nothing.
func TestCatchUpNeverBringsBackADeletedSlice(t *testing.T) {
	inv := devices.NewInventory()
	inv.SetClass(selecting(className, driver, ""))
	_, slice := gpuNode("node-a", 4)
	slice.ResourceVersion = "7"
	store := map[string]string{slice.Name: "7"}
	inv.SetInformed(func(obj any) (string, bool) {
		s, ok := obj.(interface{ GetName() string })
		if !ok {
			return "", false
		}
		rv, held := store[s.GetName()]
		return rv, held
	})
	inv.SetSlice(slice)
	inv.RemoveSlice(slice) // the inventory's handler saw the delete
	delete(store, slice.Name)
	inv.CatchUp(nil, slice) // the queue's hint for the add, late
	if got := inv.Counts("node-a"); got != nil {
		t.Errorf("node-a after a late add of its deleted slice: %v, want no devices", got)
	}
	store[slice.Name] = "7"
	inv.CatchUp(nil, slice) // the store holds it: the add is applied
	if got := inv.Counts("node-a")[className].Total; got != 4 {
		t.Errorf("node-a: %d devices, want 4", got)
	}
}
