package devices

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	fwk "k8s.io/kube-scheduler/framework"
)

// Unreleased counts the claims of pods (evicted, gone) that still hold devices: allocated,
// and reserved for none but those pods. The resource claim controller releases a pod's
// claims only after the pod is gone, so a gang that evicted pods for their devices waits for
// this count to reach 0, not only for the pods. A claim another pod still uses is not
// counted: it is not released for the gang.
func Unreleased(dra fwk.SharedDRAManager, pods []*v1.Pod) (int, error) {
	if dra == nil {
		return 0, nil
	}
	gone := sets.New[types.UID]()
	for _, p := range pods {
		gone.Insert(p.UID)
	}
	seen := sets.New[types.UID]()
	n := 0
	for _, p := range pods {
		for i := range p.Spec.ResourceClaims {
			name, _, err := resourceclaim.Name(p, &p.Spec.ResourceClaims[i])
			if err != nil || name == nil {
				continue // never generated: nothing to release
			}
			claim, err := dra.ResourceClaims().Get(p.Namespace, *name)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return 0, err
			}
			if claim.Status.Allocation == nil || seen.Has(claim.UID) {
				continue
			}
			seen.Insert(claim.UID)
			others := false
			for _, user := range claim.Status.ReservedFor {
				if user.Resource != "pods" || user.APIGroup != "" || !gone.Has(user.UID) {
					others = true
					break
				}
			}
			if !others {
				n++
			}
		}
	}
	return n, nil
}

// ReleasedClaim is the claim of a ResourceClaim event that released its devices (allocated
// before, deallocated or deleted now), nil for any other event.
func ReleasedClaim(oldObj, newObj any) (*resourceapi.ResourceClaim, error) {
	old, okOld := oldObj.(*resourceapi.ResourceClaim)
	claim, okNew := newObj.(*resourceapi.ResourceClaim)
	if (oldObj != nil && !okOld) || (newObj != nil && !okNew) {
		return nil, fmt.Errorf("a ResourceClaim event of %T, %T", oldObj, newObj)
	}
	if old == nil || old.Status.Allocation == nil || (claim != nil && claim.Status.Allocation != nil) {
		return nil, nil
	}
	return old, nil
}
