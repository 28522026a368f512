package podgroup

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// Precedence orders gangs when they compete for room: higher pod priority first, then the
// older PodGroup, then the name. A gang of lower precedence waiting in Permit yields its
// reservations to a gang of higher precedence that fits only without them.
type Precedence struct {
	priority int32
	created  metav1.Time
	key      string
}

// PrecedenceOf returns the precedence of the gang key, judged by its member pod.
func PrecedenceOf(pod *v1.Pod, key Key, pg *schedulingv1alpha1.PodGroup) Precedence {
	p := Precedence{key: key.String()}
	if pod.Spec.Priority != nil {
		p.priority = *pod.Spec.Priority
	}
	if pg != nil {
		p.created = pg.CreationTimestamp
	}
	return p
}

// Before reports whether p takes precedence over o.
func (p Precedence) Before(o Precedence) bool {
	if p.priority != o.priority {
		return p.priority > o.priority
	}
	if !p.created.Equal(&o.created) {
		return p.created.Before(&o.created)
	}
	return p.key < o.key
}
