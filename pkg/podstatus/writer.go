// Package podstatus writes fields of pods' status that plugins own (a condition, the
// nominated node) outside the scheduling cycle: plugins must not call the API from their
// extension points.
package podstatus

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Update returns the pod's status with the wish applied, or nil when the pod (as the
// informer last saw it) needs no write.
type Update func(pod *v1.Pod, wish string) *v1.PodStatus

// Writer keeps one wish per pod and writes it asynchronously, rate-limited and retried.
// Writes use the pod's resourceVersion, so a write never overwrites a status someone changed
// in between: a conflict retries with the new pod, and update decides again.
type Writer struct {
	name   string
	client clientset.Interface
	pods   corelisters.PodLister
	update Update
	queue  workqueue.TypedRateLimitingInterface[types.NamespacedName]

	mu      sync.Mutex
	desired map[types.NamespacedName]string
}

// NewWriter returns a writer named for its queue's metrics and logs.
func NewWriter(name string, client clientset.Interface, pods corelisters.PodLister, update Update) *Writer {
	return &Writer{
		name:   name,
		client: client,
		pods:   pods,
		update: update,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: name}),
		desired: map[types.NamespacedName]string{},
	}
}

// Set records the wish for a pod, replacing an earlier one, and queues its write.
func (w *Writer) Set(pod *v1.Pod, wish string) {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	w.mu.Lock()
	w.desired[key] = wish
	w.mu.Unlock()
	w.queue.Add(key)
}

// Cancel drops a pending wish.
func (w *Writer) Cancel(pod *v1.Pod) {
	w.mu.Lock()
	delete(w.desired, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
	w.mu.Unlock()
}

// Pending reports the wish still to be written for a pod.
func (w *Writer) Pending(namespace, name string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wish, ok := w.desired[types.NamespacedName{Namespace: namespace, Name: name}]
	return wish, ok
}

// Run writes until ctx ends.
func (w *Writer) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		w.queue.ShutDown()
	}()
	go func() {
		for w.next(ctx) {
		}
	}()
}

func (w *Writer) next(ctx context.Context) bool {
	key, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(key)
	if err := w.write(ctx, key); err != nil {
		klog.FromContext(ctx).V(2).Info("Could not write a pod's status", "writer", w.name, "pod", key, "err", err)
		w.queue.AddRateLimited(key)
		return true
	}
	w.queue.Forget(key)
	return true
}

func (w *Writer) write(ctx context.Context, key types.NamespacedName) error {
	wish, ok := w.Pending(key.Namespace, key.Name)
	if !ok {
		return nil
	}
	pod, err := w.pods.Pods(key.Namespace).Get(key.Name)
	if err != nil || pod.Spec.NodeName != "" {
		// Gone or bound: nothing of a pending pod's status to keep.
		w.done(key, wish)
		return nil
	}
	status := w.update(pod, wish)
	if status == nil {
		w.done(key, wish)
		return nil
	}
	updated := pod.DeepCopy()
	updated.Status = *status
	if _, err := w.client.CoreV1().Pods(key.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return err
	}
	w.done(key, wish)
	return nil
}

// done forgets a wish that was fulfilled, unless a newer one replaced it meanwhile.
func (w *Writer) done(key types.NamespacedName, wish string) {
	w.mu.Lock()
	if current, ok := w.desired[key]; ok && current == wish {
		delete(w.desired, key)
	}
	w.mu.Unlock()
}

// SetNominatedNode is the Update that sets status.nominatedNodeName to the wish ("" clears
// it); nil when the field already holds it.
func SetNominatedNode(pod *v1.Pod, wish string) *v1.PodStatus {
	if pod.Status.NominatedNodeName == wish {
		return nil
	}
	status := pod.Status.DeepCopy()
	status.NominatedNodeName = wish
	return status
}
