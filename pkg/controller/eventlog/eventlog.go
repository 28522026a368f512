// Package eventlog records the HyperNode controller's Events through the events.k8s.io/v1 API.
//
// client-go's event broadcaster folds every Event of one object with the same reason into a
// series that keeps the first note and only counts the rest (and needs patch on Events for
// it). The controller's Events are about configuration and external systems whose details
// change (a wrong CA, then bad credentials, then a typo in the next config), and the newest
// note is the one to read. So this recorder creates each Event as written, and suppresses only
// an identical Event (same object, reason and note) within a window. It needs only create.
package eventlog

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/klog/v2"
)

// Window is how long an identical Event is not recorded again.
const Window = 10 * time.Minute

// maxNote is the API's limit on an Event's note.
const maxNote = 1024

// queueSize bounds the Events waiting to be written; more are dropped (and logged).
const queueSize = 256

type key struct {
	kind, namespace, name, reason, note string
}

// Recorder records Events asynchronously. Run must be running for them to be written.
type Recorder struct {
	client     eventsv1client.EventsGetter
	controller string
	instance   string
	now        func() time.Time

	mu     sync.Mutex
	recent map[key]time.Time
	queue  chan *eventsv1.Event
}

// New returns a recorder that reports as controller (a qualified name such as
// hypernode.dev/hypernode-controller) from instance (this process).
func New(client eventsv1client.EventsGetter, controller, instance string) *Recorder {
	return &Recorder{
		client:     client,
		controller: controller,
		instance:   instance,
		now:        time.Now,
		recent:     map[key]time.Time{},
		queue:      make(chan *eventsv1.Event, queueSize),
	}
}

// Eventf records an Event about ref (a cluster-scoped object's Events go to the default
// namespace, as kube's recorders put them), unless the same one was recorded within Window.
func (r *Recorder) Eventf(ref *v1.ObjectReference, eventType, reason, action, format string, args ...any) {
	if r == nil || ref == nil {
		return
	}
	note := fmt.Sprintf(format, args...)
	if len(note) > maxNote {
		note = note[:maxNote-3] + "..."
	}
	now := r.now()
	k := key{ref.Kind, ref.Namespace, ref.Name, reason, note}
	r.mu.Lock()
	if last, ok := r.recent[k]; ok && now.Sub(last) < Window {
		r.mu.Unlock()
		return
	}
	r.recent[k] = now
	if len(r.recent) > 4*queueSize {
		for k, t := range r.recent {
			if now.Sub(t) >= Window {
				delete(r.recent, k)
			}
		}
	}
	r.mu.Unlock()
	namespace := ref.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()), Namespace: namespace},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: r.controller,
		ReportingInstance:   r.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Note:                note,
		Type:                eventType,
	}
	select {
	case r.queue <- ev:
	default:
		klog.Background().Info("Event dropped: too many Events waiting", "reason", reason, "object", klog.KRef(ref.Namespace, ref.Name), "note", note)
	}
}

// Run writes queued Events until ctx ends.
func (r *Recorder) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-r.queue:
			if _, err := r.client.Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
				logger.Error(err, "Writing an Event", "reason", ev.Reason, "object", klog.KRef(ev.Regarding.Namespace, ev.Regarding.Name))
			}
		}
	}
}
