package podgroup

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ClusterAllocatable returns the sum of the allocatable resources of all nodes. The returned
// list must not be modified.
func (r *Registry) ClusterAllocatable() v1.ResourceList {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.clusterAllocatable
}

// SetNode records a node's allocatable resources.
func (r *Registry) SetNode(old, node *v1.Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setNodeLocked(node.Name, node.Status.Allocatable)
	if old == nil || NodeCapacityChanged(old, node) {
		// A blocker may fit now; kube-scheduler's own hints retry it.
		r.unblockAllLocked()
	}
}

// NodeCapacityChanged reports a node update that can make room for a pod that did not fit:
// allocatable resources, labels, taints or schedulability changed.
func NodeCapacityChanged(old, node *v1.Node) bool {
	return !equality.Semantic.DeepEqual(old.Status.Allocatable, node.Status.Allocatable) ||
		!equality.Semantic.DeepEqual(old.Labels, node.Labels) ||
		!equality.Semantic.DeepEqual(old.Spec.Taints, node.Spec.Taints) ||
		old.Spec.Unschedulable != node.Spec.Unschedulable
}

// DeleteNode forgets a node.
func (r *Registry) DeleteNode(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setNodeLocked(name, nil)
}

func (r *Registry) setNodeLocked(name string, alloc v1.ResourceList) {
	// Build a new total instead of mutating the published one: readers hold it unlocked.
	total := r.clusterAllocatable.DeepCopy()
	for res, q := range r.nodeAllocatable[name] {
		t := total[res]
		t.Sub(q)
		total[res] = t
	}
	for res, q := range alloc {
		t, ok := total[res]
		if !ok {
			t = resource.Quantity{Format: q.Format}
		}
		t.Add(q)
		total[res] = t
	}
	if alloc == nil {
		delete(r.nodeAllocatable, name)
	} else {
		r.nodeAllocatable[name] = alloc
	}
	r.clusterAllocatable = total
}
