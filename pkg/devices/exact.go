package devices

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/informers"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/informerutil"
)

// Exact counts. For the commonest request, a number of devices of one class from a claim per
// pod, on a node whose devices the allocator treats alike, how many pods fit is the node's
// free devices of the class divided by the count: the allocator takes any free device the
// class selects, one as well as another. A plan then counts such nodes without running
// DynamicResources' Filter or the allocator (Bound.Exact); every other request or node is
// simulated (Fits).

// plainSlice reports whether a slice shares no counters between its devices (partitionable
// devices: one device's allocation can use up another's) and skips no node operations (the
// allocator refuses those devices on nodes without the feature).
func plainSlice(s *resourceapi.ResourceSlice) bool {
	return len(s.Spec.SharedCounters) == 0 && !ptr.Deref(s.Spec.PerDeviceNodeSelection, false) && len(s.Spec.SkipNodeOperations) == 0
}

// plainDevice reports whether the allocator gives the device to any request of a class that
// selects it, once it is free: no taint (a request may not tolerate it), no counters it
// consumes, no binding conditions (allocation waits on the driver), not shared between claims
// (consumable capacity), no node resources it takes too (DynamicResources checks the node's
// CPU and memory for them), and reachable from its slice's node only.
func plainDevice(d *resourceapi.Device) bool {
	return len(d.Taints) == 0 && len(d.ConsumesCounters) == 0 && len(d.BindingConditions) == 0 && len(d.NodeAllocatableResources) == 0 &&
		len(d.BindingFailureConditions) == 0 && !ptr.Deref(d.AllowMultipleAllocations, false) &&
		d.NodeName == nil && d.NodeSelector == nil && !ptr.Deref(d.AllNodes, false)
}

// RunTaintRules follows the DeviceTaintRules from the factory's informer (the scheduler's
// own, whose rules its DRA manager applies): call it when the scheduler applies them.
func (inv *Inventory) RunTaintRules(factory informers.SharedInformerFactory) error {
	if _, err := factory.Resource().V1().DeviceTaintRules().Informer().AddEventHandler(informerutil.Handlers(
		func(_, r *resourceapi.DeviceTaintRule) { inv.SetTaintRule(r) },
		func(r *resourceapi.DeviceTaintRule) { inv.RemoveTaintRule(r) })); err != nil {
		return fmt.Errorf("watching DeviceTaintRules: %w", err)
	}
	return nil
}

// SetTaintRule records a DeviceTaintRule added or updated.
func (inv *Inventory) SetTaintRule(r *resourceapi.DeviceTaintRule) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.taintRules.Insert(r.Name)
}

// RemoveTaintRule forgets a deleted DeviceTaintRule.
func (inv *Inventory) RemoveTaintRule(r *resourceapi.DeviceTaintRule) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.taintRules.Delete(r.Name)
}

// Exact reports whether Members(node) is exactly how many pods of the bound's demand the node
// takes, as the allocator would find: the demand is exact (Demand.Exact: one class, counts
// only), the class is known, no DeviceTaintRule exists, no devices are reachable from several
// nodes, and the node's devices are plain (no taints, counters, binding conditions or sharing;
// complete, valid pools; class selectors this inventory evaluates as the allocator does).
func (b *Bound) Exact(node string) bool {
	if !b.ExactDemand() {
		return false
	}
	b.inv.mu.RLock()
	defer b.inv.mu.RUnlock()
	for class := range b.demand.ByClass {
		if b.inv.classes[class] == nil {
			return false
		}
	}
	if b.inv.taintRules.Len() > 0 || b.inv.elsewhere.Len() > 0 {
		return false
	}
	n := b.inv.nodes[node]
	return n == nil || n.plain
}

// ExactDemand reports whether the bound's demand can be counted exactly on plain nodes
// (Exact).
func (b *Bound) ExactDemand() bool {
	return b != nil && b.demand.Exact && len(b.demand.ByClass) == 1
}

// CountedByBound marks a simulation's state whose pods' devices a bound counted exactly
// (Bound.Exact): Fits answers yes in it, as DynamicResources' Filter is skipped there too.
// state must be the caller's own copy.
func CountedByBound(state fwk.CycleState) {
	s := stateOf(state)
	if s == nil {
		return
	}
	state.Write(stateKey, &simulationState{source: s.source, counted: true})
}
