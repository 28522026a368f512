package networktopology

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// dropExpiredPlans drops the plans unused for planTTL and the plans of gangs whose PodGroup
// is gone, withdrawing their nominations; if they still promised slots, the gangs waiting for
// room are retried.
func (p *NetworkTopologyAware) dropExpiredPlans(logger klog.Logger) {
	p.gangs.Lock()
	var released []string
	var withdrawn []*v1.Pod
	p.gangs.EachPlanLocked(func(k podgroup.Key, plan *gangstate.Plan) {
		if time.Since(plan.LastUsed) > planTTL || !p.gangs.HasPodGroupLocked(k) {
			released = append(released, plan.PromisedLeaves()...)
			withdrawn = append(withdrawn, p.withdrawLocked(plan)...)
			p.gangs.DropPlanLocked(k)
		}
	})
	p.gangs.Unlock()
	p.withdraw(withdrawn)
	if len(released) > 0 {
		p.promisesReleased(logger, released)
	}
}

// Reserve counts the pod in the HyperNodes' usage and turns a member's promised slot into a
// reservation.
func (p *NetworkTopologyAware) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	p.forgetPreScore(state)
	if p.usageSums != nil {
		// Counted from now, as kube-scheduler's cache counts an assumed pod.
		req := readState[*preScoreState](state, preScoreStateKey).normalRequest()
		if req == nil {
			req = p.usageSums.podRequest(pod)
		}
		p.usageSums.setPod(pod.UID, pod.Generation, nodeName, req)
	}
	p.holdTouched(klog.FromContext(ctx), pod, nodeName)
	v := gangstate.ViewOf(state)
	if v == nil {
		return nil
	}
	key := v.Key
	p.registry.Reserve(pod, nodeName)
	p.gangs.Lock()
	wakeDeferred := false
	if plan := p.gangs.PlanLocked(key); plan != nil && !plan.Reserved.Has(pod.Name) {
		plan.LastUsed = time.Now()
		// The scheduler withdrew its nomination when it assumed the pod.
		delete(plan.Nominated, pod.Name)
		if _, ok := plan.Relocated[pod.Name]; ok {
			delete(plan.Relocated, pod.Name)
			p.relocations.Add(-1)
		}
		if leaf, ok := plan.PodLeaf[pod.Name]; ok && plan.Promised[leaf] > 0 {
			p.gangs.StepLocked(key, gangstate.PromiseKept, func() {
				plan.Promised[leaf]--
				plan.Reserved.Insert(pod.Name)
				plan.PlacedByLeaf[leaf]++
			})
			wakeDeferred = plan.Pending() == 0 && plan.Deferred.Len() > 0
		}
	}
	p.gangs.Unlock()
	if wakeDeferred {
		// Every planned member has its place: the deferred sub-groups can be planned now.
		p.gangs.ActivatePending(klog.FromContext(ctx), p.handle, key)
	}
	return nil
}

// Unreserve drops the gang's plan when the member was reserved under it: a member was
// rejected or timed out, so the plan no longer holds, and the next member plans again around
// the members still placed. The late Unreserve of a member of an earlier plan leaves the
// current plan alone.
func (p *NetworkTopologyAware) Unreserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ string) {
	if p.usageSums != nil {
		p.usageSums.removePod(pod.UID)
	}
	// The view of the cycle that reserved the member; kube-scheduler unreserves with that
	// cycle's state, and a caller without it is answered from the registry.
	key, ok := podgroup.Key{}, false
	if v := gangstate.ViewOf(state); v != nil {
		key, ok = v.Key, true
	} else {
		key, _, ok = p.constraint(pod)
	}
	if !ok {
		return
	}
	p.registry.Unreserve(pod)
	p.gangs.Lock()
	plan := p.gangs.PlanLocked(key)
	// A plan that places nobody was made around the placed members, this one among them.
	current := plan != nil && (plan.Reserved.Has(pod.Name) || plan.WaitsForRoom)
	p.gangs.Unlock()
	if current {
		p.invalidate(klog.FromContext(ctx), key)
	}
}
