package networktopology

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// dropExpiredPlans drops the plans unused for planTTL and the plans of gangs whose PodGroup
// is gone, withdrawing their nominations; if they still promised slots, the gangs waiting for
// room are retried.
func (p *NetworkTopologyAware) dropExpiredPlans(logger klog.Logger) {
	p.mu.Lock()
	var released []string
	var withdrawn []*v1.Pod
	for k, plan := range p.plans {
		if time.Since(plan.lastUsed) > planTTL || p.registry.Info(k).PodGroup == nil {
			released = append(released, plan.promisedLeaves()...)
			withdrawn = append(withdrawn, p.withdrawLocked(plan)...)
			delete(p.plans, k)
		}
	}
	p.mu.Unlock()
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
	key, _, ok := p.constraint(pod)
	if !ok {
		return nil
	}
	p.registry.Reserve(pod, nodeName)
	p.mu.Lock()
	wakeDeferred := false
	if plan := p.plans[key]; plan != nil && !plan.reserved.Has(pod.Name) {
		plan.lastUsed = time.Now()
		// The scheduler withdrew its nomination when it assumed the pod.
		delete(plan.nominated, pod.Name)
		if _, ok := plan.relocated[pod.Name]; ok {
			delete(plan.relocated, pod.Name)
			p.relocations.Add(-1)
		}
		if leaf, ok := plan.podLeaf[pod.Name]; ok && plan.promised[leaf] > 0 {
			plan.promised[leaf]--
			plan.reserved.Insert(pod.Name)
			plan.placedByLeaf[leaf]++
			wakeDeferred = plan.pending() == 0 && plan.deferred.Len() > 0
		}
	}
	p.mu.Unlock()
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
func (p *NetworkTopologyAware) Unreserve(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	if p.usageSums != nil {
		p.usageSums.removePod(pod.UID)
	}
	key, _, ok := p.constraint(pod)
	if !ok {
		return
	}
	p.registry.Unreserve(pod)
	p.mu.Lock()
	plan := p.plans[key]
	// A plan that places nobody was made around the placed members, this one among them.
	current := plan != nil && (plan.reserved.Has(pod.Name) || plan.waitsForRoom)
	p.mu.Unlock()
	if current {
		p.invalidate(klog.FromContext(ctx), key)
	}
}
