package networktopology

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/informerutil"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// A gang's last failed plan (gangstate.PlanFailure) answers its members instead of a new
// plan until something that can change the answer happens: the tree or the PodGroup changed
// (PreFilter compares their generations), or a node was added or changed, or capacity was
// freed in a HyperNode that could host the gang, or promised slots were released (these mark
// it stale), or it is failureMaxAge old. Even then a new plan waits out a back-off that
// doubles with each failure in a row, so a gang that keeps failing under churn costs one plan
// per back-off period.

const (
	failureBackoffBase = time.Second
	failureBackoffMax  = 30 * time.Second
	// failureMaxAge bounds how long a failure answers without a new plan. Some changes that
	// can make room reach no hint of this plugin (a DRA ResourceSlice, a volume, a running
	// pod resized down); kube-scheduler retries every unschedulable pod after 5 minutes, and
	// the gang's retried member then plans again.
	failureMaxAge = 5 * time.Minute
)

// backoff is the wait before the next plan after failures failed plans in a row.
func backoff(failures int) time.Duration {
	d := failureBackoffBase
	for i := 1; i < failures && d < failureBackoffMax; i++ {
		d *= 2
	}
	return min(d, failureBackoffMax)
}

// treeChanged retries the gangs whose last plan failed on an older tree, whose constraint an
// older tree could not serve, and whose plan on an older tree places nobody. kube-scheduler's
// queue and the tree cache watch HyperNodes and nodes through different handlers: the
// queue's hint can run the retried member before the cache has the change, and the member
// then reuses the old answer; nothing else would wake it.
func (p *NetworkTopologyAware) treeChanged(logger klog.Logger, tree *hypernode.Snapshot) {
	var keys []podgroup.Key
	p.gangs.Lock()
	p.gangs.EachPlanFailureLocked(func(key podgroup.Key, f *gangstate.PlanFailure) {
		if f.Tree != tree.Generation() && !f.TreeWoken {
			f.TreeWoken = true
			keys = append(keys, key)
		}
	})
	p.gangs.EachRefusedLocked(func(key podgroup.Key, generation uint64) {
		if generation != tree.Generation() {
			p.gangs.ForgetRefusalLocked(key)
			keys = append(keys, key)
		}
	})
	for key := range p.gangs.DeferringLocked() {
		// Kept among the deferring gangs: a release of promised slots must still wake it if
		// this retry does not plan.
		if plan := p.gangs.PlanLocked(key); plan != nil && plan.WaitsForRoom && plan.Generation != tree.Generation() && !plan.TreeWoken {
			plan.TreeWoken = true
			keys = append(keys, key)
		}
	}
	p.gangs.Unlock()
	if n := p.activateRetried(logger, keys); n > 0 {
		logger.V(4).Info("HyperNode tree changed: gangs answered on the old tree retried", "gangs", n)
	}
}

// refuseConstraint refuses the member of a gang whose constraint the tree cannot serve, and
// remembers the tree it was judged on, so that a change of the tree retries the gang
// (treeChanged); when the tree changed already, after this cycle's snapshot, the member comes
// back at once (it is in its cycle: kube-scheduler requeues it when the cycle ends).
func (p *NetworkTopologyAware) refuseConstraint(logger klog.Logger, v *gangstate.View, msg string) *fwk.Status {
	p.events.Record(v.Info.PodGroup, v1.EventTypeWarning, EventInvalidConstraint, msg)
	if v.Info.TopologyErr == nil {
		// Not an annotation that does not parse, which only a change of the PodGroup fixes.
		p.gangs.Settle(logger, p.handle, v, gangstate.Settlement{Refused: true, RefusedOn: v.Tree.Generation(), RetryNow: p.treeMovedFrom(v.Tree)})
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

// activateRetried activates the member each gang is retried through; it reports how many.
func (p *NetworkTopologyAware) activateRetried(logger klog.Logger, keys []podgroup.Key) int {
	pods := make([]*v1.Pod, 0, len(keys))
	for _, key := range keys {
		pods = append(pods, p.gangs.RetryMember(key))
	}
	return gangstate.Activate(logger, p.handle, pods...)
}

// releaseHeld ends the gang's retry hold and activates its pending members: no cluster event
// requeues a held member. It reports whether there was a hold.
func (p *NetworkTopologyAware) releaseHeld(logger klog.Logger, key podgroup.Key) bool {
	if p.gangs.ReleaseRetry(key) {
		p.gangs.ActivatePending(logger, p.handle, key)
		return true
	}
	return false
}

// freedMark is the last departure (a pod from a node) that marked the failures stale, with
// the count of failures recorded then. (A reservation kube-scheduler rejects is reported as
// a departure too: the same pod may leave another node later.)
type freedMark struct {
	pod      types.UID
	node     string
	tree     uint64
	recorded uint64
}

// freedOn marks stale the failures of gangs that capacity freed on node by the departure of
// pod can help, and says whether key's gang is one of them (or has no failure: then
// anything may help it). The pass over the failures runs once per departure, not once per
// waiting gang kube-scheduler asks about it: O(depth) for the others.
func (p *NetworkTopologyAware) freedOn(node string, key podgroup.Key, pod types.UID) bool {
	epoch := p.roomEpoch.Add(1)
	tree := p.cache.Snapshot()
	chain := chainIn(tree, node)
	p.gangs.Lock()
	defer p.gangs.Unlock()
	p.roomFreedLocked(chain, epoch)
	// The tree too: a call that read the chain on an older tree must not stand for this one.
	if mark := (freedMark{pod: pod, node: node, tree: tree.Generation(), recorded: p.gangs.FailuresRecordedLocked()}); p.lastFreed != mark {
		p.lastFreed = mark
		p.gangs.EachPlanFailureLocked(func(_ podgroup.Key, f *gangstate.PlanFailure) {
			if f.Possible.HasAny(chain...) {
				f.Stale = true
			}
		})
	}
	f := p.gangs.PlanFailureLocked(key)
	return f == nil || f.Possible.HasAny(chain...)
}

// leftOutFreedOn makes stale the plans that place nobody whose room area holds node.
func (p *NetworkTopologyAware) leftOutFreedOn(node string) {
	epoch := p.roomEpoch.Add(1)
	chain := p.chainOf(node)
	p.gangs.Lock()
	defer p.gangs.Unlock()
	p.roomFreedLocked(chain, epoch)
}

// chainOf returns the virtual root and, for a node in a leaf, the leaf and its ancestors.
func (p *NetworkTopologyAware) chainOf(node string) []string {
	return chainIn(p.cache.Snapshot(), node)
}

// chainIn is chainOf on a given tree.
func chainIn(tree *hypernode.Snapshot, node string) []string {
	chain := []string{hypernode.VirtualRootName}
	if leaf, ok := tree.LeafOf(node); ok {
		chain = append(append(chain, leaf), tree.Ancestors(leaf)...)
	}
	return chain
}

// markStale marks every failure stale: a node was added or changed in a way that can help.
func (p *NetworkTopologyAware) markAllStale() {
	epoch := p.roomEpoch.Add(1)
	p.gangs.Lock()
	defer p.gangs.Unlock()
	p.roomFreedLocked(nil, epoch)
	recorded := p.gangs.FailuresRecordedLocked()
	if p.allStaleAt == recorded {
		return // every failure is stale already (see FailuresRecordedLocked)
	}
	p.allStaleAt = recorded
	p.gangs.EachPlanFailureLocked(func(_ podgroup.Key, f *gangstate.PlanFailure) { f.Stale = true })
}

// possibleDomains returns the HyperNodes up to maxTier (and the virtual root when the gang
// may span the whole cluster) whose nodes could hold demand copies of pod if they were
// empty, judged by allocatable resources and pod slots alone. demand is the fewest members
// the job can run with: a domain that holds those may help it.
func (p *NetworkTopologyAware) possibleDomains(tree *hypernode.Snapshot, pod *v1.Pod, nodes []fwk.NodeInfo, demand, maxTier int, wholeCluster bool) sets.Set[string] {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	perLeaf := map[string]int{}
	total := 0
	for _, ni := range nodes {
		if ni.Node() == nil {
			continue
		}
		n := emptyNodeBound(ni, reqs, demand)
		total += n
		if leaf, ok := tree.LeafOf(ni.Node().Name); ok {
			perLeaf[leaf] += n
		}
	}
	out := sets.New[string]()
	if wholeCluster && total >= demand {
		out.Insert(hypernode.VirtualRootName)
	}
	sums := map[string]int{}
	for leaf, n := range perLeaf {
		for _, h := range append([]string{leaf}, tree.Ancestors(leaf)...) {
			sums[h] += n
		}
	}
	for h, n := range sums {
		if info, ok := tree.HyperNode(h); ok && h != hypernode.VirtualRootName && info.Tier <= maxTier && n >= demand {
			out.Insert(h)
		}
	}
	return out
}

// emptyNodeBound is how many copies of a pod with reqs an empty node could hold, capped.
func emptyNodeBound(ni fwk.NodeInfo, reqs v1.ResourceList, limit int) int {
	allocatable := ni.GetAllocatable()
	limit = min(limit, int(allocatable.GetAllowedPodNumber()))
	for name, q := range reqs {
		have, want := podgroup.Amount(allocatable, name), podgroup.QuantityAmount(name, q)
		if have == 0 && podgroup.Scalar(name) {
			// Not in allocatable: possibly provided through DRA. Unknown, so no bound.
			continue
		}
		if want > 0 {
			limit = min(limit, int(have/want))
		}
	}
	return max(limit, 0)
}

// watchCapacity marks failures stale from the informers themselves: the queueing hints see
// only the members waiting in the unschedulable pool, and a change that arrives while every
// member is in back-off must still reach the gang's next attempt.
func (p *NetworkTopologyAware) watchCapacity(factory informers.SharedInformerFactory) error {
	freed := func(pod *v1.Pod) {
		if pod.Spec.NodeName == "" {
			return
		}
		key, _ := podgroup.KeyOf(pod)
		p.freedOn(pod.Spec.NodeName, key, pod.UID)
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*v1.Pod)
			pod, ok2 := newObj.(*v1.Pod)
			if ok1 && ok2 && !terminal(old) && terminal(pod) {
				freed(pod)
			}
			if ok2 && pod.Spec.NodeName == "" && p.relocations.Load() > 0 {
				// The scheduler wrote the failed attempt's condition: it is done with it.
				if key, ok := podgroup.KeyOf(pod); ok {
					p.renominate(klog.Background(), key, pod, false)
				}
			}
		},
		DeleteFunc: func(obj any) {
			pod, ok := informerutil.Tombstoned[*v1.Pod](obj)
			if !ok {
				return
			}
			if !terminal(pod) {
				freed(pod)
			}
			if pod.Spec.NodeName == "" {
				p.plannedMemberGone(pod)
			}
		},
	}); err != nil {
		return fmt.Errorf("watching pods for freed capacity: %w", err)
	}
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(informerutil.Handlers(
		func(old, node *v1.Node) {
			if old == nil || podgroup.NodeCapacityChanged(old, node) {
				p.markAllStale()
			}
		}, func(*v1.Node) {})); err != nil {
		return fmt.Errorf("watching nodes for added capacity: %w", err)
	}
	return nil
}

func terminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}
