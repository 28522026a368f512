// Package demo holds the scenes that `make demo` shows and test/e2e asserts: the seed
// documents' example topologies and jobs (manifests/examples), submitted one by one to a local
// cluster (pkg/localcluster), each reported as kubectl-hypernode's `explain` reports it.
package demo

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	schedclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	topologyclient "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/inspect"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/localcluster"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// GPU is the resource the examples request and the reports show.
const GPU v1.ResourceName = "nvidia.com/gpu"

// PodGroupLabel joins a pod to its PodGroup.
const PodGroupLabel = "scheduling.x-k8s.io/pod-group"

// Job is one example: a PodGroup and a Job of the same name in one file of manifests/examples.
type Job struct {
	Name string
	File string
	Pods int
	// Pending: the gang can never be placed; it must stay pending, nothing bound.
	Pending bool
	// Plan: kubectl hypernode plan is shown before the job is submitted, and the job must
	// land where it said.
	Plan bool
	// Native: the job is a Job with spec.scheduling, whose native pod group the Job
	// controller makes (NativeScene); its pods have no PodGroup label.
	Native bool
}

// Scene is a topology, its simulated nodes, and the jobs submitted to it in order.
type Scene struct {
	// Namespace of the scene's jobs.
	Namespace  string
	Title      string
	HyperNodes string // file in manifests/examples
	// Discovery, instead of HyperNodes, is a file in manifests/examples with
	// hypernode-controller's ConfigMap: the controller discovers the scene's HyperNodes
	// (Discovered of them) from its nodes' labels.
	Discovery  string
	Discovered int
	Nodes      []*v1.Node
	Jobs       []Job
}

// Scenes are the demo's scenes, in order.
func Scenes() []Scene {
	return []Scene{
		{
			Namespace:  "seed-001",
			Title:      "Seed 001: s0..s6, four leaf switches of two 8-GPU nodes, two spines, one core",
			HyperNodes: "seed-001-hypernodes.yaml",
			Nodes:      gpuNodes(nodeNames("node-%d", 0, 7), 8, nil),
			// too-big goes first, so that its explanation shows that no leaf could ever
			// hold it (2 of 3 pods), not merely that the cluster is full.
			Jobs: []Job{
				{Name: "too-big", File: "seed-001-job-too-big.yaml", Pods: 3, Pending: true},
				{Name: "tier1-gang", File: "seed-001-job-tier1.yaml", Pods: 2},
				{Name: "tier2-gang", File: "seed-001-job-tier2.yaml", Pods: 3},
				{Name: "soft-gang", File: "seed-001-job-soft.yaml", Pods: 3},
			},
		},
		{
			Namespace:  "seed-002",
			Title:      "Seed 002: four ToR switches of two 4-GPU nodes, two spines",
			HyperNodes: "seed-002-hypernodes.yaml",
			Nodes:      gpuNodes(nodeNames("node-%d", 1, 8), 4, nil),
			Jobs: []Job{
				{Name: "seed-002-job", File: "seed-002-job.yaml", Pods: 8},
			},
		},
		{
			Namespace:  "fabric-64",
			Title:      "A 64-node fabric: eight leaves of eight 8-GPU nodes, two spines, one core",
			HyperNodes: "fabric-64-hypernodes.yaml",
			Nodes: gpuNodes(nodeNames("gpu-%02d", 0, 63), 8, func(i int) map[string]string {
				return map[string]string{"example.com/leaf": fmt.Sprintf("leaf-%d", i/8)}
			}),
			Jobs: []Job{
				{Name: "spine-job", File: "fabric-64-job-tier2.yaml", Pods: 24},
				{Name: "llm-train", File: "indexed-job-partitions.yaml", Pods: 8, Plan: true},
				{Name: "leaf-job", File: "fabric-64-job-tier1.yaml", Pods: 8},
			},
		},
	}
}

// nodeNames fills format with from..to.
func nodeNames(format string, from, to int) []string {
	names := make([]string, 0, to-from+1)
	for i := from; i <= to; i++ {
		names = append(names, fmt.Sprintf(format, i))
	}
	return names
}

// gpuNodes returns nodes of the given GPUs, 64 cores and 512 GiB each; labels, if set, gives
// the labels of the i-th node.
func gpuNodes(names []string, gpus int, labels func(int) map[string]string) []*v1.Node {
	nodes := make([]*v1.Node, 0, len(names))
	for i, name := range names {
		var l map[string]string
		if labels != nil {
			l = labels(i)
		}
		nodes = append(nodes, localcluster.SimulatedNode(name, l, v1.ResourceList{
			v1.ResourceCPU:    resource.MustParse("64"),
			v1.ResourceMemory: resource.MustParse("512Gi"),
			v1.ResourcePods:   resource.MustParse("110"),
			GPU:               *resource.NewQuantity(int64(gpus), resource.DecimalSI),
		}))
	}
	return nodes
}

// Result is where one job's pods are.
type Result struct {
	Job Job
	// Bound maps each bound pod's job-completion index (or name) to its node.
	Bound map[string]string
	// Pending counts pods not bound.
	Pending int
	// Message is the scheduler's PodScheduled message of a pending pod.
	Message string
}

// Runner submits scenes to a local cluster and reports them.
type Runner struct {
	Cluster *localcluster.Cluster
	Clients inspect.Clients
	Out     io.Writer
	// Timeout bounds each job's wait.
	Timeout time.Duration
}

// NewRunner returns a Runner for c that writes reports to out.
func NewRunner(c *localcluster.Cluster, out io.Writer) (*Runner, error) {
	topo, err := topologyclient.NewForConfig(c.Admin)
	if err != nil {
		return nil, err
	}
	sched, err := schedclientset.NewForConfig(c.Admin)
	if err != nil {
		return nil, err
	}
	return &Runner{Cluster: c, Clients: inspect.Clients{Kube: c.Kube, Topology: topo, Scheduling: sched}, Out: out, Timeout: 90 * time.Second}, nil
}

// Setup creates the scene's namespace, nodes and HyperNodes.
func (r *Runner) Setup(ctx context.Context, s Scene) error {
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace}}
	if _, err := r.Cluster.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := r.Cluster.AddNodes(ctx, s.Nodes...); err != nil {
		return err
	}
	if s.Discovery != "" {
		return r.discover(ctx, s)
	}
	_, err := r.Cluster.Applier.ApplyFile(ctx, r.example(s.HyperNodes), "")
	return err
}

func (r *Runner) example(file string) string {
	return filepath.Join(r.Cluster.RepoRoot, "manifests", "examples", file)
}

// Submit applies a job's file and waits until all its pods are bound or, for a job that must
// stay pending, until the scheduler has refused every one of its pods.
func (r *Runner) Submit(ctx context.Context, s Scene, j Job) (Result, error) {
	if _, err := r.Cluster.Applier.ApplyFile(ctx, r.example(j.File), s.Namespace); err != nil {
		return Result{}, err
	}
	var res Result
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, r.Timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		res, err = r.Observe(ctx, s, j)
		if err != nil {
			return false, err
		}
		if len(res.Bound)+res.Pending < j.Pods {
			return false, nil // the Job controller has not created every pod yet
		}
		if j.Pending {
			return res.Message != "", nil
		}
		return len(res.Bound) == j.Pods, nil
	})
	if err != nil {
		return res, fmt.Errorf("job %s/%s: %d of %d pods bound, %d pending (%s): %w", s.Namespace, j.Name, len(res.Bound), j.Pods, res.Pending, res.Message, err)
	}
	return res, nil
}

// Observe reads where a job's pods are now.
func (r *Runner) Observe(ctx context.Context, s Scene, j Job) (Result, error) {
	selector := PodGroupLabel + "=" + j.Name
	if j.Native {
		selector = "batch.kubernetes.io/job-name=" + j.Name
	}
	pods, err := r.Cluster.Kube.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return Result{}, err
	}
	res := Result{Job: j, Bound: map[string]string{}}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		if p.Spec.NodeName != "" {
			res.Bound[PodKey(p)] = p.Spec.NodeName
			continue
		}
		res.Pending++
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
				res.Message = c.Message
			}
		}
	}
	return res, nil
}

// PodKey names a Job's pod by its completion index when it has one (pod names carry a random
// suffix), otherwise by its name.
func PodKey(p *v1.Pod) string {
	if idx, ok := p.Labels["batch.kubernetes.io/job-completion-index"]; ok {
		return p.Labels["batch.kubernetes.io/job-name"] + "-" + idx
	}
	return p.Name
}

// ReportJob prints kubectl-hypernode's explanation of a job's gang and returns it.
func (r *Runner) ReportJob(ctx context.Context, namespace string, j Job) (inspect.Explanation, error) {
	podGroup := j.Name
	if j.Native {
		var err error
		if podGroup, err = r.nativeGroupOf(ctx, namespace, j); err != nil {
			return inspect.Explanation{}, err
		}
	}
	return r.Report(ctx, namespace, podGroup)
}

// Report prints kubectl-hypernode's explanation of a PodGroup (or native pod group) and
// returns it.
func (r *Runner) Report(ctx context.Context, namespace, podGroup string) (inspect.Explanation, error) {
	// The same reads as kubectl hypernode explain.
	cluster, err := inspect.LoadWith(ctx, r.Clients, inspect.LoadOptions{EventNamespace: namespace,
		PodGroup: &types.NamespacedName{Namespace: namespace, Name: podGroup}})
	if err != nil {
		return inspect.Explanation{}, err
	}
	e, err := cluster.Explain(namespace, podGroup, GPU)
	if err != nil {
		return e, err
	}
	return e, inspect.WriteExplanation(r.Out, e)
}

// Check returns an error when a job's outcome contradicts what it asks for: a job that must
// stay pending has a pod bound, a job that must run is not fully bound, or a hard job's pods
// span a tier above the allowed one.
func Check(res Result, e inspect.Explanation) error {
	name := e.PodGroup
	if res.Job.Pending {
		if len(res.Bound) > 0 {
			return fmt.Errorf("%s must not run, but %d of its pods are bound", name, len(res.Bound))
		}
		return nil
	}
	if len(res.Bound) != res.Job.Pods || e.Placement == nil {
		return fmt.Errorf("%s: %d of %d pods bound", name, len(res.Bound), res.Job.Pods)
	}
	nt := e.NetworkTopology
	if nt != nil && nt.Parsed != nil && nt.Parsed.Mode == podgroup.ModeHard && e.Placement.Tier > nt.MaxTier {
		return fmt.Errorf("%s spans %s (tier %d), above its hard limit tier %d", name, e.Placement.Domain, e.Placement.Tier, nt.MaxTier)
	}
	return nil
}

// Summary is one line per job, e.g. "seed-001/tier2-gang: 3/3 pods in s5 (tier 2); hard topology (tier<=2)".
func Summary(res Result, e inspect.Explanation) string {
	constraint := "no topology constraint"
	if e.NetworkTopology != nil && e.NetworkTopology.Description != "" {
		constraint = e.NetworkTopology.Description
	}
	if res.Job.Pending || e.Placement == nil {
		return fmt.Sprintf("%s: pending, %d/%d pods bound; %s", e.PodGroup, len(res.Bound), res.Job.Pods, constraint)
	}
	return fmt.Sprintf("%s: %d/%d pods in %s (tier %d); %s", e.PodGroup, len(res.Bound), res.Job.Pods, e.Placement.Domain, e.Placement.Tier, constraint)
}

// ReportTree prints kubectl-hypernode's tree.
func (r *Runner) ReportTree(ctx context.Context) error {
	cluster, err := inspect.LoadWith(ctx, r.Clients, inspect.LoadOptions{SkipEvents: true, SkipPodGroups: true})
	if err != nil {
		return err
	}
	return inspect.WriteTree(r.Out, cluster.Tree(GPU))
}

// Teardown removes the scene's jobs, pods, PodGroups, HyperNodes and nodes, so the next scene
// starts from an empty cluster. No garbage collector runs locally, so pods are deleted
// directly, without a grace period (no kubelet would confirm a graceful deletion), and Jobs
// with background propagation (orphan propagation would leave them Terminating: only the
// garbage collector removes its finalizer).
func (r *Runner) Teardown(ctx context.Context, s Scene) error {
	kube := r.Cluster.Kube
	// Every Job of the namespace, not only the scene's: a test's own Job whose pods are
	// deleted would get them back from the Job controller, without their PodGroup.
	if err := kube.BatchV1().Jobs(s.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}, metav1.ListOptions{}); err != nil {
		return err
	}
	if err := kube.CoreV1().Pods(s.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
		return err
	}
	if err := r.Clients.Scheduling.SchedulingV1alpha1().PodGroups(s.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return err
	}
	if s.Discovery != "" {
		// Stop the controller first, or it would discover the HyperNodes again.
		if err := r.stopDiscovery(ctx); err != nil {
			return err
		}
	}
	if err := r.Clients.Topology.TopologyV1alpha1().HyperNodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return err
	}
	for _, n := range s.Nodes {
		if err := kube.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	})
}
