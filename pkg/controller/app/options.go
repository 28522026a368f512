// Package app is the hypernode-controller binary: options, clients, leader election, and the
// controllers it runs as leader (pkg/controller/status, pkg/controller/discovery,
// pkg/controller/nodelabels).
package app

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
)

// LeaseName is the leader-election Lease in the controller's namespace.
const LeaseName = "hypernode-controller"

// Options are the controller's flags.
type Options struct {
	Kubeconfig string
	// LeaderElect runs the controllers only while holding the Lease LeaseName in Namespace.
	LeaderElect   bool
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// Namespace holds the Lease, the ConfigMap, and by default the credentials Secrets.
	Namespace string
	// ConfigMap names the discovery configuration (key hypernode-controller.conf).
	ConfigMap string
	// HealthzBindAddress serves /healthz and /metrics; "0" or "" turns them off.
	HealthzBindAddress string
	KubeAPIQPS         float32
	KubeAPIBurst       int
	StatusWorkers      int
	// StatusDelay collects changes before HyperNode status and node tier labels are written.
	StatusDelay time.Duration
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		LeaderElect:        true,
		LeaseDuration:      15 * time.Second,
		RenewDeadline:      10 * time.Second,
		RetryPeriod:        2 * time.Second,
		Namespace:          "hypernode-system",
		ConfigMap:          "hypernode-controller",
		HealthzBindAddress: "0.0.0.0:10281",
		KubeAPIQPS:         50,
		KubeAPIBurst:       100,
		StatusWorkers:      4,
		StatusDelay:        time.Second,
	}
}

// AddFlags registers the options.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig; the in-cluster configuration when empty.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Run the controllers only while holding the Lease "+LeaseName+" in --namespace, so that one of several replicas acts.")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "How long a standby waits after the last renewal before it takes the Lease over.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "How long the leader tries to renew the Lease before it gives up leading.")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "How often to try to acquire or renew the Lease.")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Namespace of the leader-election Lease, of the ConfigMap, and the default namespace of credentials Secrets.")
	fs.StringVar(&o.ConfigMap, "config-map", o.ConfigMap, "ConfigMap in --namespace whose key hypernode-controller.conf configures discovery (Volcano's networkTopologyDiscovery format) and the tree as node labels (nodeLabels).")
	fs.StringVar(&o.HealthzBindAddress, "healthz-bind-address", o.HealthzBindAddress, "Address of the /healthz and /metrics endpoints; 0 turns them off.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Requests per second to the API server.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst of requests to the API server.")
	fs.IntVar(&o.StatusWorkers, "status-workers", o.StatusWorkers, "HyperNode status writes in parallel.")
	fs.DurationVar(&o.StatusDelay, "status-delay", o.StatusDelay, "How long changes are collected before HyperNode status and node tier labels are written (a burst of changes is one write per HyperNode, and per node).")
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
	for _, msg := range apivalidation.ValidateNamespaceName(o.Namespace, false) {
		errs = append(errs, fmt.Errorf("--namespace %q: %s", o.Namespace, msg))
	}
	for _, msg := range apivalidation.NameIsDNSSubdomain(o.ConfigMap, false) {
		errs = append(errs, fmt.Errorf("--config-map %q: %s", o.ConfigMap, msg))
	}
	if o.LeaderElect && !(o.LeaseDuration > o.RenewDeadline && o.RenewDeadline > o.RetryPeriod && o.RetryPeriod > 0) {
		errs = append(errs, errors.New("leader election needs --leader-elect-lease-duration > --leader-elect-renew-deadline > --leader-elect-retry-period > 0"))
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must be positive"))
	}
	if o.StatusWorkers < 1 || o.StatusDelay <= 0 {
		errs = append(errs, errors.New("--status-workers must be at least 1 and --status-delay positive"))
	}
	return errors.Join(errs...)
}
