package devices

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// fits reports whether pod's claims can be allocated on ni's node once takers (the claims of
// ni's other pods that hold no devices yet: copies of a member, nominated or planned
// members, in ni's order; Source.takers) have taken their devices, and once the devices of
// the allocated claims none of whose users is on ni any more (victims a simulation removed)
// are free again. When filtered (the DynamicResources Filter accepted pod on the node as the
// cluster is) and ni changes nothing the cluster's devices already say, it does not allocate
// again. shared are the shared claims takers already allocate.
func (s *Snapshot) fits(ctx context.Context, ni fwk.NodeInfo, pod *v1.Pod, filtered bool, takers [][]*resourceapi.ResourceClaim, shared sets.Set[types.UID]) (bool, string, error) {
	node := ni.Node()
	present := podUIDs(ni)
	present.Insert(pod.UID) // never on ni, and its own allocated claims are still its own
	freed := s.freed(ni, present)
	if filtered && len(takers) == 0 && len(freed) == 0 {
		return true, "", nil
	}
	if !filtered {
		// DynamicResources did not check pod's allocated claims: they must be usable here.
		if reason, err := s.allocatedElsewhere(pod, node); reason != "" || err != nil {
			return false, reason, err
		}
	}
	own, err := s.source.toAllocate(pod, ni, shared)
	if err != nil {
		return false, err.Error(), nil
	}
	local := s.localState(node.Name)
	for _, claim := range freed {
		release(local, claim.Status.Allocation.Devices.Results)
	}
	slices := s.slicesFor(node.Name)
	for _, claims := range append(takers, own) {
		allocator, err := structured.NewAllocator(ctx, s.source.features, local, s.source.dra.DeviceClasses(), slices, s.source.cel)
		if err != nil {
			return false, "", err
		}
		results, err := allocator.Allocate(ctx, node, claims)
		if err != nil {
			return false, "", err
		}
		if results == nil {
			if len(takers) == 0 {
				return false, "cannot allocate all claims", nil
			}
			return false, fmt.Sprintf("cannot allocate all claims next to the %d pods with claims this simulation placed on the node", len(takers)), nil
		}
		for _, r := range results {
			take(local, r.Devices.Results)
		}
	}
	return true, "", nil
}

// freed are the allocated claims holding devices of ni's node none of whose users is on ni
// (present: the UIDs of its pods), when the simulation takes pods away (Source.WithVictims).
// A claim reserved for nobody (not in use, not yet deallocated) keeps its devices, and so
// does one reserved for anything but pods (a PodGroup: its pods are not ni's to count).
func (s *Snapshot) freed(ni fwk.NodeInfo, present sets.Set[types.UID]) []*resourceapi.ResourceClaim {
	if !s.source.victims {
		return nil
	}
	var out []*resourceapi.ResourceClaim
	for _, claim := range s.claimsOn[ni.Node().Name] {
		if len(claim.Status.ReservedFor) == 0 {
			continue
		}
		gone := true
		for _, user := range claim.Status.ReservedFor {
			if user.Resource != "pods" || user.APIGroup != "" || present.Has(user.UID) {
				gone = false
				break
			}
		}
		if gone {
			out = append(out, claim)
		}
	}
	return out
}

// allocatedElsewhere says why pod cannot use its allocated claims on node (their allocation
// selects other nodes), as DynamicResources' Filter says it.
func (s *Snapshot) allocatedElsewhere(pod *v1.Pod, node *v1.Node) (string, error) {
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			continue // toAllocate reports it
		}
		claim, err := s.source.dra.ResourceClaims().Get(pod.Namespace, *name)
		if err != nil || claim.Status.Allocation == nil || claim.Status.Allocation.NodeSelector == nil {
			continue
		}
		sel, err := nodeaffinity.NewNodeSelector(claim.Status.Allocation.NodeSelector)
		if err != nil {
			return "", fmt.Errorf("resourceclaim %s: %w", klog.KObj(claim), err)
		}
		if !sel.Match(node) {
			return "resourceclaim not available on the node", nil
		}
	}
	return "", nil
}

// podUIDs are the UIDs of ni's pods.
func podUIDs(ni fwk.NodeInfo) sets.Set[types.UID] {
	out := sets.New[types.UID]()
	for _, pi := range ni.GetPods() {
		out.Insert(pi.GetPod().UID)
	}
	return out
}

// toAllocate returns the claims of p that need devices the snapshot does not count as taken
// on ni's node: a member's own claim (from a template) not allocated and not in flight; for a
// copy of a member, which owns no claim, a claim like its original's, unallocated; a claim
// shared by several pods once per simulation (shared collects them); the claim of its
// extended resources that DRA provides there (extendedClaim).
func (s *Source) toAllocate(p *v1.Pod, ni fwk.NodeInfo, shared sets.Set[types.UID]) ([]*resourceapi.ResourceClaim, error) {
	var out []*resourceapi.ResourceClaim
	extended, err := s.extendedClaim(p, ni)
	if err != nil {
		return nil, err
	}
	if extended != nil {
		out = append(out, extended)
	}
	for i := range p.Spec.ResourceClaims {
		pc := &p.Spec.ResourceClaims[i]
		name, _, err := resourceclaim.Name(p, pc)
		if err != nil {
			return nil, err
		}
		if name == nil {
			continue // the template produced no claim: nothing to allocate
		}
		claim, err := s.dra.ResourceClaims().Get(p.Namespace, *name)
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("resourceclaim %s/%s does not exist yet", p.Namespace, *name)
			}
			return nil, err
		}
		own := pc.ResourceClaimTemplateName != nil
		if own && !metav1.IsControlledBy(claim, p) {
			copied := claim.DeepCopy()
			copied.UID = types.UID(fmt.Sprintf("%s/%s", p.UID, pc.Name))
			copied.Status = resourceapi.ResourceClaimStatus{}
			out = append(out, copied)
			continue
		}
		if claim.Status.Allocation != nil || s.dra.ResourceClaims().GetPendingAllocation(claim.UID) != nil {
			continue
		}
		if !own {
			if shared.Has(claim.UID) {
				continue
			}
			shared.Insert(claim.UID)
		}
		out = append(out, claim)
	}
	return out, nil
}

// takers returns the claims of ni's pods besides pod that still need devices (see
// toAllocate), pod by pod in ni's order, and, when one's claims cannot be read (not created
// yet), why its devices cannot be counted: no count may rely on them then.
func (s *Source) takers(ni fwk.NodeInfo, pod *v1.Pod, shared sets.Set[types.UID]) ([][]*resourceapi.ResourceClaim, string) {
	var out [][]*resourceapi.ResourceClaim
	for _, pi := range ni.GetPods() {
		p := pi.GetPod()
		if p.UID == pod.UID || !s.TakesDevices(p) {
			continue
		}
		claims, err := s.toAllocate(p, ni, shared)
		if err != nil {
			return nil, fmt.Sprintf("the devices of pod %s on the node cannot be counted: %v", klog.KObj(p), err)
		}
		if len(claims) > 0 {
			out = append(out, claims)
		}
	}
	return out, ""
}
