// Package simulate runs this project's scheduler, kube-scheduler with its plugins and a
// profile of its configuration, on a copy of a cluster read by kubectl hypernode, to ask it
// what it would decide without touching the cluster: the copy lives in fake clientsets, so
// whatever the plugins write goes there. kubectl hypernode plan asks GangPreemption which
// pods it would evict for a job that does not fit.
package simulate

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/profile"
	schedfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"

	// Registers the plugins' args in kube-scheduler's config scheme.
	_ "github.com/hypernode-dev/hypernode-scheduler/apis/config/scheme"
	topologyfake "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned/fake"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/inspect"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/jobspec"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/gangpreemption"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// Profile reads a KubeSchedulerConfiguration (with kube-scheduler's defaults and validation)
// and returns its profile named schedulerName, which must run GangPreemption.
func Profile(config []byte, schedulerName string) (*schedconfig.KubeSchedulerProfile, error) {
	obj, _, err := schedscheme.Codecs.UniversalDecoder().Decode(config, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding the scheduler configuration: %w", err)
	}
	cfg, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
	if !ok {
		return nil, fmt.Errorf("the scheduler configuration is a %T, not a KubeSchedulerConfiguration", obj)
	}
	if err := schedvalidation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		return nil, fmt.Errorf("the scheduler configuration is not valid: %w", err)
	}
	var names []string
	for i := range cfg.Profiles {
		p := &cfg.Profiles[i]
		names = append(names, p.SchedulerName)
		if p.SchedulerName != schedulerName {
			continue
		}
		if !runsPostFilter(p.Plugins, gangpreemption.Name) {
			return nil, fmt.Errorf("profile %s does not run %s: gangs do not preempt there", schedulerName, gangpreemption.Name)
		}
		return p, nil
	}
	return nil, fmt.Errorf("the scheduler configuration has no profile %s (it has %v)", schedulerName, names)
}

// runsPostFilter reports whether a profile's plugins run name at PostFilter: enabled there or
// through multiPoint, and not disabled there (as kube-scheduler expands them).
func runsPostFilter(plugins *schedconfig.Plugins, name string) bool {
	if plugins == nil {
		return false
	}
	named := func(pl schedconfig.Plugin) bool { return pl.Name == name }
	if slices.ContainsFunc(plugins.PostFilter.Enabled, named) {
		return true
	}
	disabled := slices.ContainsFunc(plugins.PostFilter.Disabled, func(pl schedconfig.Plugin) bool { return pl.Name == name || pl.Name == "*" })
	return !disabled && slices.ContainsFunc(plugins.MultiPoint.Enabled, named)
}

// Preemption asks GangPreemption what it would evict for job's gang on a copy of c, as after
// a cycle of the job's first member (in rank order) that found no room. The job's members
// must have their priority (inspect.Cluster.Admit).
func Preemption(ctx context.Context, c *inspect.Cluster, job *jobspec.Job, prof *schedconfig.KubeSchedulerProfile) (gangpreemption.WhatIf, error) {
	if err := plugins.SetFeatureDefaults(); err != nil {
		return gangpreemption.WhatIf{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The plugins log what they decide at their usual verbosity: not the command's output.
	ctx = klog.NewContext(ctx, klog.NewKlogr().V(10))

	kube, topology, podGroups := copyOf(c, job)
	factory := informers.NewSharedInformerFactory(kube, 0)
	registry := plugins.Registry(plugins.CRDClients{Topology: topology, PodGroups: podGroups})
	var gp *gangpreemption.GangPreemption
	newGP := registry[gangpreemption.Name]
	registry[gangpreemption.Name] = func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := newGP(ctx, obj, h)
		gp, _ = p.(*gangpreemption.GangPreemption)
		return p, err
	}
	snapshot := internalcache.NewEmptySnapshot()
	recorders := profile.RecorderFactory(func(string) events.EventRecorderLogger { return &events.FakeRecorder{} })
	sched, err := scheduler.New(ctx, kube, factory, nil, recorders,
		scheduler.WithProfiles(*prof), scheduler.WithFrameworkOutOfTreeRegistry(registry), scheduler.WithNodeInfoSnapshot(snapshot))
	if err != nil {
		return gangpreemption.WhatIf{}, fmt.Errorf("building the scheduler: %w", err)
	}
	if gp == nil {
		return gangpreemption.WhatIf{}, errors.New("the profile built no GangPreemption")
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if err := sched.WaitForHandlersSync(ctx); err != nil {
		return gangpreemption.WhatIf{}, err
	}
	if err := gp.WaitForSync(ctx); err != nil {
		return gangpreemption.WhatIf{}, err
	}
	if err := sched.Cache.UpdateSnapshot(klog.FromContext(ctx), snapshot); err != nil {
		return gangpreemption.WhatIf{}, err
	}
	fw := sched.Profiles[prof.SchedulerName]
	pod, err := factory.Core().V1().Pods().Lister().Pods(job.Members[0].Namespace).Get(firstMember(job).Name)
	if err != nil {
		return gangpreemption.WhatIf{}, err
	}
	state := framework.NewCycleState()
	if _, status, _ := fw.RunPreFilterPlugins(ctx, state, pod); status.IsSuccess() {
		// The planner found room after all (the scheduler's filters agree with plan's):
		// PostFilter would not run. Preemption is still asked, as for a cycle whose Filter
		// failed on every node.
		klog.FromContext(ctx).V(2).Info("PreFilter passed in the simulation", "pod", klog.KObj(pod))
	}
	return gp.WhatIf(ctx, state, pod)
}

// firstMember is the member the scheduler tries first: the lowest rank.
func firstMember(job *jobspec.Job) *v1.Pod {
	members := make([]podgroup.Member, len(job.Members))
	for i, p := range job.Members {
		members[i] = podgroup.Member{Pod: p}
	}
	podgroup.SortByRank(members)
	return members[0].Pod
}

// copyOf puts the read cluster and the job into fake clientsets.
func copyOf(c *inspect.Cluster, job *jobspec.Job) (*kubefake.Clientset, *topologyfake.Clientset, listsThenWatches) {
	var objs []runtime.Object
	for _, n := range c.Nodes {
		objs = append(objs, n)
	}
	own := job.PodGroup.Namespace + "/" + job.PodGroup.Name
	for _, p := range c.Pods {
		if p.Labels != nil && p.Namespace+"/"+p.Labels["scheduling.x-k8s.io/pod-group"] == own {
			continue // plan is for the job alone (its report warns of them)
		}
		objs = append(objs, p)
	}
	for _, p := range job.Members {
		objs = append(objs, p)
	}
	for _, pdb := range c.PodDisruptionBudgets {
		objs = append(objs, pdb)
	}
	for _, pc := range c.PriorityClasses {
		objs = append(objs, pc)
	}
	for _, dc := range c.DeviceClasses {
		objs = append(objs, dc)
	}
	for _, s := range c.ResourceSlices {
		objs = append(objs, s)
	}
	for _, claim := range c.ResourceClaims {
		objs = append(objs, claim)
	}
	kube := kubefake.NewClientset(objs...)
	// The plugins check at start that their CRDs are served.
	kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{
		{GroupVersion: "topology.volcano.sh/v1alpha1", APIResources: []metav1.APIResource{{Name: "hypernodes", Kind: "HyperNode"}}},
		{GroupVersion: "scheduling.x-k8s.io/v1alpha1", APIResources: []metav1.APIResource{{Name: "podgroups", Kind: "PodGroup", Namespaced: true}}},
	}
	var hns []runtime.Object
	for _, hn := range c.HyperNodes {
		hns = append(hns, hn)
	}
	var pgs []runtime.Object
	for _, pg := range c.PodGroups {
		if pg.Namespace+"/"+pg.Name != own {
			pgs = append(pgs, pg)
		}
	}
	pgs = append(pgs, job.PodGroup)
	return kube, topologyfake.NewSimpleClientset(hns...), listsThenWatches{schedfake.NewSimpleClientset(pgs...)}
}

// listsThenWatches is scheduler-plugins' fake clientset, which predates client-go's streaming
// lists: it tells the informers to list, then watch.
type listsThenWatches struct{ *schedfake.Clientset }

// IsWatchListSemanticsUnSupported is true: the fake sends no end-of-list bookmark.
func (listsThenWatches) IsWatchListSemanticsUnSupported() bool { return true }

// ChosenBy says how GangPreemption picks among the domains of the lowest tier that can hold
// the job once its victims are gone.
const ChosenBy = "the lowest tier where the job fits once its victims are gone; there, the domain with the fewest evictions a PodDisruptionBudget forbids, then the lowest highest victim priority, then the fewest pods evicted, then the fewest members to spare"

// Report describes a WhatIf for people and scripts.
func Report(c *inspect.Cluster, w gangpreemption.WhatIf, priority int32, config string) *inspect.PreemptionReport {
	r := &inspect.PreemptionReport{Priority: priority, Config: config, Refusal: w.Refusal}
	if w.Domain == "" {
		return r
	}
	r.Helps, r.Domain, r.Tier, r.NotChosen, r.Why = true, w.Domain, w.Tier, w.NotChosen, ChosenBy
	if tier, ok := c.TierName(w.Domain); ok {
		r.TierName = tier
	}
	for _, v := range w.Victims {
		since := v.Pod.CreationTimestamp.Time
		if v.Pod.Status.StartTime != nil {
			since = v.Pod.Status.StartTime.Time
		}
		r.Victims = append(r.Victims, inspect.VictimReport{Pod: v.Pod.Namespace + "/" + v.Pod.Name, Node: v.Node,
			Priority: v.Priority, Gang: v.Gang, PDBViolated: v.PDBViolated, Age: duration.HumanDuration(c.Now.Sub(since))})
	}
	return r
}
