// Command kube-scheduler is the upstream kube-scheduler (1.37) with this project's plugins
// compiled in. Run it with a KubeSchedulerConfiguration (--config) whose profile enables
// Gang and NetworkTopologyAware, for example manifests' scheduler config. One feature gate
// default differs from upstream's: see plugins.FeatureDefaults.
package main

import (
	"fmt"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
)

func main() {
	if err := plugins.SetFeatureDefaults(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	command := app.NewSchedulerCommand(plugins.RegistryOptions()...)
	os.Exit(cli.Run(command))
}
