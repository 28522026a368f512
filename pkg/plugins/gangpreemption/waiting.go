package gangpreemption

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/informerutil"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// While a gang's victims terminate, its members wait out of the queue (PreEnqueue): no cycle
// can place them before, and one that fails keeps nothing more than its nomination (its
// PostFilter ends the chain before Gang's, which would release the members that reserved
// free nodes). When the last victim is gone, the members are
// activated (victimGone), and wait in PreFilter until the scheduler's cache has dropped the
// victims too (draining.go).

// PreEnqueue holds the members of a gang whose victims still terminate; other pods go to
// DefaultPreemption's PreEnqueue (pods whose asynchronous preemption runs).
func (pl *GangPreemption) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return pl.DefaultPreemption.PreEnqueue(ctx, pod)
	}
	if msg, _, waiting := pl.waitingForVictims(key, pod); waiting {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	return nil
}

// victimGone is called for every deleted pod: each attempt that waited for it counts it
// down (two gangs' preemptions may share a victim, chosen from snapshots taken before one
// saw the other's eviction), and an attempt with no victim left ends, drains (its members
// wait in PreFilter until kube-scheduler's cache has dropped the victims too: this handler
// may run before the cache's) and activates its gang.
func (pl *GangPreemption) victimGone(logger klog.Logger, pod *v1.Pod) {
	pl.mu.Lock()
	keys := pl.victimOf[pod.UID]
	delete(pl.victimOf, pod.UID)
	var done []podgroup.Key
	for key := range keys {
		a := pl.running[key]
		if a == nil || !a.waiting.Has(pod.UID) {
			continue
		}
		a.waiting.Delete(pod.UID)
		if a.waiting.Len() == 0 {
			pl.endLocked(key, a)
			pl.drainLocked(logger, key, a)
			done = append(done, key)
		}
	}
	pl.mu.Unlock()
	for _, key := range done {
		n := pl.gangs.ActivatePending(logger, pl.handle, key)
		logger.V(2).Info("Gang preemption's victims are gone", "podGroup", key, "membersActivated", n)
	}
}

// startLocked registers an attempt, replacing the gang's earlier one, with a deadline: a
// victim that never terminates (a finalizer, an unreachable node) must not hold the gang out
// of the queue for ever. pl.mu must be held.
func (pl *GangPreemption) startLocked(logger klog.Logger, key podgroup.Key, a *attempt) {
	if old := pl.running[key]; old != nil {
		pl.endLocked(key, old)
	}
	pl.stopDrainingLocked(key)
	pl.running[key] = a
	pl.runningCount.Store(int32(len(pl.running)))
	a.waiting = sets.New[types.UID]()
	grace := int64(0)
	for _, v := range a.victims {
		a.waiting.Insert(v.UID)
		if pl.victimOf[v.UID] == nil {
			pl.victimOf[v.UID] = sets.New[podgroup.Key]()
		}
		pl.victimOf[v.UID].Insert(key)
		grace = max(grace, gracePeriod(v))
	}
	a.limit = time.Duration(grace)*time.Second + victimSlack
	a.deadline = time.AfterFunc(a.limit, func() { pl.expire(logger, key, a) })
}

// expire ends an attempt whose victims outlived their grace period (counted again from the
// end of its evictions), and stops evictions still being sent: the gang is retried and may
// choose another domain.
func (pl *GangPreemption) expire(logger klog.Logger, key podgroup.Key, a *attempt) {
	pl.mu.Lock()
	expired, left := pl.running[key] == a, a.waiting.Len()
	if expired {
		pl.endLocked(key, a)
	}
	pl.mu.Unlock()
	if expired {
		n := pl.gangs.ActivatePending(logger, pl.handle, key)
		logger.Info("Gang preemption's victims outlived their grace period; the gang is retried", "podGroup", key, "victimsLeft", left, "membersActivated", n)
		pl.gangs.PreemptionEnded(key)
	}
}

// victimSlack is how long past the victims' longest grace period a gang waits for them. A
// variable for the tests.
var victimSlack = time.Minute

// gracePeriod is how long a victim may take to terminate, in seconds.
func gracePeriod(p *v1.Pod) int64 {
	if p.DeletionGracePeriodSeconds != nil {
		return *p.DeletionGracePeriodSeconds
	}
	if p.Spec.TerminationGracePeriodSeconds != nil {
		return *p.Spec.TerminationGracePeriodSeconds
	}
	return v1.DefaultTerminationGracePeriodSeconds
}

// endLocked drops an attempt and its victim index entries, and stops sending its evictions:
// nothing is evicted for a decision no one waits for. pl.mu must be held.
func (pl *GangPreemption) endLocked(key podgroup.Key, a *attempt) {
	if pl.running[key] == a {
		delete(pl.running, key)
		pl.runningCount.Store(int32(len(pl.running)))
	}
	if a.deadline != nil {
		a.deadline.Stop()
	}
	if a.stopEvicting != nil {
		a.stopEvicting()
	}
	for _, v := range a.victims {
		if keys := pl.victimOf[v.UID]; keys != nil {
			keys.Delete(key)
			if keys.Len() == 0 {
				delete(pl.victimOf, v.UID)
			}
		}
	}
}

// settle counts the victims already gone (their deletion may have been seen before they were
// registered): they send no more deletion to wait for.
func (pl *GangPreemption) settle(logger klog.Logger, victims []*v1.Pod) {
	for _, v := range victims {
		if current, err := pl.pods.Pods(v.Namespace).Get(v.Name); err != nil || current.UID != v.UID {
			pl.victimGone(logger, v)
		}
	}
}

// resume picks up a preemption the scheduler made before it restarted (the attempt lived in
// its memory): when members of the gang are nominated (status.nominatedNodeName, which a
// preemption writes for each of them) on nodes where pods of lower priority terminate because
// kube-scheduler preempted them, the gang waits for those pods instead of preempting again.
func (pl *GangPreemption) resume(ctx context.Context, key podgroup.Key, pod *v1.Pod) {
	if pod.Status.NominatedNodeName == "" {
		// A preemption nominates every member it places; a later one of those resumes it.
		return
	}
	info := pl.registry.Info(key)
	if info.PodGroup == nil {
		return
	}
	// Once per PodGroup and process: only a restart loses an attempt; later nominations are
	// this process's own, and terminating pods found later are none of the gang's doing.
	pl.mu.Lock()
	_, running := pl.running[key]
	considered := pl.resumed.Has(key)
	pl.resumed.Insert(key)
	pl.mu.Unlock()
	if running || considered {
		return
	}
	members := []*v1.Pod{pod}
	for _, m := range pl.registry.PendingMembers(key) {
		if m.UID != pod.UID {
			members = append(members, m)
		}
	}
	// The gang's priority, as its attempt judged victims (gangPriority).
	priority := gangPriority(pod, pl.registry.Gang(key))
	nodeInfos := pl.handle.SnapshotSharedLister().NodeInfos()
	a := &attempt{nodes: map[types.UID]string{}}
	var names []string
	seen := sets.New[string]()
	for _, m := range members {
		node := m.Status.NominatedNodeName
		if node == "" {
			continue
		}
		a.members = append(a.members, m)
		a.nodes[m.UID] = node
		names = append(names, node)
		ni, err := nodeInfos.Get(node)
		if err != nil || seen.Has(node) {
			continue
		}
		seen.Insert(node)
		for _, pi := range ni.GetPods() {
			v := pi.GetPod()
			if own, ok := podgroup.KeyOf(v); (ok && own == key) || corev1helpers.PodPriority(v) >= priority || !preemption.PodTerminatingByPreemption(v) {
				continue
			}
			a.victims = append(a.victims, v)
		}
	}
	if len(a.victims) == 0 {
		return
	}
	a.resumed = true
	a.domain = wholeCluster
	if common := placement.LowestCommon(pl.cache.Snapshot(), names); common != "" && common != hypernode.VirtualRootName {
		a.domain = common
	}
	logger := klog.FromContext(ctx)
	pl.mu.Lock()
	if pl.running[key] != nil {
		pl.mu.Unlock()
		return
	}
	pl.startLocked(logger, key, a)
	pl.mu.Unlock()
	logger.V(2).Info("Gang preemption resumed: its victims still terminate", "podGroup", key, "domain", a.domain, "victims", len(a.victims), "nominated", len(a.members))
	pl.settle(logger, a.victims)
}

// addVictimHandler registers victimGone on the scheduler's pod informer.
func (pl *GangPreemption) addVictimHandler(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	_, err := pl.handle.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if pod, ok := informerutil.Tombstoned[*v1.Pod](obj); ok {
				pl.victimGone(logger, pod)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching the victims of gang preemptions: %w", err)
	}
	return nil
}
