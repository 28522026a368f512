package gangpreemption

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/informerutil"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// While a gang's victims terminate, its members wait out of the queue (PreEnqueue): a member
// that reserved its freed node while another's victim still ran would be released again by
// Gang when that other member failed, and the released member's nomination with it, so a pod
// of lower priority could take the node. When the last victim is gone, the members are
// activated (watchVictims): no cluster event would requeue a gated pod of this plugin.

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

// victimGone is called for every deleted pod: if it was the last victim of a gang's
// preemption, the attempt ends and the gang's pending members are activated.
func (pl *GangPreemption) victimGone(logger klog.Logger, pod *v1.Pod) {
	pl.mu.Lock()
	key, ok := pl.victimOf[pod.UID]
	if !ok {
		pl.mu.Unlock()
		return
	}
	delete(pl.victimOf, pod.UID)
	a := pl.running[key]
	if a == nil {
		pl.mu.Unlock()
		return
	}
	a.left--
	if a.left > 0 {
		pl.mu.Unlock()
		return
	}
	pl.endLocked(key, a)
	pl.mu.Unlock()
	n := pl.registry.ActivatePending(logger, pl.handle, key)
	logger.V(2).Info("Gang preemption's victims are gone", "podGroup", key, "membersActivated", n)
}

// endLocked drops an attempt and its victim index entries. pl.mu must be held.
func (pl *GangPreemption) endLocked(key podgroup.Key, a *attempt) {
	if pl.running[key] == a {
		delete(pl.running, key)
	}
	for _, v := range a.victims {
		if pl.victimOf[v.UID] == key {
			delete(pl.victimOf, v.UID)
		}
	}
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
