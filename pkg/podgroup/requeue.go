package podgroup

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// requeueClaimTTL bounds how long a gang's requeued member stands for the whole gang: if its
// attempt never runs (it was deleted, or is stuck in back-off), the next event requeues
// another member.
const requeueClaimTTL = 30 * time.Second

// ClaimRequeue decides whether a cluster event that can help a gang requeues this member:
// only one member per gang is requeued until its scheduling attempt has run (RequeueDone).
// If the attempt gets the gang going, its Permit activates the other members; if it fails,
// the other members cost nothing. A gang of 600 members waiting for room is thus retried
// once per relevant event, not 600 times.
func (r *Registry) ClaimRequeue(key Key, uid types.UID, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.groups[key]
	if g == nil {
		return true
	}
	if g.requeued != "" && g.requeued != uid && now.Sub(g.requeuedAt) < requeueClaimTTL {
		if _, member := g.members[g.requeued]; member {
			return false
		}
	}
	g.requeued, g.requeuedAt = uid, now
	return true
}

// RequeueDone says that a member of the gang is being scheduled: the next cluster event may
// requeue a member again.
func (r *Registry) RequeueDone(key Key) {
	r.mu.RLock()
	g := r.groups[key]
	claimed := g != nil && g.requeued != ""
	r.mu.RUnlock()
	if !claimed {
		return
	}
	r.mu.Lock()
	if g := r.groups[key]; g != nil {
		g.requeued = ""
	}
	r.mu.Unlock()
}

// SchedulingChanged reports whether a PodGroup update changed what scheduling reads: its spec
// or its constraint annotations. Status updates (which PodGroup controllers write
// constantly) and other metadata do not count. It takes the typed objects of the registry's
// informer and the unstructured ones of kube-scheduler's dynamic informer.
func SchedulingChanged(oldObj, newObj any) bool {
	oldSpec, oldAnn, ok1 := schedulingFields(oldObj)
	newSpec, newAnn, ok2 := schedulingFields(newObj)
	if !ok1 || !ok2 {
		return true
	}
	return !equality.Semantic.DeepEqual(oldSpec, newSpec) ||
		oldAnn[NetworkTopologyAnnotation] != newAnn[NetworkTopologyAnnotation] ||
		oldAnn[SubGroupPolicyAnnotation] != newAnn[SubGroupPolicyAnnotation]
}

func schedulingFields(obj any) (spec any, annotations map[string]string, ok bool) {
	switch o := obj.(type) {
	case *schedulingv1alpha1.PodGroup:
		return o.Spec, o.Annotations, true
	case *unstructured.Unstructured:
		return o.Object["spec"], o.GetAnnotations(), true
	case metav1.Object:
		return nil, o.GetAnnotations(), false
	}
	return nil, nil, false
}
