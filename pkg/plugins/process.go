package plugins

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	schedclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	topologyclient "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/crdclient"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/metrics"
)

// processState owns what must exist once per scheduler process: the HyperNode tree cache and
// the gangs' state with its PodGroup registry. kube-scheduler builds one framework per profile and calls each
// plugin's factory once per profile, but every framework shares the scheduler's informer
// factory; the first factory call starts both components on it and every later call gets
// the same ones.
type processState struct {
	// clients are the CRD clients; those missing are built at start.
	clients CRDClients
	mu      sync.Mutex
	factory informers.SharedInformerFactory
	cache   *hypernode.Cache
	gangs   *gangstate.Tracker
	// devices counts each node's DRA devices, for the scores.
	devices *devices.Inventory
}

// start returns the process's tree cache and gang state, starting them with the first caller's
// context (the scheduler's own) on first use.
func (s *processState) start(ctx context.Context, handle fwk.Handle) (*hypernode.Cache, *gangstate.Tracker, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	factory := handle.SharedInformerFactory()
	if s.factory != nil {
		if s.factory != factory {
			// One set of registry options serves one scheduler; a second scheduler built
			// from it would read the first one's informers.
			return nil, nil, fmt.Errorf("the plugins' registry options were used by two schedulers; call RegistryOptions once per scheduler")
		}
		return s.cache, s.gangs, nil
	}
	logger := klog.FromContext(ctx)
	if err := requireCRDs(ctx, handle.ClientSet().Discovery()); err != nil {
		return nil, nil, err
	}
	if s.clients.Topology == nil {
		client, err := topologyclient.NewForConfig(crdclient.JSONConfig(handle.KubeConfig()))
		if err != nil {
			return nil, nil, fmt.Errorf("building the HyperNode client: %w", err)
		}
		s.clients.Topology = client
	}
	if s.clients.PodGroups == nil {
		client, err := schedclientset.NewForConfig(crdclient.JSONConfig(handle.KubeConfig()))
		if err != nil {
			return nil, nil, fmt.Errorf("building the PodGroup client: %w", err)
		}
		s.clients.PodGroups = client
	}
	cache := hypernode.NewCache(logger.WithName("hypernode-cache"), handle.EventRecorder())
	if err := cache.Run(ctx, factory, s.clients.Topology); err != nil {
		return nil, nil, err
	}
	gangs := gangstate.New()
	if err := gangs.Registry().Run(ctx, factory, s.clients.PodGroups); err != nil {
		return nil, nil, err
	}
	inventory := devices.NewInventory()
	if err := inventory.Run(factory); err != nil {
		return nil, nil, err
	}
	if utilfeature.DefaultFeatureGate.Enabled(features.DRADeviceTaintRules) {
		// The DRA manager applies them (scheduler.go): so must the inventory's exact counts.
		if err := inventory.RunTaintRules(factory); err != nil {
			return nil, nil, err
		}
	}
	metrics.Register()
	metrics.AddSource(ctx, &metrics.Source{
		Gangs:              gangs.PhaseCountsByName,
		GatedGangs:         gangs.GatedGroups,
		ExcludedHyperNodes: func() map[string]int { return cache.Snapshot().ExcludedByReason() },
		HeldNodes:          gangs.HeldNodes,
		Devices:            inventory.Totals,
	})
	logger.V(2).Info("HyperNode cache and PodGroup registry started")
	s.factory, s.cache, s.gangs, s.devices = factory, cache, gangs, inventory
	return cache, gangs, nil
}

// requiredCRDs are the custom resources the plugins watch, by group version.
var requiredCRDs = []struct{ groupVersion, resource, crd string }{
	{"topology.volcano.sh/v1alpha1", "hypernodes", "hypernodes.topology.volcano.sh"},
	{"scheduling.x-k8s.io/v1alpha1", "podgroups", "podgroups.scheduling.x-k8s.io"},
}

// requireCRDs fails the scheduler's start with a clear error when a CRD the plugins watch is
// not served: their informers would otherwise never sync and every gang would hang silently.
// Errors other than "not found" are retried for a while (the apiserver may be starting).
func requireCRDs(ctx context.Context, discovery discovery.DiscoveryInterface) error {
	for _, want := range requiredCRDs {
		var last error
		err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: 8}, func(context.Context) (bool, error) {
			list, err := discovery.ServerResourcesForGroupVersion(want.groupVersion)
			switch {
			case apierrors.IsNotFound(err):
				return false, fmt.Errorf("the CustomResourceDefinition %s is not installed (apply manifests/crds)", want.crd)
			case err != nil:
				last = err
				return false, nil
			}
			for _, r := range list.APIResources {
				if r.Name == want.resource {
					return true, nil
				}
			}
			return false, fmt.Errorf("the CustomResourceDefinition %s is not installed (apply manifests/crds)", want.crd)
		})
		if wait.Interrupted(err) && last != nil {
			return fmt.Errorf("checking that the CustomResourceDefinition %s is installed: %w", want.crd, last)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
