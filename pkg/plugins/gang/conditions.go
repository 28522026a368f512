package gang

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// ReasonWaitingForGang is the PodScheduled condition reason of members that the Gang plugin
// holds back before scheduling (their PodGroup is missing or has too few members). Like
// SchedulingGated, it tells cluster autoscalers that more nodes would not help.
const ReasonWaitingForGang = "SchedulingGated"

// conditionWriter writes the PodScheduled condition of members held back in PreEnqueue.
// kube-scheduler writes that condition only for pods that went through a scheduling cycle;
// a pod gated by a PreEnqueue plugin would otherwise show nothing. Writes are asynchronous
// (PreEnqueue must not call the API) and skipped when the pod already says the same.
type conditionWriter struct {
	client clientset.Interface
	pods   corelisters.PodLister
	queue  workqueue.TypedRateLimitingInterface[types.NamespacedName]

	mu      sync.Mutex
	desired map[types.NamespacedName]string
}

func newConditionWriter(client clientset.Interface, pods corelisters.PodLister) *conditionWriter {
	return &conditionWriter{
		client: client,
		pods:   pods,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "gang-pod-conditions"}),
		desired: map[types.NamespacedName]string{},
	}
}

// set asks for the pod's PodScheduled condition to carry message.
func (w *conditionWriter) set(pod *v1.Pod, message string) {
	if hasCondition(pod, message) {
		return
	}
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	w.mu.Lock()
	w.desired[key] = message
	w.mu.Unlock()
	w.queue.Add(key)
}

func hasCondition(pod *v1.Pod, message string) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled {
			return c.Status == v1.ConditionFalse && c.Reason == ReasonWaitingForGang && c.Message == message
		}
	}
	return false
}

func (w *conditionWriter) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		w.queue.ShutDown()
	}()
	go func() {
		for w.next(ctx) {
		}
	}()
}

func (w *conditionWriter) next(ctx context.Context) bool {
	key, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(key)
	if err := w.write(ctx, key); err != nil {
		klog.FromContext(ctx).V(2).Info("Could not write the PodScheduled condition of a gang member", "pod", key, "err", err)
		w.queue.AddRateLimited(key)
		return true
	}
	w.queue.Forget(key)
	return true
}

// clear cancels a pending write: the member passed PreEnqueue, and from now on the scheduler
// owns its PodScheduled condition.
func (w *conditionWriter) clear(pod *v1.Pod) {
	w.mu.Lock()
	delete(w.desired, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
	w.mu.Unlock()
}

// current returns the message still wanted for a pod.
func (w *conditionWriter) current(key types.NamespacedName) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	message, ok := w.desired[key]
	return message, ok
}

// write updates the condition with the pod's resourceVersion, so that it can never overwrite
// a condition the scheduler wrote in between: a conflict retries, and by then a member that
// passed PreEnqueue has cleared its wish.
func (w *conditionWriter) write(ctx context.Context, key types.NamespacedName) error {
	message, ok := w.current(key)
	if !ok {
		return nil
	}
	pod, err := w.pods.Pods(key.Namespace).Get(key.Name)
	if err != nil || pod.Spec.NodeName != "" || hasCondition(pod, message) {
		// Gone, bound, or already saying it.
		w.done(key, message)
		return nil
	}
	updated := pod.DeepCopy()
	condition := v1.PodCondition{
		Type:               v1.PodScheduled,
		Status:             v1.ConditionFalse,
		Reason:             ReasonWaitingForGang,
		Message:            message,
		LastTransitionTime: metav1.NewTime(time.Now()),
	}
	replaced := false
	for i := range updated.Status.Conditions {
		if updated.Status.Conditions[i].Type == v1.PodScheduled {
			updated.Status.Conditions[i] = condition
			replaced = true
		}
	}
	if !replaced {
		updated.Status.Conditions = append(updated.Status.Conditions, condition)
	}
	if _, err := w.client.CoreV1().Pods(key.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return err
	}
	w.done(key, message)
	return nil
}

// done forgets a wish that was fulfilled, unless a newer one replaced it meanwhile.
func (w *conditionWriter) done(key types.NamespacedName, message string) {
	w.mu.Lock()
	if w.desired[key] == message {
		delete(w.desired, key)
	}
	w.mu.Unlock()
}
