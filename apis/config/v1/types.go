package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:defaulter-gen=true
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// GangArgs are the arguments of the Gang plugin.
type GangArgs struct {
	metav1.TypeMeta `json:",inline"`

	// DefaultScheduleTimeoutSeconds is how long the members of a gang wait in Permit for the
	// rest of the gang when the PodGroup does not set spec.scheduleTimeoutSeconds.
	// Defaults to 60; at most 870 (kube-scheduler rejects a pod that waits 15 minutes in Permit).
	// +optional
	DefaultScheduleTimeoutSeconds *int64 `json:"defaultScheduleTimeoutSeconds,omitempty"`
	// Hold says when a gang that cannot be placed holds a network domain for itself, so that
	// pods that come after it in queue order do not take the room it waits for.
	// +optional
	Hold *GangHoldArgs `json:"hold,omitempty"`
}

// GangHoldArgs configure the holds of gangs that wait.
type GangHoldArgs struct {
	// WaitSeconds: a gang that cannot be placed holds a domain once its PodGroup is this many
	// seconds old; a PodGroup's hypernode.dev/hold-after annotation overrides it. 0 turns
	// holds off. Defaults to 120.
	// +optional
	WaitSeconds *int64 `json:"waitSeconds,omitempty"`
	// TimeoutSeconds: a hold that has not let its gang bind ends after this long. Defaults to
	// 1800.
	// +optional
	TimeoutSeconds *int64 `json:"timeoutSeconds,omitempty"`
	// MaxNodesPercent bounds the share of the cluster's nodes that holds take together; the
	// hold of the gang that comes first in queue order is never refused for it. Defaults to
	// 50.
	// +optional
	MaxNodesPercent *int32 `json:"maxNodesPercent,omitempty"`
}

// +k8s:defaulter-gen=true
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NetworkTopologyAwareArgs are the arguments of the NetworkTopologyAware plugin.
type NetworkTopologyAwareArgs struct {
	metav1.TypeMeta `json:",inline"`

	// HyperNodeBinPack weighs the resources in the bin-pack score of candidate HyperNodes.
	// +optional
	HyperNodeBinPack *HyperNodeBinPackArgs `json:"hyperNodeBinPack,omitempty"`
	// NormalPod configures the scoring of pods without a topology constraint.
	// +optional
	NormalPod *NormalPodArgs `json:"normalPod,omitempty"`
	// CandidateScoringStrategy chooses among the HyperNodes of one tier that can all host a
	// gang: BinPack or LeastWaste. Defaults to BinPack.
	// +optional
	CandidateScoringStrategy *string `json:"candidateScoringStrategy,omitempty"`
	// DefaultNetworkTopology is the constraint of PodGroups that say nothing of topology (no
	// hypernode.dev/network-topology annotation, no sub-group policy with a constraint of its
	// own), in the annotation's shape. Unset: such PodGroups are plain gangs. Every profile of
	// a scheduler must set the same one.
	// +optional
	DefaultNetworkTopology *NetworkTopologyConstraint `json:"defaultNetworkTopology,omitempty"`
}

// NetworkTopologyConstraint is a network topology constraint, in the shape of the
// hypernode.dev/network-topology annotation.
type NetworkTopologyConstraint struct {
	// Mode is hard (never span a higher tier) or soft (prefer the lowest tier). Defaults to
	// hard.
	// +optional
	Mode string `json:"mode,omitempty"`
	// HighestTierAllowed is the highest tier the gang may span; at least 1.
	// +optional
	HighestTierAllowed *int32 `json:"highestTierAllowed,omitempty"`
	// HighestTierName names that tier instead, by the HyperNodes' tierName.
	// +optional
	HighestTierName string `json:"highestTierName,omitempty"`
}

// HyperNodeBinPackArgs are the per-resource weights of the HyperNode bin-pack score.
type HyperNodeBinPackArgs struct {
	// CPU is the weight of cpu. Defaults to 1.
	// +optional
	CPU *int64 `json:"cpu,omitempty"`
	// Memory is the weight of memory. Defaults to 1.
	// +optional
	Memory *int64 `json:"memory,omitempty"`
	// Resources are the weights of other resources, for example {"nvidia.com/gpu": 2}.
	// Defaults, when absent, to nvidia.com/gpu, amd.com/gpu and the DRA classes gpu.nvidia.com
	// and gpu.amd.com (deviceclass.resource.kubernetes.io/<class>), 2 each; {} weighs none.
	// Not omitempty, so that an empty list survives encoding and is not defaulted again.
	// +optional
	Resources map[corev1.ResourceName]int64 `json:"resources"`
}

// NormalPodArgs configure the scoring of pods that carry no topology constraint.
type NormalPodArgs struct {
	// Enable turns on the tier-weighted fading bin-pack score for such pods. Defaults to true.
	// +optional
	Enable *bool `json:"enable,omitempty"`
	// Fading is the factor by which the weight of each higher tier shrinks: the tiers present
	// weigh fading^rank, rank 0 for the lowest. Defaults to 0.8; must be finite and >= 0.
	// +optional
	Fading *float64 `json:"fading,omitempty"`
}
