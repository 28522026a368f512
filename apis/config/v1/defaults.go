package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Default values of the plugin args, as documented in docs/user-guide.md.
const (
	DefaultScheduleTimeoutSeconds   int64   = 60
	DefaultBinPackCPUWeight         int64   = 1
	DefaultBinPackMemoryWeight      int64   = 1
	DefaultNormalPodFading          float64 = 0.8
	DefaultCandidateScoringStrategy         = "BinPack"
	// DefaultBinPackGPUWeight is the weight of each resource of DefaultBinPackResources.
	DefaultBinPackGPUWeight int64 = 2
	// DefaultHoldWaitSeconds: a gang that cannot be placed holds a domain after two minutes,
	// a few scheduling retries of small jobs that come and go.
	DefaultHoldWaitSeconds int64 = 120
	// DefaultHoldTimeoutSeconds: a hold that has not let its gang bind in 30 minutes ends
	// (its gang may hold again).
	DefaultHoldTimeoutSeconds int64 = 1800
	// DefaultHoldMaxNodesPercent: holds take at most half of the cluster's nodes together.
	DefaultHoldMaxNodesPercent int32 = 50
)

// DefaultBinPackResources are the extended resources weighed when the args list none: the
// GPUs of NVIDIA's and AMD's device plugins, and the devices of their DRA drivers' classes
// (gpu.nvidia.com, gpu.amd.com; a class's devices count as its resource). Without them, a
// gang whose pods request only GPUs (the usual training pod) would score 0 in every
// HyperNode and be placed by name.
func DefaultBinPackResources() map[corev1.ResourceName]int64 {
	return map[corev1.ResourceName]int64{
		"nvidia.com/gpu": DefaultBinPackGPUWeight, "amd.com/gpu": DefaultBinPackGPUWeight,
		"deviceclass.resource.kubernetes.io/gpu.nvidia.com": DefaultBinPackGPUWeight,
		"deviceclass.resource.kubernetes.io/gpu.amd.com":    DefaultBinPackGPUWeight,
	}
}

// SetDefaults_GangArgs sets the default schedule timeout and the holds of waiting gangs.
func SetDefaults_GangArgs(obj *GangArgs) {
	if obj.DefaultScheduleTimeoutSeconds == nil {
		obj.DefaultScheduleTimeoutSeconds = ptr.To(DefaultScheduleTimeoutSeconds)
	}
	if obj.Hold == nil {
		obj.Hold = &GangHoldArgs{}
	}
	if obj.Hold.WaitSeconds == nil {
		obj.Hold.WaitSeconds = ptr.To(DefaultHoldWaitSeconds)
	}
	if obj.Hold.TimeoutSeconds == nil {
		obj.Hold.TimeoutSeconds = ptr.To(DefaultHoldTimeoutSeconds)
	}
	if obj.Hold.MaxNodesPercent == nil {
		obj.Hold.MaxNodesPercent = ptr.To(DefaultHoldMaxNodesPercent)
	}
}

// SetDefaults_NetworkTopologyAwareArgs sets Volcano's defaults (cpu and memory weigh 1,
// normal-pod scoring is on with fading 0.8, candidates are chosen by bin-pack) and, unlike
// Volcano, weighs the GPUs of DefaultBinPackResources when no extended resource is listed
// (an empty list, `resources: {}`, weighs none).
func SetDefaults_NetworkTopologyAwareArgs(obj *NetworkTopologyAwareArgs) {
	if obj.HyperNodeBinPack == nil {
		obj.HyperNodeBinPack = &HyperNodeBinPackArgs{}
	}
	if obj.HyperNodeBinPack.CPU == nil {
		obj.HyperNodeBinPack.CPU = ptr.To(DefaultBinPackCPUWeight)
	}
	if obj.HyperNodeBinPack.Memory == nil {
		obj.HyperNodeBinPack.Memory = ptr.To(DefaultBinPackMemoryWeight)
	}
	if obj.HyperNodeBinPack.Resources == nil {
		obj.HyperNodeBinPack.Resources = DefaultBinPackResources()
	}
	if obj.NormalPod == nil {
		obj.NormalPod = &NormalPodArgs{}
	}
	if obj.NormalPod.Enable == nil {
		obj.NormalPod.Enable = ptr.To(true)
	}
	if obj.NormalPod.Fading == nil {
		obj.NormalPod.Fading = ptr.To(DefaultNormalPodFading)
	}
	if obj.CandidateScoringStrategy == nil {
		obj.CandidateScoringStrategy = ptr.To(DefaultCandidateScoringStrategy)
	}
}
