package podgroup

import (
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// HoldChanged reports whether a PodGroup update or deletion changed the scheduler's record of
// the domain it holds for the gang (HoldAnnotation): pods the hold kept off its nodes may fit
// now. It takes the typed objects of the registry's informer and the unstructured ones of
// kube-scheduler's dynamic informer; newObj is nil for a deletion.
func HoldChanged(oldObj, newObj any) bool {
	_, oldAnn, _ := schedulingFields(oldObj)
	if newObj == nil {
		_, held := oldAnn[HoldAnnotation]
		return held
	}
	_, newAnn, _ := schedulingFields(newObj)
	return oldAnn[HoldAnnotation] != newAnn[HoldAnnotation]
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
