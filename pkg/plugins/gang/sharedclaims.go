package gang

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// sharedUnallocatedClaim says why the gang cannot be scheduled while its members share an
// unallocated ResourceClaim ("" when they do not): kube-scheduler's DynamicResources
// allocates a claim for its first user and writes the allocation when that user binds; until
// then every other user is refused ("in the process of being allocated"), while this plugin
// keeps the first user waiting in Permit for the others. The gang would wait out its
// timeout on every attempt; it is refused at once instead, with what to do.
func (g *Gang) sharedUnallocatedClaim(key podgroup.Key, pod *v1.Pod) string {
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.ResourceClaimName == nil {
			continue
		}
		dra := g.handle.SharedDRAManager()
		if dra == nil {
			return ""
		}
		claim, err := dra.ResourceClaims().Get(pod.Namespace, *pc.ResourceClaimName)
		if err != nil || claim.Status.Allocation != nil {
			continue // missing: DynamicResources' PreEnqueue holds the pod and says so
		}
		var sharers []string
		for _, m := range g.registry.PendingMembers(key) {
			if m.UID != pod.UID && usesClaim(m, *pc.ResourceClaimName) {
				sharers = append(sharers, m.Name)
			}
		}
		if len(sharers) == 0 {
			continue
		}
		slices.Sort(sharers)
		return fmt.Sprintf("gang %s: its members %s share ResourceClaim %s, which is not allocated: kube-scheduler allocates a claim when its first user binds, and a gang binds its members together, so the gang cannot start; allocate the claim first (a pod that uses it alone), or give each member a claim from a ResourceClaimTemplate",
			key, joinNames(append(sharers, pod.Name)), klog.KObj(claim))
	}
	return ""
}

// usesClaim reports whether the pod uses the claim of that name directly.
func usesClaim(pod *v1.Pod, claim string) bool {
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.ResourceClaimName != nil && *pc.ResourceClaimName == claim {
			return true
		}
	}
	return false
}

// joinNames lists names, sorted, the first three and how many more.
func joinNames(names []string) string {
	slices.Sort(names)
	if len(names) <= 3 {
		return fmt.Sprint(names)
	}
	return fmt.Sprintf("%v and %d more", names[:3], len(names)-3)
}

// isSchedulableAfterClaimAllocated: a claim a member uses directly was allocated (its first
// user, outside the gang, bound), which ends sharedUnallocatedClaim's refusal.
func (g *Gang) isSchedulableAfterClaimAllocated(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	old, claim, err := util.As[*resourceapi.ResourceClaim](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if claim == nil || claim.Status.Allocation == nil || (old != nil && old.Status.Allocation != nil) ||
		claim.Namespace != pod.Namespace || !usesClaim(pod, claim.Name) {
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("Gang member requeued: a claim it shares was allocated", "pod", klog.KObj(pod), "claim", klog.KObj(claim))
	return fwk.Queue, nil
}
