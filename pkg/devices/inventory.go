package devices

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/informerutil"
)

// Inventory counts, per node and DeviceClass, the devices of the node's own ResourceSlices
// and how many of them allocated claims hold, kept by informer events: a slice event
// recounts its node, a claim event the devices it gained or lost, a class event every node
// (classes change rarely). It is what the bin-pack scores, `kubectl hypernode` and the
// metrics read as a node's devices; which members fit where is the allocator's answer
// (Fits), never these counts.
type Inventory struct {
	mu      sync.RWMutex
	cel     *cel.Cache
	classes map[string]*resourceapi.DeviceClass
	// slices are the node-local slices by name, slicesOn by node; nodes the counts per node.
	slices   map[string]*resourceapi.ResourceSlice
	slicesOn map[string]map[string]*resourceapi.ResourceSlice
	// elsewhere are the slices of devices reachable from several nodes (node selectors, all
	// nodes, per-device node selection), by name: counted on no node.
	elsewhere sets.Set[string]
	nodes     map[string]*nodeDevices
	// nodeOf maps a device of a node-local slice to its node; claims are the devices each
	// allocated claim holds, held how many claims hold each device.
	nodeOf map[structured.DeviceID]string
	claims map[types.UID][]structured.DeviceID
	held   map[structured.DeviceID]int
	// onChange hears of each node whose counts changed, after the lock is released.
	onChange []func(node string)
	// taintRules are the DeviceTaintRules by name: they may taint any device, so while one
	// exists no count is exact.
	taintRules sets.Set[string]
	// informed says which version of a slice or class the informer's store holds now (Run
	// sets it; CatchUp applies only what the store still holds).
	informed func(obj any) (resourceVersion string, ok bool)
}

// nodeDevices are one node's devices: the classes selecting each, the allocated ones, and
// the counts per class.
type nodeDevices struct {
	classesOf map[structured.DeviceID][]string
	allocated sets.Set[structured.DeviceID]
	total     map[string]int64
	used      map[string]int64
	// shared counts the devices of each class that several claims may share (consumable
	// capacity): a count of free devices says nothing of them.
	shared map[string]int64
	// plain says that the allocator takes any free device of a class here as well as any
	// other (plainDevice): counts of free devices are then exact (Bound.Exact).
	plain bool
}

// ClassCount is a class's devices on a node: Total published, Used held by allocated claims.
type ClassCount struct {
	Total, Used int64
}

// NewInventory returns an empty inventory; Run feeds it.
func NewInventory() *Inventory {
	return &Inventory{
		cel:        cel.NewCache(celCacheSize, cel.Features{}),
		classes:    map[string]*resourceapi.DeviceClass{},
		slices:     map[string]*resourceapi.ResourceSlice{},
		slicesOn:   map[string]map[string]*resourceapi.ResourceSlice{},
		elsewhere:  sets.New[string](),
		nodes:      map[string]*nodeDevices{},
		taintRules: sets.New[string](),
		held:       map[structured.DeviceID]int{},
		nodeOf:     map[structured.DeviceID]string{},
		claims:     map[types.UID][]structured.DeviceID{},
	}
}

// OnChange registers f, called with each node whose counts changed.
func (inv *Inventory) OnChange(f func(node string)) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.onChange = append(inv.onChange, f)
}

// Run feeds the inventory from the factory's DeviceClass, ResourceSlice and ResourceClaim
// informers (the scheduler's own: no extra watch).
func (inv *Inventory) Run(factory informers.SharedInformerFactory) error {
	api := factory.Resource().V1()
	slices, classes := api.ResourceSlices().Lister(), api.DeviceClasses().Lister()
	inv.informed = func(obj any) (string, bool) {
		switch o := obj.(type) {
		case *resourceapi.ResourceSlice:
			if cur, err := slices.Get(o.Name); err == nil {
				return cur.ResourceVersion, true
			}
		case *resourceapi.DeviceClass:
			if cur, err := classes.Get(o.Name); err == nil {
				return cur.ResourceVersion, true
			}
		}
		return "", false
	}
	if _, err := api.DeviceClasses().Informer().AddEventHandler(informerutil.Handlers(
		func(_, c *resourceapi.DeviceClass) { inv.SetClass(c) },
		func(c *resourceapi.DeviceClass) { inv.RemoveClass(c.Name) })); err != nil {
		return fmt.Errorf("watching DeviceClasses: %w", err)
	}
	if _, err := api.ResourceSlices().Informer().AddEventHandler(informerutil.Handlers(
		func(_, s *resourceapi.ResourceSlice) { inv.SetSlice(s) },
		func(s *resourceapi.ResourceSlice) { inv.RemoveSlice(s) })); err != nil {
		return fmt.Errorf("watching ResourceSlices: %w", err)
	}
	if _, err := api.ResourceClaims().Informer().AddEventHandler(informerutil.Handlers(
		func(_, c *resourceapi.ResourceClaim) { inv.SetClaim(c) },
		func(c *resourceapi.ResourceClaim) { inv.RemoveClaim(c.UID) })); err != nil {
		return fmt.Errorf("watching ResourceClaims: %w", err)
	}
	return nil
}

// ResourceName is the resource a class's devices count as: its extended resource name, or
// the name Kubernetes gives every class (deviceclass.resource.kubernetes.io/<class>).
func ResourceName(class *resourceapi.DeviceClass) v1.ResourceName {
	if name := ptr.Deref(class.Spec.ExtendedResourceName, ""); name != "" {
		return v1.ResourceName(name)
	}
	return v1.ResourceName(resourceapi.ResourceDeviceClassPrefix + class.Name)
}

// Counts returns a node's devices per class name (nil: none).
func (inv *Inventory) Counts(node string) map[string]ClassCount {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	n := inv.nodes[node]
	if n == nil {
		return nil
	}
	out := make(map[string]ClassCount, len(n.total))
	for class, total := range n.total {
		out[class] = ClassCount{Total: total, Used: n.used[class]}
	}
	return out
}

// Free is how many devices of a class on a node no allocated claim holds.
func (inv *Inventory) Free(node, class string) int64 {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	n := inv.nodes[node]
	if n == nil {
		return 0
	}
	return n.total[class] - n.used[class]
}

// Totals returns the devices of every node per class: [total, allocated].
func (inv *Inventory) Totals() map[string][2]int64 {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	out := map[string][2]int64{}
	for _, n := range inv.nodes {
		for class, total := range n.total {
			d := out[class]
			out[class] = [2]int64{d[0] + total, d[1] + n.used[class]}
		}
	}
	return out
}

// Amounts returns a node's devices as resources: per name in resources, the devices of the
// classes counting as that resource, used and total (nil for a node without devices). A
// device two classes select counts for each.
func (inv *Inventory) Amounts(node string, resources []v1.ResourceName) (used, total []int64) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	n := inv.nodes[node]
	if n == nil {
		return nil, nil // no devices: nothing allocated for the plans' nodes without any
	}
	used, total = make([]int64, len(resources)), make([]int64, len(resources))
	for class, t := range n.total {
		c := inv.classes[class]
		if c == nil {
			continue
		}
		name := ResourceName(c)
		for i, r := range resources {
			if r == name {
				used[i] += n.used[class]
				total[i] += t
			}
		}
	}
	return used, total
}

// SetClass adds or updates a class: every node is recounted.
func (inv *Inventory) SetClass(c *resourceapi.DeviceClass) {
	inv.mu.Lock()
	changed := inv.setClassLocked(c)
	inv.mu.Unlock()
	inv.notify(changed)
}

func (inv *Inventory) setClassLocked(c *resourceapi.DeviceClass) []string {
	inv.classes[c.Name] = c
	return inv.recountAllLocked()
}

// RemoveClass removes a class: every node is recounted.
func (inv *Inventory) RemoveClass(name string) {
	inv.mu.Lock()
	delete(inv.classes, name)
	changed := inv.recountAllLocked()
	inv.mu.Unlock()
	inv.notify(changed)
}

// SetSlice adds or updates a slice; only a node's own slices (NodeName set) are counted, as
// devices reachable from several nodes belong to none of them.
func (inv *Inventory) SetSlice(s *resourceapi.ResourceSlice) {
	inv.mu.Lock()
	changed := inv.setSliceLocked(s)
	inv.mu.Unlock()
	inv.notify(changed)
}

func (inv *Inventory) setSliceLocked(s *resourceapi.ResourceSlice) []string {
	node := ptr.Deref(s.Spec.NodeName, "")
	if node == "" {
		inv.elsewhere.Insert(s.Name)
	} else {
		inv.elsewhere.Delete(s.Name)
	}
	var changed []string
	if old := inv.slices[s.Name]; old != nil && ptr.Deref(old.Spec.NodeName, "") != node {
		changed = append(changed, inv.dropSliceLocked(old))
	}
	if node != "" {
		inv.slices[s.Name] = s
		if inv.slicesOn[node] == nil {
			inv.slicesOn[node] = map[string]*resourceapi.ResourceSlice{}
		}
		inv.slicesOn[node][s.Name] = s
		changed = append(changed, inv.recountLocked(node))
	}
	return changed
}

// RemoveSlice removes a slice and recounts its node.
func (inv *Inventory) RemoveSlice(s *resourceapi.ResourceSlice) {
	inv.mu.Lock()
	inv.elsewhere.Delete(s.Name)
	var changed []string
	if old := inv.slices[s.Name]; old != nil {
		changed = append(changed, inv.dropSliceLocked(old))
	}
	inv.mu.Unlock()
	inv.notify(changed)
}

// dropSliceLocked forgets a slice and recounts its node.
func (inv *Inventory) dropSliceLocked(s *resourceapi.ResourceSlice) string {
	node := ptr.Deref(s.Spec.NodeName, "")
	delete(inv.slices, s.Name)
	delete(inv.slicesOn[node], s.Name)
	if len(inv.slicesOn[node]) == 0 {
		delete(inv.slicesOn, node)
	}
	return inv.recountLocked(node)
}

// SetClaim records the devices an allocated claim holds (none once deallocated); admin
// access holds nothing.
func (inv *Inventory) SetClaim(c *resourceapi.ResourceClaim) {
	var held []structured.DeviceID
	if c.Status.Allocation != nil {
		for _, r := range c.Status.Allocation.Devices.Results {
			if !ptr.Deref(r.AdminAccess, false) {
				held = append(held, structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
			}
		}
	}
	inv.mu.Lock()
	changed := inv.holdLocked(c.UID, held)
	inv.mu.Unlock()
	inv.notify(changed)
}

// RemoveClaim releases the devices of a deleted claim.
func (inv *Inventory) RemoveClaim(uid types.UID) {
	inv.mu.Lock()
	changed := inv.holdLocked(uid, nil)
	inv.mu.Unlock()
	inv.notify(changed)
}

// holdLocked replaces the devices claim uid holds and returns the nodes whose counts moved.
func (inv *Inventory) holdLocked(uid types.UID, held []structured.DeviceID) []string {
	changed := sets.New[string]()
	for _, id := range inv.claims[uid] {
		if inv.held[id]--; inv.held[id] > 0 {
			continue
		}
		delete(inv.held, id)
		if node, ok := inv.nodeOf[id]; ok {
			inv.nodes[node].allocated.Delete(id)
			inv.countLocked(inv.nodes[node], id, -1)
			changed.Insert(node)
		}
	}
	if len(held) == 0 {
		delete(inv.claims, uid)
	} else {
		inv.claims[uid] = held
	}
	for _, id := range held {
		if inv.held[id]++; inv.held[id] > 1 {
			continue
		}
		if node, ok := inv.nodeOf[id]; ok {
			inv.nodes[node].allocated.Insert(id)
			inv.countLocked(inv.nodes[node], id, 1)
			changed.Insert(node)
		}
	}
	return sets.List(changed)
}

// countLocked adds sign to the used count of every class selecting id.
func (inv *Inventory) countLocked(n *nodeDevices, id structured.DeviceID, sign int64) {
	for _, class := range n.classesOf[id] {
		n.used[class] += sign
	}
}

// recountAllLocked recounts every node (a class changed what it selects).
func (inv *Inventory) recountAllLocked() []string {
	nodes := sets.New[string]()
	for node := range inv.slicesOn {
		nodes.Insert(node)
	}
	for node := range inv.nodes {
		nodes.Insert(node)
	}
	for node := range nodes {
		inv.recountLocked(node)
	}
	return sets.List(nodes)
}

// recountLocked rebuilds a node's devices from its slices (the newest generation of each
// pool, as the allocator reads them) and the claims holding them, and returns the node.
func (inv *Inventory) recountLocked(node string) string {
	if old := inv.nodes[node]; old != nil {
		for id := range old.classesOf {
			delete(inv.nodeOf, id)
		}
	}
	newest := map[[2]string]int64{}
	var own []*resourceapi.ResourceSlice
	for _, s := range inv.slicesOn[node] {
		own = append(own, s)
		pool := [2]string{s.Spec.Driver, s.Spec.Pool.Name}
		newest[pool] = max(newest[pool], s.Spec.Pool.Generation)
	}
	if len(own) == 0 {
		delete(inv.nodes, node)
		return node
	}
	n := &nodeDevices{classesOf: map[structured.DeviceID][]string{}, allocated: sets.New[structured.DeviceID](),
		total: map[string]int64{}, used: map[string]int64{}, shared: map[string]int64{}, plain: true}
	current := map[[2]string]int64{}
	for _, s := range own {
		pool := [2]string{s.Spec.Driver, s.Spec.Pool.Name}
		if s.Spec.Pool.Generation < newest[pool] {
			continue
		}
		current[pool]++
		n.plain = n.plain && plainSlice(s)
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			id := structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)
			if _, twice := n.classesOf[id]; twice {
				n.plain = false // an invalid pool: the allocator takes nothing from it
			}
			inv.nodeOf[id] = node
			n.plain = n.plain && plainDevice(d)
			var classes []string
			for name, c := range inv.classes {
				selected, failed := inv.selects(c, s.Spec.Driver, d)
				n.plain = n.plain && !failed
				if selected {
					classes = append(classes, name)
					n.total[name]++
					if ptr.Deref(d.AllowMultipleAllocations, false) {
						n.shared[name]++
					}
				}
			}
			n.classesOf[id] = classes
		}
	}
	for _, s := range own {
		// An incomplete pool (slices of its generation missing) is one the allocator skips.
		pool := [2]string{s.Spec.Driver, s.Spec.Pool.Name}
		n.plain = n.plain && (s.Spec.Pool.Generation < newest[pool] || current[pool] == s.Spec.Pool.ResourceSliceCount)
	}
	for id := range n.classesOf {
		if inv.held[id] > 0 {
			n.allocated.Insert(id)
			inv.countLocked(n, id, 1)
		}
	}
	inv.nodes[node] = n
	return node
}

// selects reports whether every CEL selector of class matches the device; a selector that
// does not compile or fails selects nothing (the allocator refuses such a class), and says
// so (failed: this inventory may judge differently from the allocator).
func (inv *Inventory) selects(class *resourceapi.DeviceClass, driver string, d *resourceapi.Device) (selected, failed bool) {
	for _, sel := range class.Spec.Selectors {
		if sel.CEL == nil {
			continue
		}
		result := inv.cel.GetOrCompile(sel.CEL.Expression)
		if result.Error != nil {
			return false, true
		}
		ok, _, err := result.DeviceMatches(context.Background(), cel.Device{Driver: driver, AllowMultipleAllocations: d.AllowMultipleAllocations, Attributes: d.Attributes, Capacity: d.Capacity})
		if err != nil {
			return false, true
		}
		if !ok {
			return false, false
		}
	}
	return true, false
}

// notify tells the listeners of the changed nodes.
func (inv *Inventory) notify(nodes []string) {
	if len(nodes) == 0 {
		return
	}
	inv.mu.RLock()
	listeners := inv.onChange
	inv.mu.RUnlock()
	for _, node := range nodes {
		for _, f := range listeners {
			f(node)
		}
	}
	klog.V(6).InfoS("Device counts changed", "nodes", len(nodes))
}
