package podgroup

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"strings"

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

// MinResourcesShortfall describes the resources of the group's minResources that exceed what
// the whole cluster can allocate ("" when none does). A group found short is remembered until
// a node change gives the cluster enough, which then activates its members: kube-scheduler's
// own node event may reach the queue before this registry has counted the node, and the
// member it requeued is refused again.
func (r *Registry) MinResourcesShortfall(key Key, min v1.ResourceList) string {
	r.mu.RLock()
	short := shortfall(min, r.clusterAllocatable)
	known := r.shortOfCluster.Has(key)
	r.mu.RUnlock()
	if (short != "") != known {
		r.mu.Lock()
		// Again under the write lock: a node counted in between, before the group was
		// remembered short, would wake nobody.
		short = shortfall(min, r.clusterAllocatable)
		if short != "" {
			r.shortOfCluster.Insert(key)
		} else {
			r.shortOfCluster.Delete(key)
		}
		r.mu.Unlock()
	}
	return short
}

// shortfall describes the resources of want that exceed have, or "".
func shortfall(want, have v1.ResourceList) string {
	var parts []string
	for name, q := range want {
		h := have[name]
		if q.Cmp(h) > 0 {
			parts = append(parts, fmt.Sprintf("%s %s (cluster allocatable %s)", name, q.String(), quantityString(h)))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func quantityString(q resource.Quantity) string {
	if q.IsZero() {
		return "0"
	}
	return q.String()
}

// SetNode records a node's allocatable resources.
func (r *Registry) SetNode(old, node *v1.Node) {
	r.mu.Lock()
	r.setNodeLocked(node.Name, node.Status.Allocatable)
	changed := old == nil || NodeCapacityChanged(old, node)
	var enough []Key
	var out Outcome
	if changed {
		// Only a new node or new allocatable can cover minResources: a status heartbeat
		// recounts nothing.
		enough = r.enoughNowLocked()
		if r.state != nil {
			// A blocker may fit now (kube-scheduler's own hints retry it), a gang waiting for
			// room may have it.
			out = r.state.NodesChanged()
		}
	}
	r.mu.Unlock()
	for _, key := range enough {
		r.Notify(key, false)
	}
	out.run()
}

// enoughNowLocked forgets and returns the groups remembered short of the cluster's allocatable
// that it now covers. O(groups short). r.mu must be held.
func (r *Registry) enoughNowLocked() []Key {
	var out []Key
	for key := range r.shortOfCluster {
		g := r.groups[key]
		if g == nil || g.podGroup == nil || shortfall(g.podGroup.Spec.MinResources, r.clusterAllocatable) == "" {
			r.shortOfCluster.Delete(key)
			if g != nil && g.podGroup != nil {
				out = append(out, key)
			}
		}
	}
	return out
}

// NodeCapacityChanged reports a node update that can make room for a pod that did not fit:
// allocatable resources, labels, taints, schedulability or declared features (the
// NodeDeclaredFeatures filter) changed.
func NodeCapacityChanged(old, node *v1.Node) bool {
	return !equality.Semantic.DeepEqual(old.Status.Allocatable, node.Status.Allocatable) ||
		!equality.Semantic.DeepEqual(old.Labels, node.Labels) ||
		!equality.Semantic.DeepEqual(old.Spec.Taints, node.Spec.Taints) ||
		old.Spec.Unschedulable != node.Spec.Unschedulable ||
		!slices.Equal(old.Status.DeclaredFeatures, node.Status.DeclaredFeatures)
}

// NodeFingerprint hashes what of a node NodeCapacityChanged compares (name, allocatable,
// labels, taints, schedulability, declared features), independently of map and list order:
// summed over the nodes of a cycle's snapshot, it tells a gang waiting for room whether the
// nodes it failed on changed (unplaced.go). Heartbeats and conditions do not move it, nor an
// allocatable amount written in another format ("1Gi", "1073741824").
func NodeFingerprint(node *v1.Node) uint64 {
	mix := func(kind byte, amount int64, parts ...string) uint64 {
		var d maphash.Hash
		d.SetSeed(fingerprintSeed)
		d.WriteByte(kind)
		for _, p := range parts {
			d.WriteString(p)
			d.WriteByte(0)
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(amount))
		d.Write(b[:])
		return d.Sum64()
	}
	var sum uint64
	for name, q := range node.Status.Allocatable {
		sum += mix('a', QuantityAmount(name, q), string(name))
	}
	for k, v := range node.Labels {
		sum += mix('l', 0, k, v)
	}
	for _, t := range node.Spec.Taints {
		sum += mix('t', 0, t.Key, t.Value, string(t.Effect))
	}
	if node.Spec.Unschedulable {
		sum += mix('u', 0)
	}
	for _, f := range node.Status.DeclaredFeatures {
		sum += mix('f', 0, f)
	}
	// The name's hash ties the parts to the node: a label moving to another node changes the
	// sum over the nodes.
	return maphash.String(fingerprintSeed, node.Name) ^ sum
}

// fingerprintSeed is fixed for the process: fingerprints are compared only within it.
var fingerprintSeed = maphash.MakeSeed()

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
