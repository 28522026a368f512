package config

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// GangArgs are the arguments of the Gang plugin.
type GangArgs struct {
	metav1.TypeMeta

	// DefaultScheduleTimeoutSeconds is how long the members of a gang wait in Permit for the
	// rest of the gang when the PodGroup does not set spec.scheduleTimeoutSeconds.
	DefaultScheduleTimeoutSeconds int64
	// Hold says when a gang that cannot be placed holds a network domain for itself, so that
	// pods that come after it do not take the room it waits for (docs/design.md, "Holds").
	Hold GangHoldArgs
}

// GangHoldArgs configure the holds of gangs that wait.
type GangHoldArgs struct {
	// WaitSeconds: a gang that cannot be placed holds a domain once its PodGroup is this many
	// seconds old (a PodGroup's hypernode.dev/hold-after annotation overrides it); 0 turns
	// holds off.
	WaitSeconds int64
	// TimeoutSeconds: a hold that has not let its gang bind ends after this long.
	TimeoutSeconds int64
	// MaxNodesPercent bounds the share of the cluster's nodes that holds take together; the
	// hold of the gang that comes first in queue order is never refused for it.
	MaxNodesPercent int32
}

// MaxScheduleTimeoutSeconds is the longest schedule timeout a gang can have: kube-scheduler
// rejects a pod that has waited 15 minutes in Permit, and Gang decides 30 seconds before
// that limit, so that a gang's own deadline, not the framework's timer, ends its wait. A
// PodGroup that asks for more waits this long (its GangWaiting Event says so).
const MaxScheduleTimeoutSeconds int64 = 15*60 - 30

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NetworkTopologyAwareArgs are the arguments of the NetworkTopologyAware plugin.
type NetworkTopologyAwareArgs struct {
	metav1.TypeMeta

	// HyperNodeBinPack weighs the resources in the bin-pack score of candidate HyperNodes
	// (docs/design.md): score = sum_r w_r*(used_r+req_r)/alloc_r / sum_r w_r.
	HyperNodeBinPack HyperNodeBinPackArgs
	// NormalPod configures the scoring of pods without a topology constraint.
	NormalPod NormalPodArgs
	// CandidateScoringStrategy chooses among the HyperNodes of one tier that can all host a gang.
	CandidateScoringStrategy CandidateScoringStrategy
	// DefaultNetworkTopology is the constraint of PodGroups that say nothing of topology (no
	// hypernode.dev/network-topology annotation, no sub-group policy with a constraint); nil
	// leaves them plain gangs.
	DefaultNetworkTopology *NetworkTopologyConstraint
}

// NetworkTopologyConstraint is a network topology constraint, in the annotation's shape (the
// JSON names make validation messages read as the user wrote the value).
type NetworkTopologyConstraint struct {
	// Mode is hard or soft; empty means hard.
	Mode string `json:"mode,omitempty"`
	// HighestTierAllowed is the highest tier the gang may span.
	HighestTierAllowed *int32 `json:"highestTierAllowed,omitempty"`
	// HighestTierName names that tier instead (a HyperNode tierName).
	HighestTierName string `json:"highestTierName,omitempty"`
}

// HyperNodeBinPackArgs are the per-resource weights of the HyperNode bin-pack score.
type HyperNodeBinPackArgs struct {
	// CPU is the weight of cpu.
	CPU int64
	// Memory is the weight of memory.
	Memory int64
	// Resources are the weights of other resources, such as nvidia.com/gpu.
	Resources map[v1.ResourceName]int64
}

// NormalPodArgs configure the scoring of pods that carry no topology constraint.
type NormalPodArgs struct {
	// Enable turns on the tier-weighted fading bin-pack score for such pods.
	Enable bool
	// Fading is the factor by which the weight of each higher tier shrinks: the tiers present
	// weigh Fading^rank, rank 0 for the lowest.
	Fading float64
}

// CandidateScoringStrategy names how the planner chooses among candidate HyperNodes.
type CandidateScoringStrategy string

const (
	// BinPack prefers the candidate whose resources would be the most used (Volcano's choice).
	BinPack CandidateScoringStrategy = "BinPack"
	// LeastWaste prefers the candidate whose capacity exceeds the gang's demand the least
	// (Koordinator's and Kueue's best fit).
	LeastWaste CandidateScoringStrategy = "LeastWaste"
)
