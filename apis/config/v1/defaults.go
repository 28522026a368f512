package v1

import "k8s.io/utils/ptr"

// Default values of the plugin args, as documented in docs/user-guide.md.
const (
	DefaultScheduleTimeoutSeconds   int64   = 60
	DefaultBinPackCPUWeight         int64   = 1
	DefaultBinPackMemoryWeight      int64   = 1
	DefaultNormalPodFading          float64 = 0.8
	DefaultCandidateScoringStrategy         = "BinPack"
)

// SetDefaults_GangArgs sets the default schedule timeout.
func SetDefaults_GangArgs(obj *GangArgs) {
	if obj.DefaultScheduleTimeoutSeconds == nil {
		obj.DefaultScheduleTimeoutSeconds = ptr.To(DefaultScheduleTimeoutSeconds)
	}
}

// SetDefaults_NetworkTopologyAwareArgs sets Volcano's defaults: cpu and memory weigh 1,
// normal-pod scoring is on with fading 0.8, and candidates are chosen by bin-pack.
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
