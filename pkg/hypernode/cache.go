package hypernode

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	topologyclient "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned"
	topologyinformers "github.com/hypernode-dev/hypernode-scheduler/pkg/client/informers/externalversions"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/informerutil"
)

// Event reasons and action of the Events the cache records on HyperNodes.
const (
	// EventReasonTopologyValid is recorded when every problem of a HyperNode is resolved.
	EventReasonTopologyValid = "TopologyValid"
	eventAction              = "ValidateTopology"
)

// EventResource is the kube-scheduler event resource of HyperNodes (resource.version.group).
const EventResource fwk.EventResource = "hypernodes.v1alpha1.topology.volcano.sh"

// Cache keeps the HyperNode tree of one process up to date from node and HyperNode
// informers. Snapshot is lock-free; event handlers serialise on a mutex that readers never
// take.
type Cache struct {
	mu       sync.Mutex
	tree     *Tree
	current  atomic.Pointer[Snapshot]
	recorder events.EventRecorder
	logger   klog.Logger

	synced []cache.InformerSynced
	// quiet suppresses Events while the informers deliver their initial lists: objects
	// arrive in any order, and a parent listed before its children would otherwise be
	// reported as missing members on every start.
	quiet bool
	// listeners are called after each change of the tree (OnChange). deliverMu orders the
	// calls: the node and HyperNode informers change the tree concurrently, and a listener
	// must never get a snapshot older than one it already got (delivered).
	listeners []func(*Snapshot)
	deliverMu sync.Mutex
	delivered uint64
}

// NewCache returns a cache with an empty tree. Feed it with Run or with the Set/Delete
// methods. recorder may be nil (no Events).
func NewCache(logger klog.Logger, recorder events.EventRecorder) *Cache {
	c := &Cache{tree: NewTree(), recorder: recorder, logger: logger}
	c.current.Store(c.tree.Snapshot())
	return c
}

// Snapshot returns the current immutable view of the tree. O(1), lock-free.
func (c *Cache) Snapshot() *Snapshot { return c.current.Load() }

// HasSynced reports whether the informers feeding the cache have delivered their initial lists.
func (c *Cache) HasSynced() bool {
	for _, s := range c.synced {
		if !s() {
			return false
		}
	}
	return true
}

// WaitForSync waits until HasSynced or the context ends.
func (c *Cache) WaitForSync(ctx context.Context) error {
	if c.HasSynced() {
		return nil
	}
	return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		return c.HasSynced(), nil
	})
}

// SetNode adds or updates a node.
func (c *Cache) SetNode(node *v1.Node) {
	c.apply(func(t *Tree) []ProblemChange { return t.SetNode(node.Name, labels.Set(node.Labels)) })
}

// DeleteNode removes a node.
func (c *Cache) DeleteNode(name string) {
	c.apply(func(t *Tree) []ProblemChange { return t.DeleteNode(name) })
}

// SetHyperNode adds or updates a HyperNode.
func (c *Cache) SetHyperNode(hn *topologyv1alpha1.HyperNode) {
	c.apply(func(t *Tree) []ProblemChange { return t.SetHyperNode(hn) })
}

// DeleteHyperNode removes a HyperNode.
func (c *Cache) DeleteHyperNode(name string) {
	c.apply(func(t *Tree) []ProblemChange { return t.DeleteHyperNode(name) })
}

// OnChange registers f to be called, outside the cache's lock, after each change of the tree
// with the snapshot that has it. Earlier changes are not replayed.
func (c *Cache) OnChange(f func(*Snapshot)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listeners = append(c.listeners, f)
}

func (c *Cache) apply(update func(*Tree) []ProblemChange) {
	c.mu.Lock()
	before := c.current.Load()
	changes := update(c.tree)
	snap := c.tree.Snapshot()
	c.current.Store(snap)
	// Reported under the lock so that Events of one HyperNode are recorded in the order
	// of the changes (recording only queues the Event).
	for _, change := range changes {
		c.report(change)
	}
	listeners := c.listeners
	c.mu.Unlock()
	if snap.Generation() != before.Generation() {
		c.deliver(snap, listeners)
	}
}

// deliver calls the listeners with snap unless they already got a newer snapshot.
// Listeners must not change the cache.
func (c *Cache) deliver(snap *Snapshot, listeners []func(*Snapshot)) {
	c.deliverMu.Lock()
	defer c.deliverMu.Unlock()
	if snap.Generation() <= c.delivered {
		return
	}
	c.delivered = snap.Generation()
	for _, f := range listeners {
		f(snap)
	}
}

// endQuiet reports the problems present once the initial lists are in, and every change
// from then on.
func (c *Cache) endQuiet() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.quiet = false
	for _, change := range c.tree.CurrentProblems() {
		c.report(change)
	}
}

// report logs a change of a HyperNode's problems and records it as an Event on the HyperNode.
// The Event's reason is that of the problem that excludes the HyperNode, if one does.
func (c *Cache) report(change ProblemChange) {
	hn := change.HyperNode
	if c.quiet {
		c.logger.V(4).Info("HyperNode problems changed during the initial sync", "hyperNode", hn.Name, "problems", len(change.Problems))
		return
	}
	if hn.UID == "" {
		// Deleted: nobody can read Events of an object that is gone.
		c.logger.V(4).Info("Problems of a deleted HyperNode dropped", "hyperNode", hn.Name)
		return
	}
	ref := &v1.ObjectReference{
		APIVersion: topologyv1alpha1.SchemeGroupVersion.String(),
		Kind:       "HyperNode",
		Name:       hn.Name,
		UID:        hn.UID,
	}
	if len(change.Problems) == 0 {
		c.logger.Info("HyperNode topology problems resolved", "hyperNode", hn.Name)
		if c.recorder != nil {
			c.recorder.Eventf(ref, nil, v1.EventTypeNormal, EventReasonTopologyValid, eventAction,
				"HyperNode %s: its topology problems are resolved; placement uses it again", hn.Name)
		}
		return
	}
	msg := describeProblems(hn.Name, change.Problems)
	c.logger.Info("HyperNode topology problem", "hyperNode", hn.Name, "problems", msg)
	if c.recorder != nil {
		eventType, reason := v1.EventTypeNormal, change.Problems[0].Reason
		for _, p := range change.Problems {
			if p.Excludes {
				eventType, reason = v1.EventTypeWarning, p.Reason
				break
			}
		}
		c.recorder.Eventf(ref, nil, eventType, reason, eventAction, "%s", truncate(msg, 1000))
	}
}

// truncate keeps Event notes under the API's 1 kB limit.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return s[:max-3] + "..."
}

// Run feeds the cache from the node informer of factory (not started here: the owner of the
// factory starts it) and from a HyperNode informer of its own on client, which it starts
// with ctx.
func (c *Cache) Run(ctx context.Context, factory informers.SharedInformerFactory, client topologyclient.Interface) error {
	nodeInformer := factory.Core().V1().Nodes().Informer()
	nodeReg, err := nodeInformer.AddEventHandler(informerutil.Handlers(
		func(_, n *v1.Node) { c.SetNode(n) }, func(n *v1.Node) { c.DeleteNode(n.Name) }))
	if err != nil {
		return fmt.Errorf("watching nodes for the HyperNode cache: %w", err)
	}

	hnFactory := topologyinformers.NewSharedInformerFactory(client, 0)
	hnInformer := hnFactory.Topology().V1alpha1().HyperNodes().Informer()
	hnReg, err := hnInformer.AddEventHandler(informerutil.Handlers(
		func(_, hn *topologyv1alpha1.HyperNode) { c.SetHyperNode(hn) },
		func(hn *topologyv1alpha1.HyperNode) { c.DeleteHyperNode(hn.Name) }))
	if err != nil {
		return fmt.Errorf("watching HyperNodes: %w", err)
	}
	c.mu.Lock()
	c.synced = []cache.InformerSynced{nodeReg.HasSynced, hnReg.HasSynced}
	c.quiet = true
	c.mu.Unlock()
	hnFactory.Start(ctx.Done())
	go func() {
		if err := c.WaitForSync(ctx); err == nil {
			c.endQuiet()
		}
	}()
	return nil
}
