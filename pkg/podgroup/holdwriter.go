package podgroup

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	schedclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
)

// HoldWriter writes the hold record of PodGroups (HoldAnnotation) outside the scheduling
// cycle, rate-limited and retried: plugins must not call the API from their extension points.
// It writes what wish returns at the time of the write (nil: no hold), so that a burst of
// changes of one gang costs one write.
type HoldWriter struct {
	client schedclientset.Interface
	reg    *Registry
	wish   func(Key) *HoldRecord
	queue  workqueue.TypedRateLimitingInterface[Key]
}

// NewHoldWriter returns a writer of the records wish gives; reg tells what a PodGroup has.
func NewHoldWriter(client schedclientset.Interface, reg *Registry, wish func(Key) *HoldRecord) *HoldWriter {
	return &HoldWriter{client: client, reg: reg, wish: wish,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[Key](),
			workqueue.TypedRateLimitingQueueConfig[Key]{Name: "hypernode-hold-records"})}
}

// Queue queues a write of the gang's record.
func (w *HoldWriter) Queue(key Key) { w.queue.Add(key) }

// Run writes until ctx ends.
func (w *HoldWriter) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		w.queue.ShutDown()
	}()
	go func() {
		for w.next(ctx) {
		}
	}()
}

func (w *HoldWriter) next(ctx context.Context) bool {
	key, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(key)
	if err := w.write(ctx, key); err != nil {
		klog.FromContext(ctx).V(2).Info("Could not write a PodGroup's hold record", "podGroup", key, "err", err)
		w.queue.AddRateLimited(key)
		return true
	}
	w.queue.Forget(key)
	return true
}

// write patches the annotation when the PodGroup (as the registry last saw it) differs from
// the wish.
func (w *HoldWriter) write(ctx context.Context, key Key) error {
	pg := w.reg.Info(key).PodGroup
	if pg == nil {
		return nil // gone: nothing to record on
	}
	var value any // JSON null removes the annotation
	want, recorded := "", pg.Annotations[HoldAnnotation]
	if r := w.wish(key); r != nil {
		want = r.Encode()
		value = want
	}
	if _, has := pg.Annotations[HoldAnnotation]; want == recorded && (has == (value != nil)) {
		return nil
	}
	// A merge patch of the one annotation: nobody else writes it, so no version is needed.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{HoldAnnotation: value}}})
	if err != nil {
		return err
	}
	_, err = w.client.SchedulingV1alpha1().PodGroups(key.Namespace).Patch(ctx, key.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("patching PodGroup %s: %w", key, err)
	}
	return nil
}
