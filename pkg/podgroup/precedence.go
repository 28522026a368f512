package podgroup

import (
	"time"

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

// PlainPrecedence returns the precedence of a pod without a gang: its priority, and its
// creation for its arrival (the queue sorts such a pod by when it entered the queue, which a
// plugin cannot read; its creation is that moment for a pod created pending).
func PlainPrecedence(pod *v1.Pod) Precedence {
	p := Precedence{created: pod.CreationTimestamp}
	if pod.Spec.Priority != nil {
		p.priority = *pod.Spec.Priority
	}
	return p
}

// GangPrecedence returns the precedence of the gang key at priority, its PodGroup created at
// created.
func GangPrecedence(key Key, priority int32, created time.Time) Precedence {
	return Precedence{priority: priority, created: metav1.NewTime(created), key: key.String()}
}

// Priority is the precedence's pod priority.
func (p Precedence) Priority() int32 { return p.priority }
