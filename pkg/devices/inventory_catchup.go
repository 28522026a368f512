package devices

import (
	resourceapi "k8s.io/api/resource/v1"
)

// CatchUp applies a ResourceSlice or DeviceClass change that kube-scheduler's queue is telling
// a hint about, when the inventory has not had it from its own handler yet: the informer
// hands each handler its events on a goroutine of its own, so the plan the hint triggers
// could otherwise bound a node by the devices it had before the change. It applies the
// change only when the inventory holds exactly the change's old object (nothing, for an
// add), and the informer's store still holds the change's new object, so that a late call
// never takes it back to an older one nor brings back a deleted one.
func (inv *Inventory) CatchUp(oldObj, newObj any) {
	if inv == nil {
		return
	}
	var changed []string
	inv.mu.Lock()
	if inv.informed != nil {
		// Under the lock: the inventory's own handler cannot apply a later change meanwhile.
		obj, ok := newObj.(interface{ GetResourceVersion() string })
		if rv, held := inv.informed(newObj); !ok || !held || rv != obj.GetResourceVersion() {
			inv.mu.Unlock()
			return
		}
	}
	switch obj := newObj.(type) {
	case *resourceapi.ResourceSlice:
		old, _ := oldObj.(*resourceapi.ResourceSlice)
		if cur := inv.slices[obj.Name]; (old == nil && cur == nil) || (old != nil && cur != nil && old.ResourceVersion == cur.ResourceVersion) {
			changed = inv.setSliceLocked(obj)
		}
	case *resourceapi.DeviceClass:
		old, _ := oldObj.(*resourceapi.DeviceClass)
		if cur := inv.classes[obj.Name]; (old == nil && cur == nil) || (old != nil && cur != nil && old.ResourceVersion == cur.ResourceVersion) {
			changed = inv.setClassLocked(obj)
		}
	}
	inv.mu.Unlock()
	inv.notify(changed)
}
