// Package status keeps the status of every HyperNode, hand-made or discovered, true:
// status.nodeCount is the number of existing nodes below it, and the condition Valid says
// whether its structure is sound, with the reason and message of the scheduler's own tree
// validation (pkg/hypernode: one validator for the scheduler, the controller and kubectl
// hypernode).
//
// The controller feeds the same incremental tree as the scheduler from node and HyperNode
// informers. Every change marks the HyperNodes it recomputed (Snapshot.ChangedSince) dirty;
// the first mark arms a timer, and when it fires every dirty HyperNode is queued once. A
// worker writes a status only when it differs from the object's (or from the status it wrote
// itself, while the informer has not delivered it yet). So 10,000 nodes joining at once cost
// one write per HyperNode whose count changed, not one per node.
package status

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	topologyclient "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned"
	topologyinformers "github.com/hypernode-dev/hypernode-scheduler/pkg/client/informers/externalversions/topology/v1alpha1"
	topologylisters "github.com/hypernode-dev/hypernode-scheduler/pkg/client/listers/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/metrics"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/informerutil"
)

// The Valid condition.
const (
	ConditionValid = "Valid"
	// ReasonValid: no problem.
	ReasonValid = "Valid"
	// ReasonAncestorInvalid: no problem of its own, but an invalid ancestor excludes it.
	ReasonAncestorInvalid = "AncestorInvalid"
)

// maxMessage bounds the condition's message.
const maxMessage = 4096

// DefaultDelay is how long a change waits before its HyperNodes are written, so that a
// burst of changes (nodes joining, a discovery creating a tree) is one write per HyperNode.
const DefaultDelay = time.Second

// Controller writes HyperNode status.
type Controller struct {
	client topologyclient.Interface
	lister topologylisters.HyperNodeLister
	synced []cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
	delay  time.Duration

	mu   sync.Mutex
	tree *hypernode.Tree
	// generations are the metadata.generation of each HyperNode the tree holds.
	generations map[string]int64
	// dirty are the HyperNodes changed since the timer was armed.
	dirty sets.Set[string]
	armed bool
	// written are the statuses this controller wrote, by HyperNode, with the resourceVersion
	// they were written over: until the informer delivers the write, the lister still holds
	// that version, and the written status is the current one.
	written map[string]writeRecord

	writes atomic.Int64
}

type writeRecord struct {
	// over is the version the status was written over, rv the version the last write made,
	// and chain the versions earlier writes made over over before it: the informer may
	// deliver those before rv.
	over, rv string
	chain    []string
	status   topologyv1alpha1.HyperNodeStatus
}

// standsFor reports whether the record is newer than version v of the lister: v is the
// version it was written over or one of its own intermediate writes.
func (w writeRecord) standsFor(v string) bool {
	return v == w.over || slices.Contains(w.chain, v)
}

// New returns a controller fed by the informers; delay 0 is DefaultDelay.
func New(client topologyclient.Interface, nodes coreinformers.NodeInformer, hyperNodes topologyinformers.HyperNodeInformer, delay time.Duration) (*Controller, error) {
	if delay == 0 {
		delay = DefaultDelay
	}
	c := &Controller{
		client: client,
		lister: hyperNodes.Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "hypernode-status"}),
		delay:       delay,
		tree:        hypernode.NewTree(),
		generations: map[string]int64{},
		dirty:       sets.New[string](),
		written:     map[string]writeRecord{},
	}
	nodeReg, err := nodes.Informer().AddEventHandler(informerutil.Handlers(c.OnNode, func(n *v1.Node) { c.OnNode(n, nil) }))
	if err != nil {
		return nil, err
	}
	hnReg, err := hyperNodes.Informer().AddEventHandler(informerutil.Handlers(c.OnHyperNode, func(hn *topologyv1alpha1.HyperNode) { c.OnHyperNode(hn, nil) }))
	if err != nil {
		return nil, err
	}
	c.synced = []cache.InformerSynced{nodeReg.HasSynced, hnReg.HasSynced}
	return c, nil
}

// OnNode feeds a node event (old nil: added; new nil: deleted) to the tree.
func (c *Controller) OnNode(old, new *v1.Node) {
	switch {
	case new == nil:
		c.mutate(func(t *hypernode.Tree) { t.DeleteNode(old.Name) })
	case old != nil && labels.Equals(old.Labels, new.Labels):
		// Status heartbeats and other changes the tree does not read.
	default:
		c.mutate(func(t *hypernode.Tree) { t.SetNode(new.Name, labels.Set(new.Labels)) })
	}
}

// OnHyperNode feeds a HyperNode event (old nil: added; new nil: deleted) to the tree, and
// queues the HyperNode itself: its status may have been written by someone else.
func (c *Controller) OnHyperNode(old, new *topologyv1alpha1.HyperNode) {
	if new == nil {
		c.mutate(func(t *hypernode.Tree) {
			t.DeleteHyperNode(old.Name)
			delete(c.generations, old.Name)
			delete(c.written, old.Name)
		})
		return
	}
	c.mutate(func(t *hypernode.Tree) {
		if rec, ok := c.written[new.Name]; ok && !rec.standsFor(new.ResourceVersion) {
			delete(c.written, new.Name) // the informer caught up with the writes (or passed them)
		}
		t.SetHyperNode(new)
		c.generations[new.Name] = new.Generation
		c.markDirty(new.Name)
	})
}

// mutate applies a change to the tree and marks every HyperNode it recomputed dirty.
func (c *Controller) mutate(change func(*hypernode.Tree)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	before := c.tree.Snapshot()
	change(c.tree)
	if after := c.tree.Snapshot(); after != before {
		after.ChangedSince(before, c.markDirty)
	}
}

// markDirty notes a changed HyperNode; the first one arms the flush timer. c.mu is held.
func (c *Controller) markDirty(name string) {
	c.dirty.Insert(name)
	if !c.armed {
		c.armed = true
		time.AfterFunc(c.delay, c.Flush)
	}
}

// Flush queues every dirty HyperNode now (the timer calls it; tests call it directly).
func (c *Controller) Flush() {
	c.mu.Lock()
	names := c.dirty
	c.dirty = sets.New[string]()
	c.armed = false
	c.mu.Unlock()
	for name := range names {
		c.queue.Add(name)
	}
}

// Run writes status with workers until ctx ends. It waits for the informers first, then
// checks every HyperNode once.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return
	}
	hns, err := c.lister.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Listing HyperNodes")
	}
	for _, hn := range hns {
		c.queue.Add(hn.Name)
	}
	logger.Info("HyperNode status controller started", "hyperNodes", len(hns), "workers", workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.worker, time.Second) })
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
}

func (c *Controller) worker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	name, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(name)
	if err := c.sync(ctx, name); err != nil {
		klog.FromContext(ctx).Error(err, "Writing HyperNode status", "hyperNode", name)
		c.queue.AddRateLimited(name)
		return true
	}
	c.queue.Forget(name)
	return true
}

// sync writes the status of one HyperNode if it differs from what the tree says.
func (c *Controller) sync(ctx context.Context, name string) error {
	hn, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	c.mu.Lock()
	generation, known := c.generations[name]
	snap := c.tree.Snapshot()
	current, rv, over := hn.Status, hn.ResourceVersion, hn.ResourceVersion
	var chain []string
	if rec, ok := c.written[name]; ok && rec.standsFor(hn.ResourceVersion) {
		current, rv, over = rec.status, rec.rv, rec.over
		chain = append(slices.Clone(rec.chain), rec.rv)
	}
	c.mu.Unlock()
	info, ok := snap.HyperNode(name)
	if !known || !ok || generation != hn.Generation {
		// The tree has not seen this version yet; its event marks the HyperNode again.
		return nil
	}
	nodeCount, cond := Desired(info, generation)
	if UpToDate(current, nodeCount, cond) {
		return nil
	}
	update := hn.DeepCopy()
	update.ResourceVersion = rv
	update.Status = *current.DeepCopy()
	update.Status.NodeCount = nodeCount
	meta.SetStatusCondition(&update.Status.Conditions, cond)
	written, err := c.client.TopologyV1alpha1().HyperNodes().UpdateStatus(ctx, update, metav1.UpdateOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted meanwhile: nothing to write, nothing failed.
			return nil
		}
		metrics.StatusWrites.WithLabelValues(metrics.ResultError).Inc()
		return err
	}
	metrics.StatusWrites.WithLabelValues(metrics.ResultSuccess).Inc()
	c.mu.Lock()
	c.written[name] = writeRecord{over: over, rv: written.ResourceVersion, chain: chain, status: written.Status}
	c.mu.Unlock()
	c.writes.Add(1)
	klog.FromContext(ctx).V(2).Info("HyperNode status written", "hyperNode", name, "nodeCount", nodeCount, "valid", cond.Status, "reason", cond.Reason)
	return nil
}

// Writes counts the status writes so far.
func (c *Controller) Writes() int64 { return c.writes.Load() }

// Desired computes the status of a HyperNode from the tree: its node count and its Valid
// condition (without a transition time).
func Desired(info *hypernode.HyperNodeInfo, generation int64) (int64, metav1.Condition) {
	cond := metav1.Condition{Type: ConditionValid, ObservedGeneration: generation}
	below := ""
	if info.Excluded && info.ExcludedBy != info.Name && info.ExcludedBy != "" {
		below = info.ExcludedBy
	}
	switch {
	case len(info.Problems) == 0 && below == "":
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonValid
		cond.Message = fmt.Sprintf("HyperNode %s: its members and its place in the tree are valid; topology placement uses it", info.Name)
	case len(info.Problems) == 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonAncestorInvalid
		cond.Message = fmt.Sprintf("HyperNode %s: its own members and place are valid, but it lies below the invalid HyperNode %s, which excludes it from topology placement", info.Name, below)
	default:
		cond.Status, cond.Reason = metav1.ConditionFalse, info.Problems[0].Reason
		for _, p := range info.Problems {
			if p.Excludes {
				cond.Reason = p.Reason
				break
			}
		}
		cond.Message = hypernode.DescribeProblems(info.Name, info.Problems)
		if below != "" {
			cond.Message += fmt.Sprintf("; it also lies below the invalid HyperNode %s", below)
		}
	}
	if len(cond.Message) > maxMessage {
		cond.Message = cond.Message[:maxMessage-3] + "..."
	}
	return int64(info.TotalNodeCount), cond
}

// UpToDate reports whether a status already says what Desired computed.
func UpToDate(status topologyv1alpha1.HyperNodeStatus, nodeCount int64, want metav1.Condition) bool {
	if status.NodeCount != nodeCount {
		return false
	}
	got := meta.FindStatusCondition(status.Conditions, want.Type)
	return got != nil && got.Status == want.Status && got.Reason == want.Reason &&
		got.Message == want.Message && got.ObservedGeneration == want.ObservedGeneration
}
