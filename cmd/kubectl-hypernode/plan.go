package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	schedulerconfig "github.com/hypernode-dev/hypernode-scheduler/manifests/scheduler"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/inspect"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/jobspec"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/simulate"
)

// exitPending is plan's exit code, with --fail-if-pending, for a job that would not start.
const exitPending = 3

// pendingError marks plan's answer "would not start" under --fail-if-pending.
type pendingError struct{ error }

// planOptions are plan's and capacity's own flags.
type planOptions struct {
	file               string
	networkTopology    string
	schedulerConfig    string
	schedulerConfigMap string
	priority           int32
	failIfPending      bool
	cpu, memory        string
	gpu                int64
}

func newPlanCommands(o *options, streams genericiooptions.IOStreams, newClients clientsFunc) []*cobra.Command {
	po := &planOptions{}
	plan := &cobra.Command{
		Use:   "plan -f FILE",
		Short: "Say where a job would go now, what it waits for; nothing is created or evicted",
		Long: `Read what you would submit (a PodGroup with its pods or a PodTemplate, a batch Job with
its PodGroup, a PyTorchJob, an MPIJob or a RayCluster), derive the gang as its controller
will create it, and plan it with the scheduler's planner on the cluster as it is now: the
domain, tier and leaves it would take, or why it would not start and which running jobs
it waits for. Nothing is created or evicted.

Exit codes: 0 answered (placed or not), 1 the cluster or the file could not be read,
2 a bad command line or input, 3 with --fail-if-pending when the job would not start.`,
		Example: `  kubectl hypernode plan -f job.yaml -n team-a
  kubectl hypernode plan -f mpijob.yaml --fail-if-pending -o json | jq .placement.domain`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			if po.file == "" {
				return usageError{errors.New("plan needs -f FILE (or -f - for stdin)")}
			}
			objs, err := readObjects(po.file, streams.In)
			if err != nil {
				return err
			}
			namespace, _, err := o.config.ToRawKubeConfigLoader().Namespace()
			if err != nil {
				return fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
			}
			defaultTopology, err := o.parseDefaultTopology()
			if err != nil {
				return err
			}
			clients, err := newClients(o.config)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			job, err := jobspec.Derive(objs, namespace, func(ns, name string) (*schedulingv1alpha1.PodGroup, error) {
				pg, err := clients.Scheduling.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return nil, nil
				}
				return pg, err
			})
			if err != nil {
				var read *jobspec.LookupError
				if errors.As(err, &read) {
					return err
				}
				return usageError{err}
			}
			if po.networkTopology != "" {
				if _, err := podgroup.ParseTopology(po.networkTopology); err != nil {
					return usageError{fmt.Errorf("--network-topology %s", err)}
				}
				job.AnnotatePodGroup(podgroup.NetworkTopologyAnnotation, po.networkTopology)
			}
			cluster, err := inspect.LoadWith(ctx, clients, inspect.LoadOptions{SkipEvents: true, PriorityClasses: true, PodDisruptionBudgets: true})
			if err != nil {
				return err
			}
			cluster.DefaultTopology = defaultTopology
			var priority *int32
			if cmd.Flags().Changed("priority") {
				priority = &po.priority
			}
			report, err := cluster.Plan(job, inspect.PlanOptions{Resource: v1.ResourceName(o.resource), Priority: priority, SchedulerName: plugins.SchedulerName})
			if err != nil {
				return usageError{err}
			}
			// Asked only where the scheduler would get to preemption: the job does not fit,
			// its constraint is valid and its members are not held back before planning.
			if report.WaitsFor != nil && (priority != nil || namesPriorityClass(job) || report.Priority != 0) {
				if report.Preemption, err = po.preemption(ctx, clients, cluster, job, priority); err != nil {
					return err
				}
			}
			if o.output == "json" {
				err = writeJSON(streams.Out, report)
			} else {
				err = inspect.WritePlan(streams.Out, report)
			}
			if err == nil && !report.Placed && po.failIfPending {
				return pendingError{fmt.Errorf("%s %s would not start now", report.Kind, report.Job)}
			}
			return err
		},
	}
	plan.Flags().StringVarP(&po.file, "filename", "f", "", "the job's manifest (YAML or JSON, several documents allowed); - reads stdin")
	plan.Flags().StringVar(&po.networkTopology, "network-topology", "",
		`the job's constraint, as hypernode.dev/network-topology on its PodGroup (e.g. '{"mode":"hard","highestTierAllowed":1}'): for a PodGroup you annotate once its operator made it (mpi-operator, KubeRay)`)
	plan.Flags().Int32Var(&po.priority, "priority", 0, "plan the job at this priority instead of its priority class's")
	plan.Flags().BoolVar(&po.failIfPending, "fail-if-pending", false, "exit 3 when the job would not start now")
	plan.Flags().StringVar(&po.schedulerConfig, "scheduler-config", "", "the scheduler's KubeSchedulerConfiguration file, for the preemption a job of a priority would cause (default: read from --scheduler-config-map)")
	plan.Flags().StringVar(&po.schedulerConfigMap, "scheduler-config-map", defaultConfigMap, "NAMESPACE/NAME of the ConfigMap holding the running scheduler's config.yaml (the shipped configuration when it cannot be read)")
	addDefaultTopologyFlag(plan, o)

	capacity := &cobra.Command{
		Use:   "capacity (--cpu C --memory M --gpu G | -f POD)",
		Short: "Per tier, the largest gang of one pod shape that could start now in one domain",
		Example: `  kubectl hypernode capacity --gpu 8
  kubectl hypernode capacity --cpu 4 --memory 16Gi
  kubectl hypernode capacity -f worker-pod.yaml -o json | jq '.tiers[] | {tier, largest, domain}'`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			shape, err := po.shape(cmd, streams.In)
			if err != nil {
				return err
			}
			cluster, err := o.load(cmd.Context(), newClients, inspect.LoadOptions{SkipEvents: true, SkipPodGroups: true})
			if err != nil {
				return err
			}
			if po.file == "" {
				shape = shapeOf(shape, gpuResource(cluster, o.resource), po.gpu)
			}
			report := cluster.Capacity(shape, v1.ResourceName(o.resource))
			if o.output == "json" {
				return writeJSON(streams.Out, report)
			}
			return inspect.WriteCapacity(streams.Out, report)
		},
	}
	capacity.Flags().StringVarP(&po.file, "filename", "f", "", "a Pod (or PodTemplate) whose requests, node selection and tolerations are the shape; - reads stdin")
	capacity.Flags().StringVar(&po.cpu, "cpu", "", "CPU request of one pod (e.g. 4 or 500m)")
	capacity.Flags().StringVar(&po.memory, "memory", "", "memory request of one pod (e.g. 16Gi)")
	capacity.Flags().Int64Var(&po.gpu, "gpu", 0, "GPUs of one pod (of --resource, else nvidia.com/gpu or amd.com/gpu as the nodes offer)")
	return []*cobra.Command{plan, capacity}
}

// readObjects reads the documents of path ("-": stdin). A file that cannot be read is a
// failure; one that does not decode is bad input.
func readObjects(path string, stdin io.Reader) ([]*jobspec.Object, error) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	objs, err := jobspec.Read(r)
	if err != nil {
		return nil, usageError{fmt.Errorf("reading %s: %w", path, err)}
	}
	return objs, nil
}

// shape reads capacity's pod shape: -f, or the request flags (then shapeOf finishes it).
func (po *planOptions) shape(cmd *cobra.Command, stdin io.Reader) (*v1.Pod, error) {
	flags := po.cpu != "" || po.memory != "" || po.gpu != 0
	switch {
	case po.file != "" && flags:
		return nil, usageError{errors.New("give the shape with -f or with --cpu/--memory/--gpu, not both")}
	case po.file == "" && !flags:
		return nil, usageError{errors.New("capacity needs a pod shape: --cpu, --memory and/or --gpu, or -f POD")}
	case po.file != "":
		objs, err := readObjects(po.file, stdin)
		if err != nil {
			return nil, err
		}
		p, err := jobspec.PodOf(objs)
		if err != nil {
			return nil, usageError{err}
		}
		return p, nil
	}
	if po.gpu < 0 {
		return nil, usageError{fmt.Errorf("--gpu must not be negative, not %d", po.gpu)}
	}
	requests := v1.ResourceList{}
	for name, value := range map[v1.ResourceName]string{v1.ResourceCPU: po.cpu, v1.ResourceMemory: po.memory} {
		if value == "" {
			continue
		}
		q, err := resource.ParseQuantity(value)
		if err != nil || q.Sign() <= 0 {
			return nil, usageError{fmt.Errorf("--%s %q is not a positive quantity", name, value)}
		}
		requests[name] = q
	}
	return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "shape", Resources: v1.ResourceRequirements{Requests: requests}}}}}, nil
}

// shapeOf adds gpus of resource gpu to a shape made from the flags.
func shapeOf(p *v1.Pod, gpu v1.ResourceName, gpus int64) *v1.Pod {
	if gpus > 0 {
		c := &p.Spec.Containers[0]
		c.Resources.Requests[gpu] = *resource.NewQuantity(gpus, resource.DecimalSI)
		c.Resources.Limits = v1.ResourceList{gpu: *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	return p
}

// gpuResource is the resource --gpu counts: --resource when given, else the cluster's GPUs.
func gpuResource(c *inspect.Cluster, res string) v1.ResourceName {
	if res != "" {
		return v1.ResourceName(res)
	}
	if def := c.DefaultResource(); def != v1.ResourceCPU {
		return def
	}
	return "nvidia.com/gpu"
}

// parseDefaultTopology reads --default-network-topology (nil when not given).
func (o *options) parseDefaultTopology() (*podgroup.NetworkTopology, error) {
	if o.defaultTopology == "" {
		return nil, nil
	}
	nt, err := podgroup.ParseTopology(o.defaultTopology)
	if err != nil {
		return nil, usageError{fmt.Errorf("--default-network-topology %s", err)}
	}
	return nt, nil
}

// addDefaultTopologyFlag adds --default-network-topology, as explain and plan take it.
func addDefaultTopologyFlag(cmd *cobra.Command, o *options) {
	cmd.Flags().StringVar(&o.defaultTopology, "default-network-topology", "",
		`the scheduler's defaultNetworkTopology arg, if it sets one, in the annotation's shape (e.g. '{"mode":"soft","highestTierAllowed":1}'): the constraint of PodGroups that say nothing of topology`)
}

// defaultConfigMap is where manifests/install (and the Helm chart) put the scheduler's
// configuration.
const defaultConfigMap = "hypernode-system/hypernode-scheduler-config"

// namesPriorityClass reports whether a member names a priority class.
func namesPriorityClass(job *jobspec.Job) bool {
	for _, p := range job.Members {
		if p.Spec.PriorityClassName != "" {
			return true
		}
	}
	return false
}

// preemption asks GangPreemption, on a copy of the cluster, what it would evict for the job.
func (po *planOptions) preemption(ctx context.Context, clients inspect.Clients, cluster *inspect.Cluster, job *jobspec.Job, priority *int32) (*inspect.PreemptionReport, error) {
	admitted, value, err := cluster.Admit(job, priority)
	if err != nil {
		return nil, usageError{err}
	}
	config, from, err := po.schedulerConfiguration(ctx, clients)
	if err != nil {
		return nil, err
	}
	profile, err := simulate.Profile(config, plugins.SchedulerName)
	if err != nil {
		// The placement is answered; what the configuration cannot say is reported.
		return &inspect.PreemptionReport{Priority: value, Config: from, Refusal: "not simulated: " + err.Error()}, nil
	}
	w, err := simulate.Preemption(ctx, cluster, admitted, profile)
	if err != nil {
		return nil, fmt.Errorf("simulating preemption: %w", err)
	}
	return simulate.Report(cluster, w, value, from), nil
}

// schedulerConfiguration returns the scheduler's configuration and where it comes from:
// --scheduler-config, else the ConfigMap, else the shipped one.
func (po *planOptions) schedulerConfiguration(ctx context.Context, clients inspect.Clients) ([]byte, string, error) {
	if po.schedulerConfig != "" {
		data, err := os.ReadFile(po.schedulerConfig)
		return data, "configuration " + po.schedulerConfig, err
	}
	namespace, name, ok := strings.Cut(po.schedulerConfigMap, "/")
	if !ok || namespace == "" || name == "" {
		return nil, "", usageError{fmt.Errorf("--scheduler-config-map must be NAMESPACE/NAME, not %q", po.schedulerConfigMap)}
	}
	cm, err := clients.Kube.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil && cm.Data["config.yaml"] != "":
		return []byte(cm.Data["config.yaml"]), "the running scheduler's configuration (ConfigMap " + po.schedulerConfigMap + ")", nil
	case err == nil:
		return nil, "", fmt.Errorf("ConfigMap %s has no config.yaml", po.schedulerConfigMap)
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		return schedulerconfig.Config, fmt.Sprintf("the shipped configuration, as ConfigMap %s could not be read: %v", po.schedulerConfigMap, err), nil
	}
	return nil, "", fmt.Errorf("reading ConfigMap %s: %w", po.schedulerConfigMap, err)
}
