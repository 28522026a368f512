// Package eventlog records the plugins' Events on PodGroups, one series per situation, and
// skips an Event that repeats the group's last one.
package eventlog

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/client-go/tools/events"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// Log records Events on PodGroups, skipping an Event identical to the last one recorded
// for the same group (a gang's members all run into the same situation, one after another).
type Log struct {
	recorder events.EventRecorder
	action   string

	mu   sync.Mutex
	last map[podgroup.Key]string
}

// New returns a Log; recorder may be nil (no Events).
func New(recorder events.EventRecorder, action string) *Log {
	return &Log{recorder: recorder, action: action, last: map[podgroup.Key]string{}}
}

// Record records an Event on pg unless it repeats the group's last one.
func (l *Log) Record(pg *schedulingv1alpha1.PodGroup, eventType, reason, message string) {
	if pg == nil {
		return
	}
	key := podgroup.Key{Namespace: pg.Namespace, Name: pg.Name}
	l.mu.Lock()
	if l.last[key] == reason+message {
		l.mu.Unlock()
		return
	}
	l.last[key] = reason + message
	l.mu.Unlock()
	if l.recorder == nil {
		return
	}
	// PodGroups are not in the recorder's scheme: refer to the object explicitly.
	l.recorder.Eventf(&v1.ObjectReference{
		APIVersion: schedulingv1alpha1.SchemeGroupVersion.String(),
		Kind:       "PodGroup",
		Namespace:  pg.Namespace,
		Name:       pg.Name,
		UID:        pg.UID,
	}, nil, eventType, reason, l.action, "%s", message)
}

// RecordNative records an Event on a native (scheduling.k8s.io) PodGroup. It is not
// deduplicated: a native group's decisions come once per pod-group cycle, after backoff.
func (l *Log) RecordNative(pg *schedulingv1beta1.PodGroup, eventType, reason, message string) {
	if pg == nil || l.recorder == nil {
		return
	}
	l.recorder.Eventf(pg, nil, eventType, reason, l.action, "%s", message)
}

// Forget drops what the log remembers of a group (its PodGroup was deleted).
func (l *Log) Forget(key podgroup.Key) {
	l.mu.Lock()
	delete(l.last, key)
	l.mu.Unlock()
}

// Len returns how many groups the log remembers.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.last)
}
