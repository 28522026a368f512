package gangpreemption

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
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

// startEvictions evicts the attempt's victims after the cycle, unless the attempt ended
// already.
func (pl *GangPreemption) startEvictions(logger klog.Logger, pg *schedulingv1alpha1.PodGroup, key podgroup.Key, a *gangstate.Preemption, preemptor *gangPreemptor) {
	ctx, stop := context.WithCancel(pl.ctx)
	pl.gangs.Lock()
	current := pl.gangs.WaitingPreemptionLocked(key) == a
	if current {
		a.StopEvicting = stop
	}
	pl.gangs.Unlock()
	if !current {
		stop()
		return
	}
	pl.evicting.Add(1)
	go pl.evict(ctx, stop, logger, pg, key, a, preemptor)
}

// evict sends the attempt's evictions through upstream's executor (the DisruptionTarget
// condition, then delete; a pod waiting in Permit is rejected in memory). The first failure
// stops sending the rest: the gang gets all of its room, or it is retried and decides again.
// stop cancels sending, also when the preemption ends first (gangstate.Tracker.EndPreemptionLocked). Calls already sent run
// to their end under the scheduler's context: a call cut between its condition and its
// delete would leave a running pod marked for disruption.
func (pl *GangPreemption) evict(sending context.Context, stop context.CancelFunc, logger klog.Logger, pg *schedulingv1alpha1.PodGroup, key podgroup.Key, a *gangstate.Preemption, preemptor *gangPreemptor) {
	defer pl.evicting.Done()
	defer stop()
	start := time.Now()
	victims := a.Victims
	inMemory := make([]bool, len(victims))
	var sent, evicted atomic.Int32
	var fail sync.Once
	var failure error
	var failed *v1.Pod
	pl.handle.Parallelizer().Until(sending, len(victims), func(i int) {
		sent.Add(1)
		v := victims[i]
		if v.DeletionTimestamp != nil {
			return // leaving already
		}
		var err error
		if inMemory[i], err = pl.evictPod(pl.ctx, preemptor, v); err != nil {
			fail.Do(func() { failure, failed = err, v })
			stop()
			return
		}
		evicted.Add(1)
	}, Name)
	took := time.Since(start)
	switch {
	case pl.ctx.Err() != nil:
		// Calls cut by the scheduler's stop fail; that is no refusal of the API.
		metrics.ObserveGangPreemptionEviction(metrics.ResultStopped, took)
		logger.V(2).Info("Gang preemption's evictions stopped: the scheduler is stopping", "podGroup", key, "evicted", evicted.Load(), "victims", len(victims))
	case failure != nil:
		metrics.ObserveGangPreemptionEviction(metrics.ResultFailed, took)
		pl.evictionFailed(logger, pg, key, a, failed, failure, int(evicted.Load()))
	case int(sent.Load()) < len(victims):
		metrics.ObserveGangPreemptionEviction(metrics.ResultStopped, took)
		logger.V(2).Info("Gang preemption's evictions stopped: the preemption ended first", "podGroup", key, "evicted", evicted.Load(), "victims", len(victims))
	default:
		metrics.ObserveGangPreemptionEviction(metrics.ResultEvicted, took)
		// The victims' grace period counts from now: sending took a while for a large gang.
		pl.gangs.Lock()
		if pl.gangs.WaitingPreemptionLocked(key) == a {
			a.Deadline.Reset(a.Limit)
		}
		pl.gangs.Unlock()
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

// refusalMemory is how long a pod whose eviction failed is not chosen as a victim again: a
// pod the API always refuses to evict (an admission webhook) would otherwise make each retry
// evict another batch of pods around it. A variable for the tests.
var refusalMemory = 5 * time.Minute

// evictionFailed ends an attempt one of whose victims could not be evicted: nothing waits for
// a victim that may not go, so the members' nominations are withdrawn and the gang is
// retried, deciding again, without that victim, from what the evictions so far have freed.
// The member in the cycle that preempted may get its nomination back from kube-scheduler
// after this withdrawal (the result of its PostFilter is applied after it returns); its next
// cycle, which the activation brings, clears or replaces it.
func (pl *GangPreemption) evictionFailed(logger klog.Logger, pg *schedulingv1alpha1.PodGroup, key podgroup.Key, a *gangstate.Preemption, victim *v1.Pod, err error, evicted int) {
	pl.gangs.Lock()
	current := pl.gangs.WaitingPreemptionLocked(key) == a && pl.gangs.EndPreemptionLocked(key, a)
	pl.gangs.Unlock()
	pl.refusedMu.Lock()
	pl.refused[victim.UID] = time.Now().Add(refusalMemory)
	pl.refusedMu.Unlock()
	msg := fmt.Sprintf("gang %s: evicting %s/%s in %s failed: %v; %d of the %d pods chosen were evicted; ",
		key, victim.Namespace, victim.Name, a.Domain, err, evicted, len(a.Victims))
	if current {
		msg += "the members' nominations are withdrawn and the gang is retried"
	} else {
		// Its deadline ended the attempt first (and retried the gang), or a deletion seen
		// for the last victim while its call failed did.
		msg += "the preemption had already ended"
	}
	msg += fmt.Sprintf("; %s/%s is not chosen again for %v", victim.Namespace, victim.Name, refusalMemory)
	if pl.registry.Info(key).PodGroup != nil {
		// Not after the PodGroup's deletion: its Event log forgot it then.
		pl.events.Record(pg, v1.EventTypeWarning, EventGangPreemptionFailed, msg)
	}
	logger.Error(err, "Gang preemption could not evict a victim", "podGroup", key, "victim", klog.KObj(victim),
		"evicted", evicted, "victims", len(a.Victims), "attemptEnded", current)
	if !current {
		return
	}
	pl.withdraw(a.Members)
	n := pl.gangs.ActivatePending(logger, pl.handle, key)
	logger.V(2).Info("Gang preemption failed; the gang is retried", "podGroup", key, "membersActivated", n)
	pl.gangs.PreemptionEnded(key)
}

// refusedVictims are the pods whose eviction failed less than refusalMemory ago; the others
// are forgotten.
func (pl *GangPreemption) refusedVictims() sets.Set[types.UID] {
	pl.refusedMu.Lock()
	defer pl.refusedMu.Unlock()
	if len(pl.refused) == 0 {
		return nil
	}
	now := time.Now()
	out := sets.New[types.UID]()
	for uid, until := range pl.refused {
		if now.After(until) {
			delete(pl.refused, uid)
			continue
		}
		out.Insert(uid)
	}
	return out
}
