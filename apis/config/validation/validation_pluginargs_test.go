package validation

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
)

func validNetworkTopologyAwareArgs() config.NetworkTopologyAwareArgs {
	return config.NetworkTopologyAwareArgs{
		HyperNodeBinPack:         config.HyperNodeBinPackArgs{CPU: 1, Memory: 1},
		NormalPod:                config.NormalPodArgs{Enable: true, Fading: 0.8},
		CandidateScoringStrategy: config.BinPack,
	}
}

func TestValidateNetworkTopologyAwareArgs(t *testing.T) {
	tests := []struct {
		name    string
		modify  func(*config.NetworkTopologyAwareArgs)
		wantErr string
	}{
		{
			name:   "defaults are valid",
			modify: func(*config.NetworkTopologyAwareArgs) {},
		},
		{
			name: "LeastWaste and an extended resource weight are valid",
			modify: func(a *config.NetworkTopologyAwareArgs) {
				a.CandidateScoringStrategy = config.LeastWaste
				a.HyperNodeBinPack.Resources = map[v1.ResourceName]int64{"nvidia.com/gpu": 5}
				a.NormalPod.Fading = 0
			},
		},
		{
			name: "a default constraint",
			modify: func(a *config.NetworkTopologyAwareArgs) {
				a.DefaultNetworkTopology = &config.NetworkTopologyConstraint{Mode: "soft", HighestTierAllowed: ptr.To[int32](1)}
			},
		},
		{
			name: "a default constraint that the annotation's rules refuse",
			modify: func(a *config.NetworkTopologyAwareArgs) {
				a.DefaultNetworkTopology = &config.NetworkTopologyConstraint{Mode: "hard"}
			},
			wantErr: `args.defaultNetworkTopology: Invalid value: {"mode":"hard"}: mode hard needs highestTierAllowed or highestTierName`,
		},
		{
			name: "only an extended resource weighs",
			modify: func(a *config.NetworkTopologyAwareArgs) {
				a.HyperNodeBinPack = config.HyperNodeBinPackArgs{Resources: map[v1.ResourceName]int64{"nvidia.com/gpu": 1}}
			},
		},
		{
			name:    "negative fading",
			modify:  func(a *config.NetworkTopologyAwareArgs) { a.NormalPod.Fading = -0.5 },
			wantErr: "args.normalPod.fading: Invalid value: -0.5: must be a finite number greater than or equal to 0",
		},
		{
			name:    "NaN fading (YAML .nan)",
			modify:  func(a *config.NetworkTopologyAwareArgs) { a.NormalPod.Fading = math.NaN() },
			wantErr: "args.normalPod.fading: Invalid value: NaN: must be a finite number greater than or equal to 0",
		},
		{
			name:    "infinite fading (YAML .inf)",
			modify:  func(a *config.NetworkTopologyAwareArgs) { a.NormalPod.Fading = math.Inf(1) },
			wantErr: "args.normalPod.fading: Invalid value: +Inf: must be a finite number greater than or equal to 0",
		},
		{
			name:   "fading above 1 (higher tiers weigh more)",
			modify: func(a *config.NetworkTopologyAwareArgs) { a.NormalPod.Fading = 4 },
		},
		{
			name:    "unknown strategy",
			modify:  func(a *config.NetworkTopologyAwareArgs) { a.CandidateScoringStrategy = "MostAllocated" },
			wantErr: `args.candidateScoringStrategy: Unsupported value: "MostAllocated": supported values: "BinPack", "LeastWaste"`,
		},
		{
			name:    "negative cpu weight",
			modify:  func(a *config.NetworkTopologyAwareArgs) { a.HyperNodeBinPack.CPU = -1 },
			wantErr: "args.hyperNodeBinPack.cpu: Invalid value: -1: must be in the range [0, 100]",
		},
		{
			name:    "memory weight too large",
			modify:  func(a *config.NetworkTopologyAwareArgs) { a.HyperNodeBinPack.Memory = 101 },
			wantErr: "args.hyperNodeBinPack.memory: Invalid value: 101: must be in the range [0, 100]",
		},
		{
			name: "all weights zero",
			modify: func(a *config.NetworkTopologyAwareArgs) {
				a.HyperNodeBinPack = config.HyperNodeBinPackArgs{Resources: map[v1.ResourceName]int64{"nvidia.com/gpu": 0}}
			},
			wantErr: `args.hyperNodeBinPack: Invalid value: "all weights 0": at least one resource weight must be greater than 0`,
		},
		{
			name: "cpu repeated in resources",
			modify: func(a *config.NetworkTopologyAwareArgs) {
				a.HyperNodeBinPack.Resources = map[v1.ResourceName]int64{"cpu": 3}
			},
			wantErr: `args.hyperNodeBinPack.resources[cpu]: Invalid value: "cpu": cpu and memory are weighed by the cpu and memory fields`,
		},
		{
			name: "bad resource name",
			modify: func(a *config.NetworkTopologyAwareArgs) {
				a.HyperNodeBinPack.Resources = map[v1.ResourceName]int64{"nvidia.com/gpu!": 1}
			},
			wantErr: `args.hyperNodeBinPack.resources[nvidia.com/gpu!]: Invalid value: "nvidia.com/gpu!": must be a qualified resource name: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := validNetworkTopologyAwareArgs()
			tc.modify(&args)
			err := ValidateNetworkTopologyAwareArgs(field.NewPath("args"), &args)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, got); diff != "" {
				t.Errorf("unexpected error (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestValidateGangArgs(t *testing.T) {
	const timeoutRange = "must be greater than 0 and at most 870 (kube-scheduler rejects a pod that waits 15 minutes in Permit)"
	valid := func() config.GangArgs {
		return config.GangArgs{DefaultScheduleTimeoutSeconds: 30,
			Hold: config.GangHoldArgs{WaitSeconds: 120, TimeoutSeconds: 1800, MaxNodesPercent: 50}}
	}
	tests := []struct {
		name    string
		change  func(*config.GangArgs)
		wantErr string
	}{
		{name: "positive", change: func(*config.GangArgs) {}},
		{name: "the longest", change: func(a *config.GangArgs) { a.DefaultScheduleTimeoutSeconds = 870 }},
		{name: "zero", change: func(a *config.GangArgs) { a.DefaultScheduleTimeoutSeconds = 0 },
			wantErr: "args.defaultScheduleTimeoutSeconds: Invalid value: 0: " + timeoutRange},
		{name: "negative", change: func(a *config.GangArgs) { a.DefaultScheduleTimeoutSeconds = -5 },
			wantErr: "args.defaultScheduleTimeoutSeconds: Invalid value: -5: " + timeoutRange},
		{name: "past kube-scheduler's Permit limit", change: func(a *config.GangArgs) { a.DefaultScheduleTimeoutSeconds = 871 },
			wantErr: "args.defaultScheduleTimeoutSeconds: Invalid value: 871: " + timeoutRange},
		{name: "holds off", change: func(a *config.GangArgs) { a.Hold.WaitSeconds = 0 }},
		{name: "holds may take every node", change: func(a *config.GangArgs) { a.Hold.MaxNodesPercent = 100 }},
		{name: "only the first gang holds", change: func(a *config.GangArgs) { a.Hold.MaxNodesPercent = 0 }},
		{name: "negative wait", change: func(a *config.GangArgs) { a.Hold.WaitSeconds = -1 },
			wantErr: "args.hold.waitSeconds: Invalid value: -1: must be 0 (no holds) or more"},
		{name: "zero hold timeout", change: func(a *config.GangArgs) { a.Hold.TimeoutSeconds = 0 },
			wantErr: "args.hold.timeoutSeconds: Invalid value: 0: must be greater than 0"},
		{name: "share above the cluster", change: func(a *config.GangArgs) { a.Hold.MaxNodesPercent = 101 },
			wantErr: "args.hold.maxNodesPercent: Invalid value: 101: must be between 0 and 100"},
		{name: "negative share", change: func(a *config.GangArgs) { a.Hold.MaxNodesPercent = -1 },
			wantErr: "args.hold.maxNodesPercent: Invalid value: -1: must be between 0 and 100"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := valid()
			tc.change(&args)
			err := ValidateGangArgs(field.NewPath("args"), &args)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, got); diff != "" {
				t.Errorf("unexpected error (-want,+got):\n%s", diff)
			}
		})
	}
}
