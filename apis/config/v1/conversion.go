package v1

import (
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
)

// The versioned args use pointers so that defaulting can tell "unset" from "zero"; the
// internal args are plain values that are always defaulted. These conversions bridge the
// optional sub-structs and the named strategy type, which conversion-gen cannot.

// Convert_v1_NetworkTopologyAwareArgs_To_config_NetworkTopologyAwareArgs converts versioned args to internal ones.
func Convert_v1_NetworkTopologyAwareArgs_To_config_NetworkTopologyAwareArgs(in *NetworkTopologyAwareArgs, out *config.NetworkTopologyAwareArgs, s conversion.Scope) error {
	if err := autoConvert_v1_NetworkTopologyAwareArgs_To_config_NetworkTopologyAwareArgs(in, out, s); err != nil {
		return err
	}
	out.HyperNodeBinPack = config.HyperNodeBinPackArgs{}
	if in.HyperNodeBinPack != nil {
		if err := Convert_v1_HyperNodeBinPackArgs_To_config_HyperNodeBinPackArgs(in.HyperNodeBinPack, &out.HyperNodeBinPack, s); err != nil {
			return err
		}
	}
	out.NormalPod = config.NormalPodArgs{}
	if in.NormalPod != nil {
		if err := Convert_v1_NormalPodArgs_To_config_NormalPodArgs(in.NormalPod, &out.NormalPod, s); err != nil {
			return err
		}
	}
	out.CandidateScoringStrategy = config.CandidateScoringStrategy(ptr.Deref(in.CandidateScoringStrategy, ""))
	return nil
}

// Convert_config_NetworkTopologyAwareArgs_To_v1_NetworkTopologyAwareArgs converts internal args to versioned ones.
func Convert_config_NetworkTopologyAwareArgs_To_v1_NetworkTopologyAwareArgs(in *config.NetworkTopologyAwareArgs, out *NetworkTopologyAwareArgs, s conversion.Scope) error {
	if err := autoConvert_config_NetworkTopologyAwareArgs_To_v1_NetworkTopologyAwareArgs(in, out, s); err != nil {
		return err
	}
	out.HyperNodeBinPack = &HyperNodeBinPackArgs{}
	if err := Convert_config_HyperNodeBinPackArgs_To_v1_HyperNodeBinPackArgs(&in.HyperNodeBinPack, out.HyperNodeBinPack, s); err != nil {
		return err
	}
	out.NormalPod = &NormalPodArgs{}
	if err := Convert_config_NormalPodArgs_To_v1_NormalPodArgs(&in.NormalPod, out.NormalPod, s); err != nil {
		return err
	}
	out.CandidateScoringStrategy = ptr.To(string(in.CandidateScoringStrategy))
	return nil
}

// Convert_v1_GangArgs_To_config_GangArgs converts versioned args to internal ones.
func Convert_v1_GangArgs_To_config_GangArgs(in *GangArgs, out *config.GangArgs, s conversion.Scope) error {
	if err := autoConvert_v1_GangArgs_To_config_GangArgs(in, out, s); err != nil {
		return err
	}
	out.Hold = config.GangHoldArgs{}
	if in.Hold != nil {
		return Convert_v1_GangHoldArgs_To_config_GangHoldArgs(in.Hold, &out.Hold, s)
	}
	return nil
}

// Convert_config_GangArgs_To_v1_GangArgs converts internal args to versioned ones.
func Convert_config_GangArgs_To_v1_GangArgs(in *config.GangArgs, out *GangArgs, s conversion.Scope) error {
	if err := autoConvert_config_GangArgs_To_v1_GangArgs(in, out, s); err != nil {
		return err
	}
	out.Hold = &GangHoldArgs{}
	return Convert_config_GangHoldArgs_To_v1_GangHoldArgs(&in.Hold, out.Hold, s)
}
