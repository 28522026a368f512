package networktopology

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// What answers a member's PreFilter: the gang's plan while it is still valid for the member,
// else the gang's failed plan while nothing that can change it happened, else a new plan
// (gangstate.Tracker.Begin runs the judge under the gangs' lock).

// cycleOf is how the plugin begins a member's cycle.
func (p *NetworkTopologyAware) cycleOf() gangstate.Cycle {
	return gangstate.Cycle{Placed: podgroup.Info.PlacedByTopology, Ready: p.ready, Judge: p.judge}
}

// ready waits for the tree cache and the PodGroup registry to sync (after a restart, a gang
// planned before the registry has seen its bound members would not be pinned to their
// domain) and returns the tree to plan on.
func (p *NetworkTopologyAware) ready(ctx context.Context) (*hypernode.Snapshot, error) {
	if err := p.cache.WaitForSync(ctx); err != nil {
		return nil, fmt.Errorf("waiting for the HyperNode cache: %w", err)
	}
	if err := p.registry.WaitForSync(ctx); err != nil {
		return nil, fmt.Errorf("waiting for the PodGroup registry: %w", err)
	}
	return p.cache.Snapshot(), nil
}

// judge decides what answers the member. A plan that does not answer is dropped by the tracker
// and withdrawn by PreFilter; the judge only reads and stamps. The gangs' lock is held.
func (p *NetworkTopologyAware) judge(ctx context.Context, v *gangstate.View) gangstate.Answer {
	if constraintProblem(v.Tree, v.Key, v.Info) != "" {
		return gangstate.ConstraintRefusedAnswer
	}
	if p.answersLocked(v.Plan, v.Tree, v.Pod.Name, v.Info.Revision) {
		v.Plan.LastUsed = time.Now()
		return gangstate.PlanAnswers
	}
	if p.failureAnswersLocked(klog.FromContext(ctx), v) {
		return gangstate.FailureAnswers
	}
	return gangstate.Replan
}

// answersLocked reports whether the plan answers this member: the member is in it, the
// PodGroup's spec and constraint are those it was made for, and none of its leaves changed
// in the tree; a member it leaves out, while planned members are pending, or until something
// that can make room happens (then it plans again, around the placed members). The gangs'
// lock must be held.
func (p *NetworkTopologyAware) answersLocked(plan *gangstate.Plan, tree *hypernode.Snapshot, pod string, revision int) bool {
	if plan == nil || plan.Revision != revision {
		// A changed constraint or minMember (an admin's edit) is planned for again, around
		// the members already placed.
		return false
	}
	if _, ok := plan.PodLeaf[pod]; !ok && !plan.Deferred.Has(pod) {
		return false
	}
	if plan.Deferred.Has(pod) && plan.Pending() == 0 && !p.waitsForRoomLocked(plan, tree) {
		// Every planned member has its place: plan the deferred sub-groups now, around them;
		// once, while nothing that can make room happens.
		return false
	}
	for leaf, info := range plan.LeafInfos {
		if now, _ := tree.HyperNode(leaf); now != info {
			return false
		}
	}
	return true
}

// failureAnswersLocked reports whether the gang's remembered failure answers while nothing
// relevant changed, or while its back-off runs (then the retried member is activated when it
// ends). The gangs' lock must be held.
func (p *NetworkTopologyAware) failureAnswersLocked(logger klog.Logger, v *gangstate.View) bool {
	f := v.Failure
	if f == nil {
		return false
	}
	if f.Tree != v.Tree.Generation() || f.Revision != v.Info.Revision {
		// The tree or the PodGroup changed (an admin's fix): plan now.
		return false
	}
	if age := time.Since(f.Made); age >= failureMaxAge {
		logger.V(3).Info("Gang's remembered plan failure is old: planning again", "podGroup", v.Key, "age", age)
		return false
	}
	return !f.Stale || p.inBackoffLocked(logger, v.Key, f)
}

// inBackoffLocked reports whether the failure's back-off still runs; if it does and the
// failure went stale, the gang's retried member is activated when it ends (once): the member
// the gang is retried through then (gangstate/retry.go), not the one that saw the change,
// which may be held by then. The gangs' lock must be held.
func (p *NetworkTopologyAware) inBackoffLocked(logger klog.Logger, key podgroup.Key, f *gangstate.PlanFailure) bool {
	wait := time.Until(f.RetryAt)
	if wait <= 0 {
		return false
	}
	if f.Stale && f.Wake == nil {
		f.Wake = time.AfterFunc(wait, func() { p.activateRetried(logger, []podgroup.Key{key}) })
	}
	return true
}

// waitsForBackoff reports whether the gang's failure is in its back-off: an event that can
// help it then does not requeue it, the end of the back-off does (see inBackoffLocked).
func (p *NetworkTopologyAware) waitsForBackoff(logger klog.Logger, key podgroup.Key) bool {
	p.gangs.Lock()
	defer p.gangs.Unlock()
	f := p.gangs.PlanFailureLocked(key)
	return f != nil && p.inBackoffLocked(logger, key, f)
}
