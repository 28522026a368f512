package scheme

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
)

// loadArgs decodes a KubeSchedulerConfiguration file the way the kube-scheduler binary does
// and returns the args of each plugin of the first profile.
func loadArgs(t *testing.T, yaml string) (map[string]any, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	logger, _ := ktesting.NewTestContext(t)
	cfg, err := options.LoadConfigFromFile(logger, path)
	if err != nil {
		return nil, err
	}
	return pluginArgs(cfg.Profiles[0]), nil
}

func pluginArgs(profile schedconfig.KubeSchedulerProfile) map[string]any {
	got := map[string]any{}
	for _, pc := range profile.PluginConfig {
		switch args := pc.Args.(type) {
		case *config.GangArgs, *config.NetworkTopologyAwareArgs:
			got[pc.Name] = args
		}
	}
	return got
}

const header = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: hypernode-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Gang
      - name: NetworkTopologyAware
`

func TestDecodeDefaultsAndConversion(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want map[string]any
	}{
		{
			name: "no pluginConfig: both plugins get their defaults",
			yaml: header,
			want: map[string]any{
				"Gang": &config.GangArgs{DefaultScheduleTimeoutSeconds: 60,
					Hold: config.GangHoldArgs{WaitSeconds: 120, TimeoutSeconds: 1800, MaxNodesPercent: 50}},
				"NetworkTopologyAware": &config.NetworkTopologyAwareArgs{
					HyperNodeBinPack: config.HyperNodeBinPackArgs{CPU: 1, Memory: 1,
						Resources: map[v1.ResourceName]int64{"nvidia.com/gpu": 2, "amd.com/gpu": 2,
							"deviceclass.resource.kubernetes.io/gpu.nvidia.com": 2, "deviceclass.resource.kubernetes.io/gpu.amd.com": 2}},
					NormalPod:                config.NormalPodArgs{Enable: true, Fading: 0.8},
					CandidateScoringStrategy: config.BinPack,
				},
			},
		},
		{
			name: "an empty list of extended resources weighs none",
			yaml: header + `  pluginConfig:
  - name: NetworkTopologyAware
    args:
      hyperNodeBinPack:
        resources: {}
`,
			want: map[string]any{
				"Gang": &config.GangArgs{DefaultScheduleTimeoutSeconds: 60,
					Hold: config.GangHoldArgs{WaitSeconds: 120, TimeoutSeconds: 1800, MaxNodesPercent: 50}},
				"NetworkTopologyAware": &config.NetworkTopologyAwareArgs{
					HyperNodeBinPack: config.HyperNodeBinPackArgs{CPU: 1, Memory: 1,
						Resources: map[v1.ResourceName]int64{}},
					NormalPod:                config.NormalPodArgs{Enable: true, Fading: 0.8},
					CandidateScoringStrategy: config.BinPack,
				},
			},
		},
		{
			name: "explicit values are kept, missing ones defaulted",
			yaml: header + `  pluginConfig:
  - name: Gang
    args:
      defaultScheduleTimeoutSeconds: 15
      hold:
        waitSeconds: 0
        maxNodesPercent: 30
  - name: NetworkTopologyAware
    args:
      hyperNodeBinPack:
        cpu: 0
        resources:
          nvidia.com/gpu: 5
      normalPod:
        enable: false
      candidateScoringStrategy: LeastWaste
      defaultNetworkTopology:
        mode: soft
        highestTierAllowed: 2
`,
			want: map[string]any{
				"Gang": &config.GangArgs{DefaultScheduleTimeoutSeconds: 15,
					Hold: config.GangHoldArgs{WaitSeconds: 0, TimeoutSeconds: 1800, MaxNodesPercent: 30}},
				"NetworkTopologyAware": &config.NetworkTopologyAwareArgs{
					HyperNodeBinPack: config.HyperNodeBinPackArgs{
						CPU: 0, Memory: 1,
						Resources: map[v1.ResourceName]int64{"nvidia.com/gpu": 5},
					},
					NormalPod:                config.NormalPodArgs{Enable: false, Fading: 0.8},
					CandidateScoringStrategy: config.LeastWaste,
					DefaultNetworkTopology:   &config.NetworkTopologyConstraint{Mode: "soft", HighestTierAllowed: ptr.To[int32](2)},
				},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := loadArgs(t, tc.yaml)
			if err != nil {
				t.Fatalf("decoding: %v", err)
			}
			// TypeMeta is whatever the conversion left; compare the content only.
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreTypes(metav1.TypeMeta{})); diff != "" {
				t.Errorf("unexpected args (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestDecodeIsStrict(t *testing.T) {
	_, err := loadArgs(t, header+`  pluginConfig:
  - name: NetworkTopologyAware
    args:
      candidateScoringStrategie: LeastWaste
`)
	if err == nil {
		t.Fatal("a misspelled field decoded without error")
	}
	if want := `unknown field "candidateScoringStrategie"`; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not mention %q", err, want)
	}
}

// TestUserGuideProfileIsTheShippedOne: the profile docs/user-guide.md tells users to copy
// enables the plugins at the same extension points, in the same order, as the shipped
// config.yaml (its optional queue sort aside): an order the shipped profile relies on and the
// copy lacks would bring back the race it prevents.
func TestUserGuideProfileIsTheShippedOne(t *testing.T) {
	guide, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "user-guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(guide)
	if i := strings.Index(section, "## Custom configurations"); i >= 0 {
		section = section[i:]
	} else {
		t.Fatal(`docs/user-guide.md has no "## Custom configurations" section`)
	}
	start := strings.Index(section, "```yaml\n")
	end := strings.Index(section[start+8:], "```")
	if start < 0 || end < 0 {
		t.Fatal("no YAML block in the Custom configurations section")
	}
	shipped, err := os.ReadFile(filepath.Join("..", "..", "..", "manifests", "scheduler", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	plugins := func(name, yaml string) *schedconfig.Plugins {
		t.Helper()
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		logger, _ := ktesting.NewTestContext(t)
		cfg, err := options.LoadConfigFromFile(logger, path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p := cfg.Profiles[0].Plugins
		p.QueueSort = schedconfig.PluginSet{}
		return p
	}
	if diff := cmp.Diff(plugins("config.yaml", string(shipped)), plugins("guide.yaml", section[start+8:start+8+end])); diff != "" {
		t.Errorf("the user guide's profile (-shipped,+guide):\n%s", diff)
	}
}
