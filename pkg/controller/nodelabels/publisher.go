// Package nodelabels publishes the HyperNode tree as node labels, when the controller's
// configuration turns it on (nodeLabels.enabled): every node in a usable leaf gets one label
// per tier of its chain of HyperNodes, hypernode.dev/tier-<tier> = the HyperNode's name
// (pkg/hypernode: TierLabelKey, TierLabelValue), so that kube-scheduler's own topology
// placement and Kueue's topology-aware scheduling, which group nodes by one label key, use
// the tree that was discovered or written as HyperNodes.
//
// The publisher feeds its own incremental hypernode.Tree from the node and HyperNode
// informers. A tree change queues only the nodes whose labels it can change (below a
// HyperNode that appeared, went, moved, changed tier or validity; or that joined or left a
// leaf); a node event queues that node. Queued nodes wait --status-delay, so that a burst of
// changes (a rename is a delete and a create) is one look at each node. A worker compares
// the node's labels with the tree's and writes only a node that differs, with one JSON merge
// patch of its labels and its ownership record, through a token bucket of writesPerSecond.
//
// The labels the controller wrote are listed in the node's annotation
// hypernode.dev/tier-labels. A tier label that is not listed was written by someone else:
// it is never changed or removed, only reported (a log line and a Warning Event once per
// node and key, and the gauge hypernode_node_labels_not_owned). Turned off, the publisher
// removes exactly the labels it recorded, and the record.
package nodelabels

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	topologyinformers "github.com/hypernode-dev/hypernode-scheduler/pkg/client/informers/externalversions/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/metrics"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/informerutil"
)

// ReasonTierLabelNotOwned is the Event reason on a node that carries a tier label the
// controller did not write.
const ReasonTierLabelNotOwned = "TierLabelNotOwned"

// FieldManager names the controller in the nodes' managedFields.
const FieldManager = "hypernode-controller"

// Workers write nodes in parallel, so that the API's latency does not bound the rate below
// writesPerSecond.
const Workers = 4

// maxBurst bounds the writes the token bucket lets through at once.
const maxBurst = 10

// mode is what the publisher does with a node.
type mode int

const (
	// unconfigured: no configuration yet; nothing is written, nothing removed.
	unconfigured mode = iota
	// off: the labels the controller recorded are removed.
	off
	// on: the labels follow the tree.
	on
)

// EventRecorder records Events (eventlog.Recorder).
type EventRecorder interface {
	Eventf(ref *v1.ObjectReference, eventType, reason, action, format string, args ...any)
}

// Publisher keeps the tier labels of every node.
type Publisher struct {
	client kubernetes.Interface
	nodes  corelisters.NodeLister
	events EventRecorder
	queue  workqueue.TypedRateLimitingInterface[string]
	// limiter is the token bucket of writesPerSecond, replaced when the setting changes.
	limiter atomic.Pointer[flowcontrol.RateLimiter]
	delay   time.Duration
	synced  []cache.InformerSynced

	mu   sync.Mutex
	tree *hypernode.Tree
	mode mode
	// notOwned are the tier labels reported as written by someone else, by node, so that
	// each is reported once; notOwnedCount is their total (the gauge).
	notOwned      map[string]sets.Set[string]
	notOwnedCount int

	writes atomic.Int64
}

// New returns a publisher fed by the informers; client writes the nodes (give it a client of
// its own, so that label writes never wait behind HyperNode writes in one client-side rate
// limit). delay collects changes before nodes are looked at; 0 looks at once.
func New(client kubernetes.Interface, nodes coreinformers.NodeInformer, hyperNodes topologyinformers.HyperNodeInformer, events EventRecorder, delay time.Duration) (*Publisher, error) {
	p := &Publisher{
		client: client,
		nodes:  nodes.Lister(),
		events: events,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "hypernode-node-labels"}),
		delay:    delay,
		tree:     hypernode.NewTree(),
		notOwned: map[string]sets.Set[string]{},
	}
	p.setRate(config.DefaultWritesPerSecond)
	nodeReg, err := nodes.Informer().AddEventHandler(informerutil.Handlers(p.OnNode, func(n *v1.Node) { p.OnNode(n, nil) }))
	if err != nil {
		return nil, err
	}
	hnReg, err := hyperNodes.Informer().AddEventHandler(informerutil.Handlers(p.OnHyperNode, func(hn *topologyv1alpha1.HyperNode) { p.OnHyperNode(hn, nil) }))
	if err != nil {
		return nil, err
	}
	p.synced = []cache.InformerSynced{nodeReg.HasSynced, hnReg.HasSynced}
	return p, nil
}

// setRate starts a token bucket of writesPerSecond with a burst of at most maxBurst.
func (p *Publisher) setRate(writesPerSecond float64) {
	limiter := flowcontrol.NewTokenBucketRateLimiter(float32(writesPerSecond), max(1, min(maxBurst, int(writesPerSecond))))
	p.limiter.Store(&limiter)
}

// Configure applies the nodeLabels section (discovery.NodeLabelsConfigurer). Turning
// publishing on or off looks at every node again.
func (p *Publisher) Configure(ctx context.Context, cfg config.NodeLabels) {
	logger := klog.FromContext(ctx)
	p.setRate(cfg.Rate())
	next := off
	if cfg.Enabled {
		next = on
	}
	p.mu.Lock()
	prev := p.mode
	p.mode = next
	if next == off {
		// Not publishing, nothing is in the way: the reports are void.
		p.notOwned = map[string]sets.Set[string]{}
		p.notOwnedCount = 0
		metrics.NodeLabelsNotOwned.Set(0)
	}
	p.mu.Unlock()
	if prev == next {
		logger.Info("Node labels: writes per second changed", "writesPerSecond", cfg.Rate())
		return
	}
	if next == on {
		logger.Info("Publishing the HyperNode tree as node labels", "writesPerSecond", cfg.Rate())
	} else {
		logger.Info("Node labels are off: removing the tier labels this controller wrote", "writesPerSecond", cfg.Rate())
	}
	p.enqueueAll(ctx)
}

// OnNode feeds a node event (old nil: added; new nil: deleted) to the tree, and queues the
// node: its labels or its ownership record may have changed.
func (p *Publisher) OnNode(old, new *v1.Node) {
	if new == nil {
		p.mutate(func(t *hypernode.Tree) { t.DeleteNode(old.Name) })
		p.forgetNotOwned(old.Name)
		return
	}
	if old != nil && labels.Equals(old.Labels, new.Labels) &&
		old.Annotations[hypernode.TierLabelsAnnotation] == new.Annotations[hypernode.TierLabelsAnnotation] {
		return
	}
	p.mutate(func(t *hypernode.Tree) { t.SetNode(new.Name, labels.Set(new.Labels)) })
	p.mu.Lock()
	m := p.mode
	p.mu.Unlock()
	if m == on || m == off && new.Annotations[hypernode.TierLabelsAnnotation] != "" {
		p.enqueue(new.Name)
	}
}

// OnHyperNode feeds a HyperNode event (old nil: added; new nil: deleted) to the tree.
func (p *Publisher) OnHyperNode(old, new *topologyv1alpha1.HyperNode) {
	if new == nil {
		p.mutate(func(t *hypernode.Tree) { t.DeleteHyperNode(old.Name) })
		return
	}
	p.mutate(func(t *hypernode.Tree) { t.SetHyperNode(new) })
}

// mutate applies a change to the tree and, when publishing, queues the nodes whose labels
// it can change.
func (p *Publisher) mutate(change func(*hypernode.Tree)) {
	p.mu.Lock()
	before := p.tree.Snapshot()
	change(p.tree)
	after := p.tree.Snapshot()
	var affected sets.Set[string]
	if after != before && p.mode == on {
		affected = AffectedNodes(before, after)
	}
	p.mu.Unlock()
	for name := range affected {
		p.enqueue(name)
	}
}

// AffectedNodes returns the nodes whose tier labels can differ between two snapshots of one
// tree: every node below a HyperNode that appeared, went, or changed tier, parent or
// validity (in either snapshot), and the nodes that joined or left a usable leaf. A change
// of counts or problems that excludes nothing affects no node, so a node joining a leaf of
// a 10,000-node tree queues that node alone.
func AffectedNodes(old, new *hypernode.Snapshot) sets.Set[string] {
	out := sets.New[string]()
	new.ChangedSince(old, func(name string) {
		was, hadOld := old.HyperNode(name)
		is, hasNew := new.HyperNode(name)
		if hadOld && hasNew && was.Tier == is.Tier && was.Parent == is.Parent && was.Excluded == is.Excluded && was.Leaf == is.Leaf {
			if is.Leaf && !is.Excluded {
				insertSymmetricDifference(out, was.Nodes, is.Nodes)
			}
			return
		}
		if hadOld {
			out.Insert(old.Nodes(name)...)
		}
		if hasNew {
			out.Insert(new.Nodes(name)...)
		}
	})
	return out
}

// insertSymmetricDifference inserts the names in exactly one of two sorted lists.
func insertSymmetricDifference(out sets.Set[string], a, b []string) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i] < b[j]:
			out.Insert(a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out.Insert(b[j])
			j++
		default:
			i++
			j++
		}
	}
}

func (p *Publisher) enqueue(name string) {
	if p.delay > 0 {
		p.queue.AddAfter(name, p.delay)
		return
	}
	p.queue.Add(name)
}

// enqueueAll queues every node the lister holds.
func (p *Publisher) enqueueAll(ctx context.Context) {
	nodes, err := p.nodes.List(labels.Everything())
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing nodes")
		return
	}
	for _, n := range nodes {
		p.enqueue(n.Name)
	}
}

// Run writes node labels with workers until ctx ends. It waits for the informers' handlers
// first (a tree without all its HyperNodes would remove labels it is about to write again),
// then looks at every node once.
func (p *Publisher) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer p.queue.ShutDown()
	logger := klog.FromContext(ctx)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, p.synced...) {
		return
	}
	p.enqueueAll(ctx)
	logger.Info("Node label publisher started", "workers", workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, p.worker, time.Second) })
	}
	<-ctx.Done()
	p.queue.ShutDown()
	wg.Wait()
}

func (p *Publisher) worker(ctx context.Context) {
	for p.processNext(ctx) {
	}
}

func (p *Publisher) processNext(ctx context.Context) bool {
	name, quit := p.queue.Get()
	if quit {
		return false
	}
	defer p.queue.Done(name)
	if err := p.sync(ctx, name); err != nil {
		if ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Writing node tier labels", "node", name)
		}
		p.queue.AddRateLimited(name)
		return true
	}
	p.queue.Forget(name)
	return true
}

// sync writes one node's tier labels if they differ from the tree's.
func (p *Publisher) sync(ctx context.Context, name string) error {
	node, err := p.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	p.mu.Lock()
	m, snap := p.mode, p.tree.Snapshot()
	p.mu.Unlock()
	var want map[string]string
	switch m {
	case unconfigured:
		return nil
	case on:
		want = snap.TierLabels(name)
	}
	change := Plan(node.Labels, node.Annotations[hypernode.TierLabelsAnnotation], want)
	if m == on {
		p.reportNotOwned(ctx, node, change.NotOwned)
	}
	if change.Empty() {
		return nil
	}
	if err := (*p.limiter.Load()).Wait(ctx); err != nil {
		return err
	}
	patch, err := change.MergePatch(node.ResourceVersion)
	if err != nil {
		return err
	}
	_, err = p.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	p.writes.Add(1)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		// A conflict: the node changed since the informer's copy; its event queues it again
		// and the retry plans from the new version.
		metrics.NodeLabelWrites.WithLabelValues(metrics.ResultError).Inc()
		return err
	}
	metrics.NodeLabelWrites.WithLabelValues(metrics.ResultSuccess).Inc()
	klog.FromContext(ctx).V(4).Info("Node tier labels written", "node", name, "set", change.Set, "removed", change.Remove)
	return nil
}

// reportNotOwned reports the tier labels of a node that the controller did not write, each
// once while it stays.
func (p *Publisher) reportNotOwned(ctx context.Context, node *v1.Node, keys []string) {
	p.mu.Lock()
	if p.mode != on {
		p.mu.Unlock()
		return
	}
	prev := p.notOwned[node.Name]
	var fresh []string
	for _, k := range keys {
		if !prev.Has(k) {
			fresh = append(fresh, k)
		}
	}
	p.notOwnedCount += len(keys) - prev.Len()
	if len(keys) == 0 {
		delete(p.notOwned, node.Name)
	} else {
		p.notOwned[node.Name] = sets.New(keys...)
	}
	metrics.NodeLabelsNotOwned.Set(float64(p.notOwnedCount))
	p.mu.Unlock()
	if len(fresh) == 0 {
		return
	}
	pairs := make([]string, len(fresh))
	removals := make([]string, len(fresh))
	for i, k := range fresh {
		pairs[i] = k + "=" + node.Labels[k]
		removals[i] = k + "-"
	}
	msg := fmt.Sprintf("node %s has the label(s) %s, which hypernode-controller did not write (they are not in its annotation %s): it leaves them as they are and does not publish those tiers on this node; to let it, remove them (kubectl label node %s %s)",
		node.Name, strings.Join(pairs, ", "), hypernode.TierLabelsAnnotation, node.Name, strings.Join(removals, " "))
	klog.FromContext(ctx).Info("Tier label not written by this controller", "node", node.Name, "labels", pairs)
	if p.events != nil {
		p.events.Eventf(&v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID},
			v1.EventTypeWarning, ReasonTierLabelNotOwned, "PublishTierLabels", "%s", msg)
	}
}

func (p *Publisher) forgetNotOwned(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if prev, ok := p.notOwned[name]; ok {
		p.notOwnedCount -= prev.Len()
		delete(p.notOwned, name)
		metrics.NodeLabelsNotOwned.Set(float64(p.notOwnedCount))
	}
}

// Writes counts the node writes (patches sent) so far.
func (p *Publisher) Writes() int64 { return p.writes.Load() }

// Snapshot returns the publisher's view of the tree.
func (p *Publisher) Snapshot() *hypernode.Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tree.Snapshot()
}
