// Command kubectl-hypernode is a kubectl plugin (kubectl hypernode ...) that shows the
// HyperNode tree with capacity and occupants, and explains where a PodGroup is placed or why
// it is pending. It reads the cluster through the usual kubeconfig flags; -o json gives the
// same reports for scripts.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	schedclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	topologyclient "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/crdclient"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/inspect"
)

// Exit codes: 1 for a failure (cluster unreachable, CRD missing, PodGroup not found), 2 for
// a command line or an input that cannot be run; plan's 3 is exitPending.
const (
	exitFailure = 1
	exitUsage   = 2
)

// usageError marks errors of the command line itself.
type usageError struct{ error }

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	os.Exit(run(os.Args[1:], streams, nil))
}

// clientsFunc builds the API clients from the kubeconfig flags; tests replace it.
type clientsFunc func(*genericclioptions.ConfigFlags) (inspect.Clients, error)

// run executes the command line and returns the exit code.
func run(args []string, streams genericiooptions.IOStreams, newClients clientsFunc) int {
	if newClients == nil {
		newClients = clientsFromFlags
	}
	cmd := newRootCommand(streams, newClients)
	cmd.SetArgs(args)
	err := cmd.Execute()
	if err == nil {
		return 0
	}
	fmt.Fprintf(streams.ErrOut, "error: %v\n", err)
	var pending pendingError
	if errors.As(err, &pending) {
		return exitPending
	}
	var usage usageError
	if errors.As(err, &usage) {
		fmt.Fprintf(streams.ErrOut, "See '%s --help'.\n", cmd.DisplayName())
		return exitUsage
	}
	return exitFailure
}

// options are the flags shared by every subcommand.
type options struct {
	config   *genericclioptions.ConfigFlags
	output   string
	resource string
	// defaultTopology is explain's --default-network-topology.
	defaultTopology string
}

func newRootCommand(streams genericiooptions.IOStreams, newClients clientsFunc) *cobra.Command {
	o := &options{config: genericclioptions.NewConfigFlags(true)}
	root := &cobra.Command{
		Use:   "kubectl-hypernode",
		Short: "Show the HyperNode tree, explain where PodGroups go, plan jobs before they are submitted",
		Long: `Show the HyperNode network tree with capacity and occupants, explain where a
PodGroup (gang) is placed or why it is pending, say where a job would go before it is
submitted (plan), and how large a gang could start now (capacity).

The capacity figures are for one resource (--resource): by default nvidia.com/gpu
(or amd.com/gpu) when a node offers it, otherwise cpu.`,
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl hypernode"},
		// Without Args and RunE, cobra answers an unknown subcommand before our usage errors.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			msg := fmt.Sprintf("unknown command %q for \"kubectl hypernode\"", args[0])
			if suggestions := cmd.SuggestionsFor(args[0]); len(suggestions) > 0 {
				msg += fmt.Sprintf("; did you mean %s?", strings.Join(suggestions, " or "))
			}
			return usageError{errors.New(msg)}
		},
		SilenceUsage:      true,
		SilenceErrors:     true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	o.config.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	root.PersistentFlags().StringVar(&o.resource, "resource", "", "resource of the capacity figures (default: nvidia.com/gpu or amd.com/gpu when a node has it, else cpu)")

	tree := &cobra.Command{
		Use:   "tree",
		Short: "Show the HyperNode tree with tiers, nodes, capacity and the PodGroups on it",
		Example: `  kubectl hypernode tree
  kubectl hypernode tree --resource cpu
  kubectl hypernode tree -o json | jq '.root.children[].name'`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			cluster, err := o.load(cmd.Context(), newClients, inspect.LoadOptions{SkipEvents: true, SkipPodGroups: true})
			if err != nil {
				return err
			}
			report := cluster.Tree(v1.ResourceName(o.resource))
			if o.output == "json" {
				return writeJSON(streams.Out, report)
			}
			return inspect.WriteTree(streams.Out, report)
		},
	}
	explain := &cobra.Command{
		Use:   "explain PODGROUP",
		Short: "Explain what a PodGroup needs, where it is placed, or why it is pending",
		Example: `  kubectl hypernode explain llm-train -n team-a
  kubectl hypernode explain llm-train -n team-a -o json | jq .search.verdict`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			if problems := validation.IsDNS1123Subdomain(args[0]); len(problems) > 0 {
				return usageError{fmt.Errorf("%q is not a PodGroup name: %s", args[0], strings.Join(problems, "; "))}
			}
			namespace, _, err := o.config.ToRawKubeConfigLoader().Namespace()
			if err != nil {
				return fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
			}
			defaultTopology, err := o.parseDefaultTopology()
			if err != nil {
				return err
			}
			cluster, err := o.load(cmd.Context(), newClients, inspect.LoadOptions{EventNamespace: namespace,
				PodGroup: &types.NamespacedName{Namespace: namespace, Name: args[0]}})
			if err != nil {
				return err
			}
			cluster.DefaultTopology = defaultTopology
			e, err := cluster.Explain(namespace, args[0], v1.ResourceName(o.resource))
			if err != nil {
				return err
			}
			if o.output == "json" {
				return writeJSON(streams.Out, e)
			}
			return inspect.WriteExplanation(streams.Out, e)
		},
	}
	addDefaultTopologyFlag(explain, o)
	root.AddCommand(tree, explain)
	root.AddCommand(newPlanCommands(o, streams, newClients)...)
	return root
}

// usageArgs marks argument errors as usage errors.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

func (o *options) validate() error {
	if o.output != "text" && o.output != "json" {
		return usageError{fmt.Errorf("--output must be text or json, not %q", o.output)}
	}
	return nil
}

func (o *options) load(ctx context.Context, newClients clientsFunc, opts inspect.LoadOptions) (*inspect.Cluster, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	clients, err := newClients(o.config)
	if err != nil {
		return nil, err
	}
	return inspect.LoadWith(ctx, clients, opts)
}

// clientsFromFlags builds the clients for the cluster the kubeconfig flags select.
func clientsFromFlags(flags *genericclioptions.ConfigFlags) (inspect.Clients, error) {
	config, err := flags.ToRESTConfig()
	if err != nil {
		return inspect.Clients{}, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	config.UserAgent = "kubectl-hypernode"
	// Nodes, pods and Events in protobuf, as kubectl reads them: a fraction of JSON's size
	// and decoding time on a large cluster. Custom resources are served as JSON only.
	kubeConfig := rest.CopyConfig(config)
	kubeConfig.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	kubeConfig.ContentType = "application/vnd.kubernetes.protobuf"
	kube, err := kubernetes.NewForConfig(kubeConfig)
	if err != nil {
		return inspect.Clients{}, err
	}
	topology, err := topologyclient.NewForConfig(crdclient.JSONConfig(config))
	if err != nil {
		return inspect.Clients{}, err
	}
	scheduling, err := schedclientset.NewForConfig(crdclient.JSONConfig(config))
	if err != nil {
		return inspect.Clients{}, err
	}
	return inspect.Clients{Kube: kube, Topology: topology, Scheduling: scheduling}, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
