// Command hypernode-controller keeps HyperNode status true (status.nodeCount and the Valid
// condition of every HyperNode) and discovers HyperNodes from node labels and InfiniBand UFM,
// configured by a ConfigMap in Volcano's networkTopologyDiscovery format. It runs with
// leader election; see docs/user-guide.md.
package main

import (
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	"k8s.io/klog/v2"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/app"
)

func main() {
	os.Exit(cli.Run(newCommand()))
}

func newCommand() *cobra.Command {
	o := app.NewOptions()
	cmd := &cobra.Command{
		Use:   "hypernode-controller",
		Short: "Keeps HyperNode status true and discovers HyperNodes from node labels and UFM",
		Long: `hypernode-controller writes status.nodeCount and the Valid condition of every HyperNode,
and runs the discovery sources configured in the ConfigMap --config-map (key
hypernode-controller.conf, Volcano's networkTopologyDiscovery format): label (node labels,
Volcano's networkTopologyTypes or presets) and ufm (InfiniBand UFM).`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			err := app.Run(ctx, o)
			if errors.Is(err, app.ErrLeadershipLost) {
				klog.FromContext(cmd.Context()).Error(err, "Exiting; a restarted process runs as a standby")
			}
			return err
		},
	}
	// cli.Run adds the logging flags (-v, --vmodule, ...).
	o.AddFlags(cmd.Flags())
	return cmd
}
