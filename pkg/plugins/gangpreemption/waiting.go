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

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
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
	pl.gangs.Lock()
	drained := pl.gangs.VictimGoneLocked(pod.UID)
	for key, a := range drained {
		pl.armDrainLocked(logger, key, a)
	}
	pl.gangs.Unlock()
	for key := range drained {
		n := pl.gangs.ActivatePending(logger, pl.handle, key)
		logger.V(2).Info("Gang preemption's victims are gone", "podGroup", key, "membersActivated", n)
	}
}

// startLocked makes a the gang's preemption, ending its earlier one, with a deadline: a victim
// that never terminates (a finalizer, an unreachable node) must not hold the gang out of the
// queue for ever. It returns the preemption it replaced. The gangs' lock must be held.
func (pl *GangPreemption) startLocked(logger klog.Logger, key podgroup.Key, a *gangstate.Preemption) *gangstate.Preemption {
	old := pl.gangs.StartPreemptionLocked(key, a)
	grace := int64(0)
	for _, v := range a.Victims {
		grace = max(grace, gracePeriod(v))
	}
	a.Limit = time.Duration(grace)*time.Second + victimSlack
	a.Deadline = time.AfterFunc(a.Limit, func() { pl.expire(logger, key, a) })
	return old
}

// expire ends a preemption whose victims outlived their grace period (counted again from the
// end of its evictions), and stops evictions still being sent: the gang is retried and may
// choose another domain.
func (pl *GangPreemption) expire(logger klog.Logger, key podgroup.Key, a *gangstate.Preemption) {
	pl.gangs.Lock()
	left := a.Waiting.Len()
	expired := pl.gangs.WaitingPreemptionLocked(key) == a && pl.gangs.EndPreemptionLocked(key, a)
	pl.gangs.Unlock()
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

// settle counts the victims already gone (their deletion may have been seen before they were
// registered): they send no more deletion to wait for.
func (pl *GangPreemption) settle(logger klog.Logger, victims []*v1.Pod) {
	for _, v := range victims {
		if current, err := pl.pods.Pods(v.Namespace).Get(v.Name); err != nil || current.UID != v.UID {
			pl.victimGone(logger, v)
		}
	}
}

// resume picks up a preemption the scheduler made before it restarted (it lived in its
// memory): when members of the gang are nominated (status.nominatedNodeName, which a
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
	// Once per PodGroup and process: only a restart loses a preemption; later nominations are
	// this process's own, and terminating pods found later are none of the gang's doing.
	pl.gangs.Lock()
	running := pl.gangs.WaitingPreemptionLocked(key) != nil
	considered := pl.gangs.MarkResumedLocked(key)
	pl.gangs.Unlock()
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
	a := &gangstate.Preemption{Nodes: map[types.UID]string{}}
	var names []string
	seen := sets.New[string]()
	for _, m := range members {
		node := m.Status.NominatedNodeName
		if node == "" {
			continue
		}
		a.Members = append(a.Members, m)
		a.Nodes[m.UID] = node
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
			a.Victims = append(a.Victims, v)
		}
	}
	if len(a.Victims) == 0 {
		return
	}
	a.Resumed = true
	a.Domain = wholeCluster
	if common := placement.LowestCommon(pl.cache.Snapshot(), names); common != "" && common != hypernode.VirtualRootName {
		a.Domain = common
	}
	logger := klog.FromContext(ctx)
	pl.gangs.Lock()
	if pl.gangs.WaitingPreemptionLocked(key) != nil {
		pl.gangs.Unlock()
		return
	}
	pl.startLocked(logger, key, a)
	pl.gangs.Unlock()
	logger.V(2).Info("Gang preemption resumed: its victims still terminate", "podGroup", key, "domain", a.Domain, "victims", len(a.Victims), "nominated", len(a.Members))
	pl.settle(logger, a.Victims)
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
