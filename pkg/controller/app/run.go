package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	topologyclient "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned"
	topologyinformers "github.com/hypernode-dev/hypernode-scheduler/pkg/client/informers/externalversions"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/eventlog"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/metrics"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/nodelabels"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/status"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/crdclient"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
)

// ReportingController names the controller in its Events.
const ReportingController = "hypernode.dev/hypernode-controller"

// ErrLeadershipLost is returned when another replica took the Lease over: the process
// exits, as kube-controller-manager does, and restarts as a standby.
var ErrLeadershipLost = errors.New("lost the leader-election Lease")

// Run runs the controller until ctx ends.
func Run(ctx context.Context, o *Options) error {
	config, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("API client configuration: %w", err)
	}
	config.QPS, config.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	config = restclient.AddUserAgent(config, "hypernode-controller")
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	// Node label writes have a client (and a client-side rate limit) of their own, so that a
	// first publish on a big cluster never delays HyperNode and status writes; the
	// publisher's writesPerSecond bounds them.
	nodeWriter, err := kubernetes.NewForConfig(restclient.AddUserAgent(restclient.CopyConfig(config), "hypernode-controller-node-labels"))
	if err != nil {
		return err
	}
	topo, err := topologyclient.NewForConfig(crdclient.JSONConfig(config))
	if err != nil {
		return err
	}
	meta, err := metadata.NewForConfig(config)
	if err != nil {
		return err
	}
	hostname, _ := os.Hostname()
	identity := hostname + "_" + string(uuid.NewUUID())

	var watchdog *leaderelection.HealthzAdaptor
	if o.LeaderElect {
		watchdog = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	}
	if err := serveHealthz(ctx, o.HealthzBindAddress, watchdog); err != nil {
		return err
	}

	if !o.LeaderElect {
		err := runControllers(ctx, o, kube, nodeWriter, topo, meta, identity)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = errors.New("they returned without an error")
		}
		return fmt.Errorf("the controllers stopped: %w", err)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.Namespace, Name: LeaseName},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	return lead(ctx, o, lock, watchdog, func(ctx context.Context) error {
		return runControllers(ctx, o, kube, nodeWriter, topo, meta, identity)
	})
}

// lead runs the controllers (run) while this replica holds the Lease. Controllers that stop
// while it leads, with an error or without, give the Lease up and end the process (it
// restarts): a leader that renews its Lease and does nothing would keep every other replica
// out.
func lead(ctx context.Context, o *Options, lock resourcelock.Interface, watchdog *leaderelection.HealthzAdaptor, run func(context.Context) error) error {
	logger := klog.FromContext(ctx)
	identity := lock.Identity()
	lost := false
	leading, stopLeading := context.WithCancel(ctx)
	defer stopLeading()
	failed := make(chan error, 1)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.LeaseDuration,
		RenewDeadline:   o.RenewDeadline,
		RetryPeriod:     o.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            LeaseName,
		WatchDog:        watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logger.Info("Leading", "lease", klog.KRef(o.Namespace, LeaseName), "identity", identity)
				err := run(ctx)
				if ctx.Err() != nil {
					return // the Lease was lost or the process is stopping
				}
				if err == nil {
					err = errors.New("they returned without an error")
				}
				failed <- err
				stopLeading()
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					lost = true
				}
			},
			OnNewLeader: func(id string) {
				if id != identity {
					logger.Info("Another replica leads", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	if watchdog != nil {
		watchdog.SetLeaderElection(le)
	}
	le.Run(leading)
	select {
	case err := <-failed:
		return fmt.Errorf("the controllers stopped while leading; the Lease is released: %w", err)
	default:
	}
	if lost {
		return ErrLeadershipLost
	}
	return nil
}

// runControllers starts the informers and runs the status controller, the node label
// publisher and the discovery manager (which configures the publisher) until ctx ends.
func runControllers(ctx context.Context, o *Options, kube, nodeWriter kubernetes.Interface, topo topologyclient.Interface, meta metadata.Interface, identity string) error {
	logger := klog.FromContext(ctx)
	start := time.Now()
	nodes := newNodeMetadataInformer(meta)
	configMaps := informers.NewSharedInformerFactoryWithOptions(kube, 0,
		informers.WithNamespace(o.Namespace),
		// The controller may read only its own ConfigMap (RBAC resourceNames): list and
		// watch it by name.
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", o.ConfigMap).String()
		}))
	topoFactory := topologyinformers.NewSharedInformerFactory(topo, 0)
	hyperNodes := topoFactory.Topology().V1alpha1().HyperNodes()

	events := eventlog.New(kube.EventsV1(), ReportingController, identity)
	statusController, err := status.New(topo, nodes, hyperNodes, o.StatusDelay)
	if err != nil {
		return err
	}
	publisher, err := nodelabels.New(nodeWriter, nodes, hyperNodes, events, o.StatusDelay)
	if err != nil {
		return err
	}
	manager, err := discovery.NewManager(discovery.Options{
		Namespace:  o.Namespace,
		ConfigMap:  o.ConfigMap,
		Client:     topo,
		Env:        source.Env{Nodes: nodes.Lister(), Secrets: kube.CoreV1(), Namespace: o.Namespace, HyperNodes: hyperNodes.Lister()},
		Events:     events,
		NodeLabels: publisher,
	}, configMaps.Core().V1().ConfigMaps(), nodes, hyperNodes)
	if err != nil {
		return err
	}

	go nodes.Informer().RunWithContext(ctx)
	configMaps.Start(ctx.Done())
	topoFactory.Start(ctx.Done())
	defer configMaps.Shutdown()
	defer topoFactory.Shutdown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, nodes.Informer().HasSynced, configMaps.Core().V1().ConfigMaps().Informer().HasSynced, hyperNodes.Informer().HasSynced) {
		return ctx.Err()
	}
	nodeCount := len(nodes.Informer().GetStore().ListKeys())
	logger.Info("Informers synced", "nodes", nodeCount, "hyperNodes", len(hyperNodes.Informer().GetStore().ListKeys()), "duration", time.Since(start))

	go events.Run(ctx)
	go statusController.Run(ctx, o.StatusWorkers)
	go publisher.Run(ctx, nodelabels.Workers)
	manager.Run(ctx)
	return nil
}

// nodeMetadataInformer watches node metadata only (the controllers read names and labels),
// and stores each as a *v1.Node with just its name, UID, resourceVersion, labels and the
// node label publisher's ownership record (its one annotation): a node of a GPU cluster is
// tens of kilobytes with its images and conditions, its labels a few hundred bytes.
type nodeMetadataInformer struct{ informer cache.SharedIndexInformer }

var _ coreinformers.NodeInformer = nodeMetadataInformer{}

func newNodeMetadataInformer(meta metadata.Interface) nodeMetadataInformer {
	informer := metadatainformer.NewFilteredMetadataInformer(meta, v1.SchemeGroupVersion.WithResource("nodes"), metav1.NamespaceAll, 0,
		cache.Indexers{}, nil).Informer()
	_ = informer.SetTransform(func(obj any) (any, error) {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return obj, nil
		}
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:              m.Name,
			UID:               m.UID,
			ResourceVersion:   m.ResourceVersion,
			Labels:            m.Labels,
			DeletionTimestamp: m.DeletionTimestamp,
		}}
		if r, ok := m.Annotations[hypernode.TierLabelsAnnotation]; ok {
			node.Annotations = map[string]string{hypernode.TierLabelsAnnotation: r}
		}
		return node, nil
	})
	return nodeMetadataInformer{informer: informer}
}

func (n nodeMetadataInformer) Informer() cache.SharedIndexInformer { return n.informer }

func (n nodeMetadataInformer) Lister() corelisters.NodeLister {
	return corelisters.NewNodeLister(n.informer.GetIndexer())
}

// serveHealthz serves /healthz: ok, unless this replica leads and has not renewed its Lease
// in time; and /metrics, the controller's Prometheus metrics (pkg/controller/metrics).
func serveHealthz(ctx context.Context, address string, watchdog *leaderelection.HealthzAdaptor) error {
	if address == "" || address == "0" {
		return nil
	}
	metrics.Register()
	mux := http.NewServeMux()
	mux.Handle("/metrics", legacyregistry.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if watchdog != nil {
			if err := watchdog.Check(r); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		_, _ = w.Write([]byte("ok"))
	})
	listener, err := net.Listen("tcp", address)
	if err != nil {
		return fmt.Errorf("--healthz-bind-address: %w", err)
	}
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = server.Serve(listener) }()
	go func() {
		<-ctx.Done()
		_ = server.Close()
	}()
	klog.FromContext(ctx).Info("Serving /healthz and /metrics", "address", listener.Addr().String())
	return nil
}
