// Package inspect explains the HyperNode tree and the placement of PodGroups to people: it
// reads a cluster once (Load) and derives reports from that one read, the HyperNode tree with
// capacity and occupants (Tree) and why a gang is where it is or is still pending (Explain).
// The reports are JSON-serialisable for scripts; WriteTree and WriteExplanation render them
// for an 80-column terminal. The kubectl plugin cmd/kubectl-hypernode is a thin shell around
// this package.
package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"
	resourcehelper "k8s.io/component-helpers/resource"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	schedclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	topologyclient "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// Clients are the API clients Load reads through.
type Clients struct {
	Kube       kubernetes.Interface
	Topology   topologyclient.Interface
	Scheduling schedclientset.Interface
}

// ErrHyperNodeCRDMissing is returned by Load when the cluster does not serve HyperNodes.
var ErrHyperNodeCRDMissing = errors.New("the HyperNode CRD (hypernodes.topology.volcano.sh) is not installed; install it with: kubectl apply -f manifests/crds/")

// ErrPodGroupNotFound is returned by Explain for a PodGroup that does not exist.
var ErrPodGroupNotFound = errors.New("PodGroup not found")

// LoadOptions narrow what Load reads.
type LoadOptions struct {
	// EventNamespace limits the Events read to one namespace ("" reads every namespace).
	// Explain only looks at the Events of its PodGroup's namespace.
	EventNamespace string
	// SkipEvents reads no Events at all (Tree needs none).
	SkipEvents bool
	// PodGroup, when set, reads only this PodGroup (Explain's) by Get, so that a user who may
	// read the PodGroups of one namespace can explain theirs; SkipPodGroups reads none (Tree
	// groups pods by their label and needs none).
	PodGroup      *types.NamespacedName
	SkipPodGroups bool
	// PriorityClasses reads the PriorityClasses (plan resolves its members' priorities),
	// PodDisruptionBudgets the budgets (plan's preemption counts them).
	PriorityClasses      bool
	PodDisruptionBudgets bool
}

// Cluster is one read of everything the reports need. Tree and Explain never call the API:
// every report derived from one Cluster describes the same moment.
type Cluster struct {
	// Now is when the cluster was read; ages in reports are relative to it.
	Now        time.Time
	HyperNodes []*topologyv1alpha1.HyperNode
	Nodes      []*v1.Node
	Pods       []*v1.Pod
	PodGroups  []*schedulingv1alpha1.PodGroup
	// NativePodGroups are Kubernetes' own pod groups (scheduling.k8s.io), where served
	// (NativeServed).
	NativePodGroups []*schedulingv1beta1.PodGroup
	NativeServed    bool
	Events          []*v1.Event
	// DeviceClasses tell which extended resources DRA provides (a node lacks them in its
	// allocatable).
	DeviceClasses []*resourcev1.DeviceClass
	// ResourceSlices and ResourceClaims are the DRA devices and their allocations: the
	// nodes' devices count as their classes' resources (devices.Inventory, as the scheduler
	// counts them).
	ResourceSlices []*resourcev1.ResourceSlice
	ResourceClaims []*resourcev1.ResourceClaim
	// PriorityClasses give the priority of pods not yet admitted (read for plan only).
	PriorityClasses []*schedulingv1.PriorityClass
	// PodDisruptionBudgets are read for plan's preemption only.
	PodDisruptionBudgets []*policyv1.PodDisruptionBudget
	// Warnings are problems of the read that do not stop the reports (e.g. the PodGroup CRD
	// is not installed, so no gang can be explained).
	Warnings []string
	// DefaultTopology is the scheduler's defaultNetworkTopology arg, as the user tells it (the
	// scheduler's configuration is not read): the constraint of PodGroups that say nothing
	// of topology.
	DefaultTopology *podgroup.NetworkTopology

	tree  *hypernode.Tree
	snap  *hypernode.Snapshot
	nodes map[string]*nodeState
	// claimers maps a HyperNode name to the HyperNodes that list it as a member.
	claimers map[string][]string
	// offered are the resources some node has in its allocatable; draOnly the extended
	// resources a DeviceClass provides and no node offers: requests cannot tell where they fit.
	offered, draOnly sets.Set[v1.ResourceName]
	// deviceClassErr is why DeviceClasses could not be read (nil when they were).
	deviceClassErr error
	// devices counts each node's devices per class.
	devices *devices.Inventory
}

// nodeState is a node with what is bound to it.
type nodeState struct {
	node *v1.Node
	// unusable is tree's view, for no pod in particular: why the node takes no new pod ("" when
	// it does), not ready or cordoned. explain judges per gang, by taints and tolerations
	// (refusedBy), as the scheduler does.
	unusable string
	// requested sums the requests of the non-terminal pods bound to the node.
	requested v1.ResourceList
	pods      []*v1.Pod
}

// Load reads HyperNodes, Nodes, Pods, every PodGroup and Events once (the library's default;
// kubectl hypernode narrows the PodGroups and Events with LoadWith).
func Load(ctx context.Context, c Clients) (*Cluster, error) {
	return LoadWith(ctx, c, LoadOptions{})
}

// LoadWith is Load with options. Lists are read in pages, as kubectl does, so that a large
// cluster is not one response of a gigabyte; managed fields are dropped as pages arrive.
func LoadWith(ctx context.Context, c Clients, opts LoadOptions) (*Cluster, error) {
	cl := &Cluster{Now: time.Now()}
	err := eachItem(ctx, func(o metav1.ListOptions) (runtime.Object, error) {
		return c.Topology.TopologyV1alpha1().HyperNodes().List(ctx, o)
	}, func(hn *topologyv1alpha1.HyperNode) { cl.HyperNodes = append(cl.HyperNodes, hn) })
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, ErrHyperNodeCRDMissing
		}
		return nil, fmt.Errorf("listing HyperNodes: %w", err)
	}
	err = eachItem(ctx, func(o metav1.ListOptions) (runtime.Object, error) {
		return c.Kube.CoreV1().Nodes().List(ctx, o)
	}, func(n *v1.Node) { cl.Nodes = append(cl.Nodes, n) })
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	err = eachItem(ctx, func(o metav1.ListOptions) (runtime.Object, error) {
		return c.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
	}, func(p *v1.Pod) { cl.Pods = append(cl.Pods, p) })
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	if err := cl.readPodGroups(ctx, c, opts); err != nil {
		return nil, err
	}
	if err := cl.readNativePodGroups(ctx, c, opts); err != nil {
		return nil, err
	}
	err = eachItem(ctx, func(o metav1.ListOptions) (runtime.Object, error) {
		return c.Kube.ResourceV1().DeviceClasses().List(ctx, o)
	}, func(dc *resourcev1.DeviceClass) { cl.DeviceClasses = append(cl.DeviceClasses, dc) })
	if err != nil && !apierrors.IsNotFound(err) {
		// Only resources that DRA provides need them: explain warns when a request has one.
		cl.DeviceClasses, cl.deviceClassErr = nil, err
	}
	if cl.deviceClassErr == nil {
		cl.readDevices(ctx, c)
	}
	if opts.PriorityClasses {
		err := eachItem(ctx, func(o metav1.ListOptions) (runtime.Object, error) {
			return c.Kube.SchedulingV1().PriorityClasses().List(ctx, o)
		}, func(pc *schedulingv1.PriorityClass) { cl.PriorityClasses = append(cl.PriorityClasses, pc) })
		if err != nil {
			return nil, fmt.Errorf("listing PriorityClasses: %w", err)
		}
	}
	if opts.PodDisruptionBudgets {
		err := eachItem(ctx, func(o metav1.ListOptions) (runtime.Object, error) {
			return c.Kube.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, o)
		}, func(pdb *policyv1.PodDisruptionBudget) {
			cl.PodDisruptionBudgets = append(cl.PodDisruptionBudgets, pdb)
		})
		if err != nil {
			return nil, fmt.Errorf("listing PodDisruptionBudgets: %w", err)
		}
	}
	if !opts.SkipEvents {
		err := eachItem(ctx, func(o metav1.ListOptions) (runtime.Object, error) {
			return c.Kube.CoreV1().Events(opts.EventNamespace).List(ctx, o)
		}, func(e *v1.Event) { cl.Events = append(cl.Events, e) })
		if err != nil {
			// Events are context; a user who may not read them still gets the analysis.
			cl.Events = nil
			cl.Warnings = append(cl.Warnings, fmt.Sprintf("Events could not be read: %v", err))
		}
	}
	cl.index()
	return cl, nil
}

// index builds the HyperNode tree and the per-node state.
func (c *Cluster) index() {
	nodeLabels := make(map[string]labels.Set, len(c.Nodes))
	c.nodes = make(map[string]*nodeState, len(c.Nodes))
	for _, n := range c.Nodes {
		nodeLabels[n.Name] = labels.Set(n.Labels)
		c.nodes[n.Name] = &nodeState{node: n, unusable: unusableReason(n), requested: v1.ResourceList{}}
	}
	c.offered = sets.New[v1.ResourceName]()
	for _, n := range c.Nodes {
		for r := range n.Status.Allocatable {
			c.offered.Insert(r)
		}
	}
	c.draOnly = sets.New[v1.ResourceName]()
	for _, dc := range c.DeviceClasses {
		// A class answers to its implicit name, and to its explicit one when it has one.
		c.draOnly.Insert(v1.ResourceName(resourcev1.ResourceDeviceClassPrefix + dc.Name))
		if dc.Spec.ExtendedResourceName != nil {
			c.draOnly.Insert(v1.ResourceName(*dc.Spec.ExtendedResourceName))
		}
	}
	c.draOnly = c.draOnly.Difference(c.offered)
	c.devices = devices.NewInventory()
	for _, dc := range c.DeviceClasses {
		c.devices.SetClass(dc)
	}
	for _, s := range c.ResourceSlices {
		c.devices.SetSlice(s)
	}
	for _, claim := range c.ResourceClaims {
		c.devices.SetClaim(claim)
	}
	c.tree = hypernode.Build(nodeLabels, c.HyperNodes)
	c.snap = c.tree.Snapshot()
	c.claimers = map[string][]string{}
	for _, hn := range c.HyperNodes {
		for _, m := range hn.Spec.Members {
			if m.Type == topologyv1alpha1.MemberTypeHyperNode && m.Selector.ExactMatch != nil {
				c.claimers[m.Selector.ExactMatch.Name] = append(c.claimers[m.Selector.ExactMatch.Name], hn.Name)
			}
		}
	}
	sort.Slice(c.Pods, func(i, j int) bool {
		if c.Pods[i].Namespace != c.Pods[j].Namespace {
			return c.Pods[i].Namespace < c.Pods[j].Namespace
		}
		return c.Pods[i].Name < c.Pods[j].Name
	})
	for _, p := range c.Pods {
		ns := c.nodes[p.Spec.NodeName]
		if ns == nil || terminal(p) {
			continue
		}
		ns.pods = append(ns.pods, p)
		addList(ns.requested, podRequests(p))
	}
}

// unusableReason is tree's view of a node: not ready by its Ready condition, or cordoned.
func unusableReason(n *v1.Node) string {
	if n.Spec.Unschedulable {
		return "cordoned"
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == v1.NodeReady {
			if cond.Status != v1.ConditionTrue {
				return "not ready"
			}
			return ""
		}
	}
	return "not ready"
}

// terminal pods hold no resources.
func terminal(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
}

// podRequests is what the scheduler accounts for a pod (init containers and overhead
// included), plus one "pods" slot.
func podRequests(p *v1.Pod) v1.ResourceList {
	// As kube-scheduler counts them with in-place resize on (the default since 1.35): a
	// container being resized holds the larger of its new and its running resources.
	reqs := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{UseStatusResources: true})
	reqs[v1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
	return reqs
}

func addList(dst, src v1.ResourceList) {
	for name, q := range src {
		cur := dst[name]
		cur.Add(q)
		dst[name] = cur
	}
}

// free returns a node's allocatable minus its requests for one resource (never negative).
func (n *nodeState) free(r v1.ResourceName) resource.Quantity {
	q := n.node.Status.Allocatable[r].DeepCopy()
	q.Sub(n.requested[r])
	if q.Sign() < 0 {
		return *resource.NewQuantity(0, q.Format)
	}
	return q
}

// DefaultResource is the resource the reports show when none is asked for: the GPUs when any
// node offers nvidia.com/gpu or amd.com/gpu (the resource that gangs of AI jobs compete for),
// as allocatable or as DRA devices (of a class providing it, or of the NVIDIA or AMD DRA
// drivers' classes), otherwise cpu.
func (c *Cluster) DefaultResource() v1.ResourceName {
	gpus := []v1.ResourceName{"nvidia.com/gpu", "amd.com/gpu",
		v1.ResourceName(resourcev1.ResourceDeviceClassPrefix + "gpu.nvidia.com"), v1.ResourceName(resourcev1.ResourceDeviceClassPrefix + "gpu.amd.com")}
	for _, gpu := range gpus {
		for _, n := range c.Nodes {
			if q, ok := n.Status.Allocatable[gpu]; ok && q.Sign() > 0 {
				return gpu
			}
			if _, total := c.deviceAmount(n.Name, gpu); total > 0 {
				return gpu
			}
		}
	}
	return v1.ResourceCPU
}

// deviceAmount is a node's DRA devices counting as res (used and total; 0 when the node
// lists res as allocatable: then its devices do not stand for it, as in the scheduler).
func (c *Cluster) deviceAmount(node string, res v1.ResourceName) (used, total int64) {
	if c.devices == nil {
		return 0, 0
	}
	if n := c.nodes[node]; n != nil {
		if _, ok := n.node.Status.Allocatable[res]; ok {
			return 0, 0
		}
	}
	u, t := c.devices.Amounts(node, []v1.ResourceName{res})
	if t == nil {
		return 0, 0
	}
	return u[0], t[0]
}

// devicesOffer reports whether some node's DRA devices count as res: requests of it are
// then counted against those devices (deviceAmount), as the scheduler's scores count them.
func (c *Cluster) devicesOffer(res v1.ResourceName) bool {
	for _, n := range c.Nodes {
		if _, total := c.deviceAmount(n.Name, res); total > 0 {
			return true
		}
	}
	return false
}

// readDevices reads the ResourceSlices and ResourceClaims; a failed read is a warning (the
// device figures are then missing, not wrong).
func (cl *Cluster) readDevices(ctx context.Context, c Clients) {
	err := eachItem(ctx, func(o metav1.ListOptions) (runtime.Object, error) {
		return c.Kube.ResourceV1().ResourceSlices().List(ctx, o)
	}, func(s *resourcev1.ResourceSlice) { cl.ResourceSlices = append(cl.ResourceSlices, s) })
	if err == nil {
		err = eachItem(ctx, func(o metav1.ListOptions) (runtime.Object, error) {
			return c.Kube.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, o)
		}, func(claim *resourcev1.ResourceClaim) { cl.ResourceClaims = append(cl.ResourceClaims, claim) })
	}
	if err != nil && !apierrors.IsNotFound(err) {
		cl.ResourceSlices, cl.ResourceClaims = nil, nil
		cl.Warnings = append(cl.Warnings, fmt.Sprintf("DRA devices could not be read, so none is counted: %v", err))
	}
}

// readPodGroups reads the PodGroups opts asks for. A missing CRD or a forbidden read is a
// warning: the tree needs no PodGroup, and explain then says it found none, and why.
func (cl *Cluster) readPodGroups(ctx context.Context, c Clients, opts LoadOptions) error {
	var err error
	switch {
	case opts.SkipPodGroups:
		return nil
	case opts.PodGroup != nil:
		podGroups := c.Scheduling.SchedulingV1alpha1().PodGroups(opts.PodGroup.Namespace)
		var pg *schedulingv1alpha1.PodGroup
		if pg, err = podGroups.Get(ctx, opts.PodGroup.Name, metav1.GetOptions{}); err == nil {
			cl.PodGroups = []*schedulingv1alpha1.PodGroup{pg}
		} else if apierrors.IsNotFound(err) {
			// The PodGroup is missing, or the CRD is: only a list can tell which. A user who
			// may get but not list PodGroups gets "not found", the likelier answer.
			if _, err = podGroups.List(ctx, metav1.ListOptions{Limit: 1}); err == nil || apierrors.IsForbidden(err) {
				return nil
			}
		}
	default:
		err = eachItem(ctx, func(o metav1.ListOptions) (runtime.Object, error) {
			return c.Scheduling.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).List(ctx, o)
		}, func(pg *schedulingv1alpha1.PodGroup) { cl.PodGroups = append(cl.PodGroups, pg) })
	}
	switch {
	case err == nil:
	case apierrors.IsNotFound(err):
		cl.PodGroups = nil
		cl.Warnings = append(cl.Warnings, "the PodGroup CRD (podgroups.scheduling.x-k8s.io) is not installed")
	case apierrors.IsForbidden(err):
		cl.PodGroups = nil
		cl.Warnings = append(cl.Warnings, fmt.Sprintf("PodGroups could not be read: %v", err))
	default:
		return fmt.Errorf("reading PodGroups: %w", err)
	}
	return nil
}

// counted returns the request without the resources that only DRA provides (they are
// allocated from ResourceSlices, which only the scheduler's simulation can judge), and their
// names.
func (c *Cluster) counted(request v1.ResourceList) (v1.ResourceList, []string) {
	var dropped []string
	out := v1.ResourceList{}
	for r, q := range request {
		if c.draOnly.Has(r) && !c.devicesOffer(r) {
			dropped = append(dropped, string(r))
			continue
		}
		out[r] = q
	}
	sort.Strings(dropped)
	return out, dropped
}

// draWarning warns, when DeviceClasses could not be read, about the requested extended
// resources that no node has in its allocatable: DRA may provide them ("" otherwise).
func (c *Cluster) draWarning(request v1.ResourceList) string {
	if c.deviceClassErr == nil {
		return ""
	}
	var absent []string
	for r := range request {
		if r == v1.ResourceCPU || r == v1.ResourceMemory || r == v1.ResourceEphemeralStorage || r == v1.ResourcePods {
			continue
		}
		if !c.offered.Has(r) {
			absent = append(absent, string(r))
		}
	}
	if len(absent) == 0 {
		return ""
	}
	sort.Strings(absent)
	return fmt.Sprintf("no node has %s in its allocatable, and DeviceClasses could not be read to tell whether DRA provides it (then its capacity figures are wrong): %v",
		strings.Join(absent, ", "), c.deviceClassErr)
}

// warningsFor returns the read's warnings, and one when no node offers res: a mistyped
// --resource would otherwise show zeros everywhere without a word.
func (c *Cluster) warningsFor(res v1.ResourceName) []string {
	if c.offered.Has(res) || len(c.Nodes) == 0 {
		return c.Warnings
	}
	if c.devicesOffer(res) {
		return c.Warnings
	}
	return append(slices.Clip(c.Warnings), fmt.Sprintf("no node has %s in its allocatable: every capacity figure for it is 0 (check --resource)", res))
}

// podGroupOf returns the key (namespace/name) of a pod's PodGroup or native pod group, or "".
func podGroupOf(p *v1.Pod) string {
	name := labelMemberOf(p)
	if name == "" {
		name = nativeMemberOf(p)
	}
	if name == "" {
		return ""
	}
	return p.Namespace + "/" + name
}

// sortedNames returns the keys of a set-like map, sorted.
func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// eachItem lists in pages of the pager's default size and hands each item, without its
// managed fields, to add.
func eachItem[T any, PT interface {
	*T
	metav1.Object
}](ctx context.Context, list func(metav1.ListOptions) (runtime.Object, error), add func(PT)) error {
	return pager.New(pager.SimplePageFunc(list)).EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		item, ok := obj.(PT)
		if !ok {
			return fmt.Errorf("listed a %T", obj)
		}
		item.SetManagedFields(nil)
		add(item)
		return nil
	})
}
