package networktopology

import (
	v1 "k8s.io/api/core/v1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
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

// deferringHas reports whether the gang is among the deferring ones.
func (p *NetworkTopologyAware) deferringHas(key podgroup.Key) bool {
	p.gangs.Lock()
	defer p.gangs.Unlock()
	return p.gangs.DeferringLocked().Has(key)
}
