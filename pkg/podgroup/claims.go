package podgroup

import (
	"errors"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
)

// A member that requests a ResourceClaim through a ResourceClaimTemplate cannot be simulated
// until the resource claim controller has created the claim and named it in the pod's
// status: DynamicResources refuses it ("ResourceClaim not created yet"). kube-scheduler holds
// such a pod back itself, but a gang is planned as a whole from every member's object in
// this registry, which sees the pod's status through its own informer handler, earlier or
// later than the queue does. The group counts these members, so that the gang is held back
// until none is left (gangstate.GatedWaitingForClaims) and woken when the last one is named.

// AwaitsClaims reports whether pod is unbound and requests a claim from a template that its
// status does not name yet.
func AwaitsClaims(pod *v1.Pod) bool {
	if pod.Spec.NodeName != "" {
		return false
	}
	for i := range pod.Spec.ResourceClaims {
		c := &pod.Spec.ResourceClaims[i]
		if c.ResourceClaimTemplateName == nil {
			continue // a claim by name: the pod waits for it by itself
		}
		if _, _, err := resourceclaim.Name(pod, c); errors.Is(err, resourceclaim.ErrClaimNotFound) {
			return true
		}
	}
	return false
}

// trackClaims records whether the member pod (or, with pod nil, the deleted member uid)
// awaits its claims, and reports whether it was the group's last member to do so.
func (g *Group) trackClaims(uid types.UID, pod *v1.Pod) (lastNamed bool) {
	was := g.awaitingClaims.Has(uid)
	if pod != nil && AwaitsClaims(pod) {
		if g.awaitingClaims == nil {
			g.awaitingClaims = sets.New[types.UID]()
		}
		g.awaitingClaims.Insert(uid)
		return false
	}
	g.awaitingClaims.Delete(uid)
	return was && g.awaitingClaims.Len() == 0
}
