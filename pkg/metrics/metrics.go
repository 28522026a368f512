// Package metrics defines the scheduler plugins' Prometheus metrics. They are registered in
// component-base's legacy registry, so kube-scheduler serves them on its own /metrics next
// to its scheduler_* metrics. Every name starts with hypernode_; no label carries a pod,
// PodGroup or HyperNode name, so the number of series stays bounded whatever the cluster
// runs. docs/troubleshooting.md says what each one answers.
package metrics

import (
	"strconv"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const namespace = "hypernode"

// Results of a plan (label "result").
const (
	ResultPlaced   = "placed"
	ResultNoDomain = "no_domain"
	ResultError    = "error"
)

// Results of a member's relocation (label "result").
const (
	ResultRelocated = "relocated"
	ResultNoRoom    = "no_room"
)

// Results of a gang preemption's evictions (label "result").
const (
	ResultEvicted = "evicted"
	ResultFailed  = "failed"
	ResultStopped = "stopped"
)

// Topology modes of a placement (label "mode").
const (
	ModeHard = "hard"
	ModeSoft = "soft"
)

var (
	// PlanDuration is how long one gang plan took, by result.
	PlanDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      namespace,
		Name:           "plan_duration_seconds",
		Help:           "Duration of planning a gang into a network domain (once per gang, not per member), by result: placed, no_domain (no allowed HyperNode can host it now) or error.",
		Buckets:        metrics.ExponentialBuckets(0.0001, 4, 10),
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	// PlansTotal counts the plans made, by result.
	PlansTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Name:           "plans_total",
		Help:           "Gang plans computed, by result: placed, no_domain or error.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	// PlanReusesTotal counts the members that used their gang's plan, or its remembered
	// failure, instead of planning.
	PlanReusesTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Name:           "plan_reuses_total",
		Help:           "Gang members that reused their gang's plan instead of planning again, by result: placed (the plan placed the member), no_room (the plan left the member out) or no_domain (the gang's remembered failure).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	// MemberRelocationsTotal counts the planned members that found no room in their planned
	// leaf or node and were moved to another node of their gang's domain.
	MemberRelocationsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Name:           "member_relocations_total",
		Help:           "Planned gang members whose planned leaf or node had no room for them any more, by result: relocated (moved to another node of the gang's domain) or no_room (none had room; the gang plans again).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	// PlanSimulatedNodes is how many nodes one plan ran the Filter plugins on.
	PlanSimulatedNodes = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      namespace,
		Name:           "plan_simulated_nodes",
		Help:           "Nodes on which one gang plan simulated the member's Filter plugins.",
		Buckets:        metrics.ExponentialBuckets(1, 4, 9),
		StabilityLevel: metrics.ALPHA,
	})

	// PlacementsTotal counts the gangs planned into a domain, by the domain's tier and the
	// constraint's mode.
	PlacementsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Name:           "placements_total",
		Help:           "Gangs planned into a network domain, by the tier of the domain and the mode (hard or soft) of the gang's topology constraint.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"tier", "mode"})

	// GangsWaitingInPermit is the number of gangs whose reserved members wait in Permit.
	GangsWaitingInPermit = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      namespace,
		Name:           "gangs_waiting_in_permit",
		Help:           "Gangs whose reserved members wait in Permit for the rest of the gang.",
		StabilityLevel: metrics.ALPHA,
	})

	// GangSchedulingDuration is the time from a gang's first reservation to the moment the
	// members allowed at its quorum are all bound.
	GangSchedulingDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      namespace,
		Name:           "gang_scheduling_duration_seconds",
		Help:           "Time from a gang's first member reservation to all the members allowed at its quorum (minMember) bound, rejected rounds included.",
		Buckets:        metrics.ExponentialBuckets(0.01, 2, 16),
		StabilityLevel: metrics.ALPHA,
	})

	// GangPreemptionEvictionDuration is how long a gang preemption's evictions took, sent
	// after the cycle that decided them.
	GangPreemptionEvictionDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      namespace,
		Name:           "gang_preemption_eviction_duration_seconds",
		Help:           "Duration of one gang preemption's evictions, sent after the scheduling cycle that chose the victims, by result: evicted, failed (an eviction failed; the gang's nominations are withdrawn and it is retried) or stopped (the preemption ended before all were sent: its time limit, its PodGroup deleted, its victims gone otherwise, or the scheduler stopped).",
		Buckets:        metrics.ExponentialBuckets(0.01, 2, 14),
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	// GangStateViolationsTotal counts the gang phase changes that the gang state's table does
	// not allow: a defect of the scheduler (its log says which gang and change).
	GangStateViolationsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Name:           "gang_state_violations_total",
		Help:           "Changes of a gang's phase that the table of the gangs' life (docs/design.md) does not allow, by the event that made them: a defect of the scheduler, 0 in a healthy one; its log names the gang and the phases.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"event"})

	// HoldsStartedTotal counts the holds taken: a gang that waited began holding a domain, or
	// moved its hold to another.
	HoldsStartedTotal = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      namespace,
		Name:           "holds_started_total",
		Help:           "Holds taken: a gang that could not be placed and waited began holding a network domain, or moved its hold to another domain.",
		StabilityLevel: metrics.ALPHA,
	})

	// HoldsEndedTotal counts the holds that ended, by reason (gangstate.HoldEndReasons).
	HoldsEndedTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Name:           "holds_ended_total",
		Help:           "Holds that ended, by reason: Bound (the gang runs), Deleted (its PodGroup), TimedOut (hold.timeoutSeconds), Impossible (the gang cannot fit even when every pod of its priority or lower finishes), Displaced (a gang before it in queue order took its nodes or its share), Moved (it holds another domain now), Disabled (its PodGroup turned holds off), Abandoned (no member of the gang waits, pending or reserved), Gated (its members are held back before scheduling).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})

	// HoldDurationSeconds is how long holds lasted, by how they ended.
	HoldDurationSeconds = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      namespace,
		Name:           "hold_duration_seconds",
		Help:           "How long a hold on a network domain lasted, from the gang's first hold of it to its end, by reason (as hypernode_holds_ended_total).",
		Buckets:        metrics.ExponentialBuckets(1, 2, 14),
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})

	gangsDesc = metrics.NewDesc(namespace+"_gangs",
		"Gangs (PodGroups with members) by phase: what each waits for in this scheduler (Pending, WaitingForMembers, Planned, Reserving, Binding, Running, Holding, HeldAtGate, WaitingForRoom, Unplannable, Blocked, Preempting).",
		[]string{"phase"}, nil, metrics.ALPHA, "")
	gangsGatedDesc = metrics.NewDesc(namespace+"_gangs_gated",
		"Gangs with members held back in PreEnqueue, by reason: InTwoPodGroups (a member also names a native pod group), PodGroupMissing, WaitingForMembers (fewer than minMember members exist), InvalidSubGroupPolicy, InvalidSubGroupMember, InvalidHoldAnnotation, WaitingForResourceClaims (a pending member's ResourceClaim from a template does not exist yet).",
		[]string{"reason"}, nil, metrics.ALPHA, "")
	heldNodesDesc = metrics.NewDesc(namespace+"_held_nodes",
		"Nodes whose room a hold keeps for a waiting gang: pods after the gang in queue order do not take the room it needs there.",
		nil, nil, metrics.ALPHA, "")
	devicesDesc = metrics.NewDesc(namespace+"_devices",
		"DRA devices of the nodes' own ResourceSlices by DeviceClass and state: allocated (held by an allocated ResourceClaim) or free. A device two classes select counts in both.",
		[]string{"class", "state"}, nil, metrics.ALPHA, "")
	excludedDesc = metrics.NewDesc(namespace+"_excluded_hypernodes",
		"HyperNodes that topology placement does not use, by reason: the reason of the HyperNode's own problem (as in its Events) or AncestorExcluded when it lies below an excluded HyperNode.",
		[]string{"reason"}, nil, metrics.ALPHA, "")

	registerOnce sync.Once
	gauges       = &stateCollector{sources: map[*Source]struct{}{}}
)

// Register registers the metrics in the legacy registry; later calls do nothing.
func Register() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(PlanDuration, PlansTotal, PlanReusesTotal, MemberRelocationsTotal, PlanSimulatedNodes,
			PlacementsTotal, GangsWaitingInPermit, GangSchedulingDuration, GangPreemptionEvictionDuration, GangStateViolationsTotal,
			HoldsStartedTotal, HoldsEndedTotal, HoldDurationSeconds)
		legacyregistry.CustomMustRegister(gauges)
	})
}

// ObservePlan records one plan: its result, duration and the nodes it simulated.
func ObservePlan(result string, d time.Duration, simulatedNodes int) {
	PlanDuration.WithLabelValues(result).Observe(d.Seconds())
	PlansTotal.WithLabelValues(result).Inc()
	PlanSimulatedNodes.Observe(float64(simulatedNodes))
}

// ObserveGangPreemptionEviction records one gang preemption's evictions.
func ObserveGangPreemptionEviction(result string, d time.Duration) {
	GangPreemptionEvictionDuration.WithLabelValues(result).Observe(d.Seconds())
}

// ObservePlacement records a gang planned into a domain of tier.
func ObservePlacement(tier int, soft bool) {
	mode := ModeHard
	if soft {
		mode = ModeSoft
	}
	PlacementsTotal.WithLabelValues(strconv.Itoa(tier), mode).Inc()
}
