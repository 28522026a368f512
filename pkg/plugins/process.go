package plugins

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// processState owns what must exist once per scheduler process: the HyperNode tree cache and
// the PodGroup registry. kube-scheduler builds one framework per profile and calls each
// plugin's factory once per profile, but every framework shares the scheduler's informer
// factory; the first factory call starts both components on it and every later call gets
// the same ones.
type processState struct {
	mu       sync.Mutex
	factory  informers.SharedInformerFactory
	cache    *hypernode.Cache
	registry *podgroup.Registry
}

// start returns the process's tree cache and registry, starting them with the first caller's
// context (the scheduler's own) on first use.
func (s *processState) start(ctx context.Context, handle fwk.Handle) (*hypernode.Cache, *podgroup.Registry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	factory := handle.SharedInformerFactory()
	if s.factory != nil {
		if s.factory != factory {
			// One set of registry options serves one scheduler; a second scheduler built
			// from it would read the first one's informers.
			return nil, nil, fmt.Errorf("the plugins' registry options were used by two schedulers; call RegistryOptions once per scheduler")
		}
		return s.cache, s.registry, nil
	}
	logger := klog.FromContext(ctx)
	cache := hypernode.NewCache(logger.WithName("hypernode-cache"), handle.EventRecorder())
	if err := cache.Run(ctx, factory, handle.KubeConfig()); err != nil {
		return nil, nil, err
	}
	registry := podgroup.New()
	if err := registry.Run(ctx, factory, handle.KubeConfig()); err != nil {
		return nil, nil, err
	}
	logger.V(2).Info("HyperNode cache and PodGroup registry started")
	s.factory, s.cache, s.registry = factory, cache, registry
	return cache, registry, nil
}
