package networktopology

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// planOf returns the gang's plan as the gang state holds it (nil: none).
func (p *NetworkTopologyAware) planOf(key podgroup.Key) *gangstate.Plan {
	p.gangs.Lock()
	defer p.gangs.Unlock()
	return p.gangs.PlanLocked(key)
}

// failureOf returns the gang's remembered failed plan (nil: none).
func (p *NetworkTopologyAware) failureOf(key podgroup.Key) *gangstate.PlanFailure {
	p.gangs.Lock()
	defer p.gangs.Unlock()
	return p.gangs.PlanFailureLocked(key)
}

// setPlan makes plan the gang's plan.
func (p *NetworkTopologyAware) setPlan(key podgroup.Key, plan *gangstate.Plan) {
	p.gangs.Lock()
	defer p.gangs.Unlock()
	p.gangs.SetPlanLocked(key, plan)
}

// setFailure records f as the gang's failed plan, made for scout.
func (p *NetworkTopologyAware) setFailure(key podgroup.Key, scout *v1.Pod, f *gangstate.PlanFailure) {
	p.gangs.Lock()
	defer p.gangs.Unlock()
	p.gangs.RecordPlanFailureLocked(key, scout, f)
}

// viewFor is the view of the pod's gang that Begin takes for a gang that plans again, on the
// given tree.
func (p *NetworkTopologyAware) viewFor(key podgroup.Key, pod *v1.Pod, tree *hypernode.Snapshot) *gangstate.View {
	info := p.registry.Info(key)
	return &gangstate.View{Key: key, Pod: pod, Info: info, Tree: tree, Precedence: podgroup.PrecedenceOf(pod, key, info.PodGroup),
		Gang: p.registry.Gang(key).Including(pod)}
}

// recordFailure records a failed plan of the gang made for pod on tree, as planGang does.
func (p *NetworkTopologyAware) recordFailure(key podgroup.Key, pod *v1.Pod, status *fwk.Status, tree *hypernode.Snapshot, info podgroup.Info, possible sets.Set[string]) {
	failures := 1
	if old := p.failureOf(key); old != nil {
		failures = old.Failures + 1
	}
	now := time.Now()
	v := &gangstate.View{Key: key, Pod: pod, Info: info, Tree: tree}
	p.gangs.Settle(klog.Background(), p.handle, v, gangstate.Settlement{
		Failure: &gangstate.PlanFailure{Tree: tree.Generation(), Revision: info.Revision, Made: now,
			Failures: failures, RetryAt: now.Add(backoff(failures)), Possible: possible},
		Status: func(int) *fwk.Status { return status }, RetryNow: p.treeMovedFrom(tree)})
}

// reuseFailure returns the gang's remembered failure when it answers the gang (judge), else
// nil.
func (p *NetworkTopologyAware) reuseFailure(logger klog.Logger, key podgroup.Key, info podgroup.Info, tree *hypernode.Snapshot) *fwk.Status {
	p.gangs.Lock()
	defer p.gangs.Unlock()
	v := &gangstate.View{Key: key, Info: info, Tree: tree, Failure: p.gangs.PlanFailureLocked(key)}
	if !p.failureAnswersLocked(logger, v) {
		return nil
	}
	return v.Failure.Status
}
