// Package validation validates this project's plugin args, the way kube-scheduler's
// pkg/scheduler/apis/config/validation validates the in-tree ones.
package validation

import (
	"fmt"
	"math"

	v1 "k8s.io/api/core/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// MaxBinPackWeight bounds each bin-pack weight so the weighted sums cannot overflow.
const MaxBinPackWeight int64 = 100

// ValidateGangArgs validates the Gang plugin's args.
func ValidateGangArgs(path *field.Path, args *config.GangArgs) error {
	var allErrs field.ErrorList
	if t := args.DefaultScheduleTimeoutSeconds; t <= 0 || t > config.MaxScheduleTimeoutSeconds {
		allErrs = append(allErrs, field.Invalid(path.Child("defaultScheduleTimeoutSeconds"), t,
			fmt.Sprintf("must be greater than 0 and at most %d (kube-scheduler rejects a pod that waits 15 minutes in Permit)", config.MaxScheduleTimeoutSeconds)))
	}
	hold := path.Child("hold")
	if w := args.Hold.WaitSeconds; w < 0 {
		allErrs = append(allErrs, field.Invalid(hold.Child("waitSeconds"), w, "must be 0 (no holds) or more"))
	}
	if t := args.Hold.TimeoutSeconds; t <= 0 {
		allErrs = append(allErrs, field.Invalid(hold.Child("timeoutSeconds"), t, "must be greater than 0"))
	}
	if p := args.Hold.MaxNodesPercent; p < 0 || p > 100 {
		allErrs = append(allErrs, field.Invalid(hold.Child("maxNodesPercent"), p, "must be between 0 and 100"))
	}
	return allErrs.ToAggregate()
}

// ValidateNetworkTopologyAwareArgs validates the NetworkTopologyAware plugin's args.
func ValidateNetworkTopologyAwareArgs(path *field.Path, args *config.NetworkTopologyAwareArgs) error {
	var allErrs field.ErrorList
	allErrs = append(allErrs, validateBinPack(path.Child("hyperNodeBinPack"), &args.HyperNodeBinPack)...)

	fadingPath := path.Child("normalPod", "fading")
	if f := args.NormalPod.Fading; math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		allErrs = append(allErrs, field.Invalid(fadingPath, f, "must be a finite number greater than or equal to 0"))
	}

	switch args.CandidateScoringStrategy {
	case config.BinPack, config.LeastWaste:
	default:
		allErrs = append(allErrs, field.NotSupported(path.Child("candidateScoringStrategy"),
			args.CandidateScoringStrategy, []string{string(config.BinPack), string(config.LeastWaste)}))
	}
	// The same rules as the hypernode.dev/network-topology annotation.
	if _, err := podgroup.TopologyFromArgs(args.DefaultNetworkTopology); err != nil {
		allErrs = append(allErrs, field.Invalid(path.Child("defaultNetworkTopology"), *args.DefaultNetworkTopology, err.Error()))
	}
	return allErrs.ToAggregate()
}

func validateBinPack(path *field.Path, args *config.HyperNodeBinPackArgs) field.ErrorList {
	var allErrs field.ErrorList
	total := int64(0)
	check := func(p *field.Path, weight int64) {
		if weight < 0 || weight > MaxBinPackWeight {
			allErrs = append(allErrs, field.Invalid(p, weight, fmt.Sprintf("must be in the range [0, %d]", MaxBinPackWeight)))
			return
		}
		total += weight
	}
	check(path.Child("cpu"), args.CPU)
	check(path.Child("memory"), args.Memory)
	resourcesPath := path.Child("resources")
	for name, weight := range args.Resources {
		p := resourcesPath.Key(string(name))
		if name == v1.ResourceCPU || name == v1.ResourceMemory {
			allErrs = append(allErrs, field.Invalid(p, name, "cpu and memory are weighed by the cpu and memory fields"))
			continue
		}
		for _, msg := range metav1validation.ValidateLabelName(string(name), p) {
			allErrs = append(allErrs, field.Invalid(p, name, "must be a qualified resource name: "+msg.Detail))
		}
		check(p, weight)
	}
	if len(allErrs) == 0 && total == 0 {
		allErrs = append(allErrs, field.Invalid(path, "all weights 0", "at least one resource weight must be greater than 0"))
	}
	return allErrs
}
