package util

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/component-base/configz"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
)

// KubeconfigPlaceholder in a scheduler config is replaced by the control plane's kubeconfig.
const KubeconfigPlaceholder = "${KUBECONFIG}"

// DefaultSchedulerConfig is a KubeSchedulerConfiguration with a hypernode-scheduler profile
// that runs this project's plugins with their default args.
const DefaultSchedulerConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: "${KUBECONFIG}"
  qps: 1000
  burst: 2000
profiles:
- schedulerName: hypernode-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Gang
      - name: NetworkTopologyAware
`

// Scheduler is this project's kube-scheduler running in the test process.
type Scheduler struct {
	cancel context.CancelFunc
	done   chan error
}

// StartScheduler runs kube-scheduler's own setup (config file decoding, defaulting,
// validation, plugin construction) with this project's plugin registry, exactly as the
// binary does, and runs the scheduler until Stop. configYAML may use KubeconfigPlaceholder.
// An error is returned when the scheduler refuses the configuration.
func StartScheduler(ctx context.Context, cp *ControlPlane, configYAML string) (*Scheduler, error) {
	dir, err := os.MkdirTemp("", "hypernode-scheduler")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(configYAML, KubeconfigPlaceholder, cp.Kubeconfig)), 0o600); err != nil {
		return nil, err
	}

	opts := options.NewOptions()
	opts.ConfigFile = path
	// No serving endpoint: tests talk to the apiserver only, and serving would need
	// delegated authentication against the apiserver.
	opts.SecureServing.BindPort = 0

	ctx, cancel := context.WithCancel(ctx)
	cc, sched, err := app.Setup(ctx, opts, plugins.RegistryOptions()...)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &Scheduler{cancel: cancel, done: make(chan error, 1)}
	go func() {
		s.done <- app.Run(ctx, cc, sched)
	}()
	return s, nil
}

// Stop stops the scheduler and waits until it has returned.
func (s *Scheduler) Stop() error {
	s.cancel()
	err := <-s.done
	// app.Run registers the configuration under a process-global name; the next scheduler
	// started in this process registers it again.
	configz.Delete("componentconfig")
	// Without leader election, app.Run reports its normal end as "finished without leader elect".
	if err != nil && err != context.Canceled && err.Error() != "finished without leader elect" {
		return fmt.Errorf("scheduler stopped with: %w", err)
	}
	return nil
}
