package util

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/component-base/configz"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"sigs.k8s.io/yaml"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
)

// SchedulerConfig returns manifests/scheduler/config.yaml prepared for a scheduler run by a
// test: it talks to the control plane cp with the shipped client rate, leader election is off,
// and the args of the plugins named in pluginArgs are replaced by the given ones.
func SchedulerConfig(cp *ControlPlane, pluginArgs map[string]map[string]any) (string, error) {
	cfg, err := shippedSchedulerConfig(cp)
	if err != nil {
		return "", err
	}
	cfg["leaderElection"] = map[string]any{"leaderElect": false}
	profiles, _ := cfg["profiles"].([]any)
	if len(profiles) == 0 {
		return "", fmt.Errorf("manifests/scheduler/config.yaml has no profile")
	}
	profile := profiles[0].(map[string]any)
	pluginConfig, _ := profile["pluginConfig"].([]any)
	for name, args := range pluginArgs {
		replaced := false
		for _, pc := range pluginConfig {
			if entry := pc.(map[string]any); entry["name"] == name {
				entry["args"] = args
				replaced = true
			}
		}
		if !replaced {
			pluginConfig = append(pluginConfig, map[string]any{"name": name, "args": args})
		}
	}
	profile["pluginConfig"] = pluginConfig
	out, err := yaml.Marshal(cfg)
	return string(out), err
}

// SchedulerClientConnection is the clientConnection of a test scheduler: that of
// manifests/scheduler/config.yaml (its client rate among the rest), which the benchmarks give
// vanilla kube-scheduler too, with the kubeconfig of the control plane cp.
func SchedulerClientConnection(cp *ControlPlane) (map[string]any, error) {
	cfg, err := shippedSchedulerConfig(cp)
	if err != nil {
		return nil, err
	}
	return cfg["clientConnection"].(map[string]any), nil
}

// shippedSchedulerConfig is manifests/scheduler/config.yaml with the kubeconfig of cp in its
// clientConnection, which must set the client rate.
func shippedSchedulerConfig(cp *ControlPlane) (map[string]any, error) {
	data, err := os.ReadFile(filepath.Join(RepoRoot(), "manifests", "scheduler", "config.yaml"))
	if err != nil {
		return nil, err
	}
	cfg := map[string]any{}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("manifests/scheduler/config.yaml: %w", err)
	}
	connection, _ := cfg["clientConnection"].(map[string]any)
	if connection["qps"] == nil || connection["burst"] == nil {
		return nil, fmt.Errorf("manifests/scheduler/config.yaml: clientConnection sets no qps and burst")
	}
	connection["kubeconfig"] = cp.Kubeconfig
	return cfg, nil
}

// Scheduler is this project's kube-scheduler running in the test process.
type Scheduler struct {
	cancel context.CancelFunc
	done   chan error
}

// StartScheduler runs kube-scheduler's own setup (config file decoding, defaulting,
// validation, plugin construction) with this project's plugin registry, exactly as the
// binary does, and runs the scheduler until Stop. An error is returned when the scheduler
// refuses the configuration.
func StartScheduler(ctx context.Context, configYAML string) (*Scheduler, error) {
	dir, err := os.MkdirTemp("", "hypernode-scheduler")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(configYAML), 0o600); err != nil {
		return nil, err
	}

	// The binary's feature gate defaults (process-wide; idempotent).
	if err := plugins.SetFeatureDefaults(); err != nil {
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
