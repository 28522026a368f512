package podgroup

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	schedclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/informerutil"
)

// HasSynced reports whether the informers feeding the registry delivered their initial lists.
func (r *Registry) HasSynced() bool {
	r.mu.RLock()
	synced := r.synced
	r.mu.RUnlock()
	for _, s := range synced {
		if !s() {
			return false
		}
	}
	return true
}

// WaitForSync waits until HasSynced or ctx ends. After a restart, a gang planned before the
// registry has seen its bound members would not be pinned to their domain.
func (r *Registry) WaitForSync(ctx context.Context) error {
	if r.HasSynced() {
		return nil
	}
	return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		return r.HasSynced(), nil
	})
}

// Run feeds the registry from the pod and node informers of factory (started by its owner)
// and from a PodGroup informer of its own on client, which it starts with ctx.
func (r *Registry) Run(ctx context.Context, factory informers.SharedInformerFactory, client schedclientset.Interface) error {
	podReg, err := factory.Core().V1().Pods().Informer().AddEventHandler(informerutil.Handlers(r.SetPod, r.DeletePod))
	if err != nil {
		return fmt.Errorf("watching pods for the PodGroup registry: %w", err)
	}
	nodeReg, err := factory.Core().V1().Nodes().Informer().AddEventHandler(informerutil.Handlers(
		r.SetNode, func(n *v1.Node) { r.DeleteNode(n.Name) }))
	if err != nil {
		return fmt.Errorf("watching nodes for the PodGroup registry: %w", err)
	}
	// Built here rather than by scheduler-plugins' generated factory, which predates
	// client-go's streaming lists: a client that cannot stream them (a fake holding a copy of
	// a cluster, kubectl hypernode's simulation) says so, and the informer lists then watches.
	pgInformer := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).Watch(ctx, o)
		},
	}, client), &schedulingv1alpha1.PodGroup{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	pgReg, err := pgInformer.AddEventHandler(informerutil.Handlers(
		func(_, pg *schedulingv1alpha1.PodGroup) { r.SetPodGroup(pg) },
		func(pg *schedulingv1alpha1.PodGroup) { r.DeletePodGroup(pg.Namespace, pg.Name) }))
	if err != nil {
		return fmt.Errorf("watching PodGroups: %w", err)
	}
	r.mu.Lock()
	r.synced = []cache.InformerSynced{podReg.HasSynced, nodeReg.HasSynced, pgReg.HasSynced}
	r.mu.Unlock()
	go pgInformer.RunWithContext(ctx)
	return nil
}
