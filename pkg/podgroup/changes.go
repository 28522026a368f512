package podgroup

import (
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

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
		oldAnn[SubGroupPolicyAnnotation] != newAnn[SubGroupPolicyAnnotation] ||
		oldAnn[HoldAfterAnnotation] != newAnn[HoldAfterAnnotation]
}

// HoldFreedRoom reports whether a PodGroup update or deletion changed the scheduler's record of
// the domain it holds for the gang (HoldAnnotation) so that pods the hold kept off may fit
// now: the record went (the hold ended, or its PodGroup), it no longer names a node it named,
// or the gang's priority fell (pods between the two come before it now). A hold taken or
// grown frees nothing. It takes the typed objects of the registry's informer and the
// unstructured ones of kube-scheduler's dynamic informer; newObj is nil for a deletion.
func HoldFreedRoom(oldObj, newObj any) bool {
	_, oldAnn, _ := schedulingFields(oldObj)
	before, err := ParseHoldRecord(oldAnn)
	if err != nil || before == nil {
		return false // nothing was held by it
	}
	if newObj == nil {
		return true
	}
	_, newAnn, _ := schedulingFields(newObj)
	after, err := ParseHoldRecord(newAnn)
	if err != nil || after == nil {
		return true
	}
	if after.Priority < before.Priority {
		return true
	}
	kept := sets.New(after.Nodes...)
	for _, n := range before.Nodes {
		if !kept.Has(n) {
			return true
		}
	}
	return false
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
