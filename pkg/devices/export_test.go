package devices

// SetInformed stands in for the informer's store that Run reads (CatchUp's check).
func (inv *Inventory) SetInformed(f func(obj any) (resourceVersion string, ok bool)) {
	inv.informed = f
}
