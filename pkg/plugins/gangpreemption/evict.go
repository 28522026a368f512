package gangpreemption

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/metrics"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// A gang preemption's victims are evicted after the cycle that chose them, in parallel, as
// kube-scheduler's asynchronous preemption does: hundreds of API calls (seconds for a
// 1,000-pod gang) would otherwise hold the scheduling loop, and every other pod with it. The
// attempt, its members' nominations and the PreEnqueue wait begin before the cycle ends, so
// nothing can take the room in between; a deletion seen before its eviction call returned
// counts down the attempt as any other.

// EventGangPreemptionFailed: an eviction failed; the gang's nominations are withdrawn and it
// is retried.
const EventGangPreemptionFailed = "GangPreemptionFailed"

// startEvictions evicts the attempt's victims after the cycle, unless the attempt was
// abandoned already.
func (pl *GangPreemption) startEvictions(logger klog.Logger, pg *schedulingv1alpha1.PodGroup, key podgroup.Key, a *attempt, preemptor *gangPreemptor) {
	ctx, stop := context.WithCancel(pl.ctx)
	pl.mu.Lock()
	current := pl.running[key] == a
	if current {
		a.stopEvicting = stop
	}
	pl.mu.Unlock()
	if !current {
		stop()
		return
	}
	pl.evicting.Add(1)
	go pl.evict(ctx, stop, logger, pg, key, a, preemptor)
}

// evict sends the attempt's evictions through upstream's executor (the DisruptionTarget
// condition, then delete; a pod waiting in Permit is rejected in memory). The first failure
// stops the rest: the gang gets all of its room, or it is retried and decides again. ctx is
// cancelled (stop) when the attempt is abandoned (abandonLocked).
func (pl *GangPreemption) evict(ctx context.Context, stop context.CancelFunc, logger klog.Logger, pg *schedulingv1alpha1.PodGroup, key podgroup.Key, a *attempt, preemptor *gangPreemptor) {
	defer pl.evicting.Done()
	defer stop()
	start := time.Now()
	rest, stopRest := context.WithCancel(ctx)
	defer stopRest()
	victims := a.victims
	inMemory := make([]bool, len(victims))
	var evicted atomic.Int32
	var fail sync.Once
	var failure error
	var failed *v1.Pod
	pl.handle.Parallelizer().Until(rest, len(victims), func(i int) {
		v := victims[i]
		if v.DeletionTimestamp != nil {
			return // leaving already
		}
		var err error
		if inMemory[i], err = pl.evictPod(rest, preemptor, v); err != nil {
			fail.Do(func() { failure, failed = err, v })
			stopRest()
			return
		}
		evicted.Add(1)
	}, Name)
	took := time.Since(start)
	switch {
	case ctx.Err() != nil:
		metrics.ObserveGangPreemptionEviction(metrics.ResultStopped, took)
		logger.V(2).Info("Gang preemption's evictions stopped: the preemption was abandoned", "podGroup", key, "evicted", evicted.Load(), "victims", len(victims))
	case failure != nil:
		metrics.ObserveGangPreemptionEviction(metrics.ResultFailed, took)
		pl.evictionFailed(logger, pg, key, a, failed, failure, int(evicted.Load()))
	default:
		metrics.ObserveGangPreemptionEviction(metrics.ResultEvicted, took)
		// A victim rejected in memory (it waited in Permit) is not deleted: it is not waited for.
		for i, v := range victims {
			if inMemory[i] {
				pl.victimGone(logger, v)
			}
		}
		pl.settle(logger, victims)
		// V(2), once per preemption; the benchmark harness reads the duration.
		logger.V(2).Info("Gang preemption evicted its victims", "podGroup", key, "victims", len(victims), "eviction", took)
	}
}

// evictionFailed ends an attempt one of whose victims could not be evicted: nothing waits for
// a victim that may not go, so the members' nominations are withdrawn and the gang is
// retried, deciding again from what the evictions so far have freed.
func (pl *GangPreemption) evictionFailed(logger klog.Logger, pg *schedulingv1alpha1.PodGroup, key podgroup.Key, a *attempt, victim *v1.Pod, err error, evicted int) {
	pl.mu.Lock()
	current := pl.running[key] == a
	if current {
		pl.endLocked(key, a)
	}
	pl.mu.Unlock()
	if !current {
		return // replaced meanwhile: the newer attempt holds the gang's nominations
	}
	pl.withdraw(a.members)
	n := pl.registry.ActivatePending(logger, pl.handle, key)
	msg := fmt.Sprintf("gang %s: evicting %s/%s in %s failed: %v; %d of the %d pods chosen were evicted; the members' nominations are withdrawn and the gang is retried",
		key, victim.Namespace, victim.Name, a.domain, err, evicted, len(a.victims))
	pl.events.Record(pg, v1.EventTypeWarning, EventGangPreemptionFailed, msg)
	logger.Error(err, "Gang preemption could not evict a victim; the gang is retried", "podGroup", key, "victim", klog.KObj(victim),
		"evicted", evicted, "victims", len(a.victims), "membersActivated", n)
	pl.registry.PreemptionEnded(key)
}
