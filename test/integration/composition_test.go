package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/composition"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// schedulerConfigWith is the test scheduler's configuration (manifests/scheduler/config.yaml
// for the test control plane) with the profile's plugins replaced by the given YAML.
func schedulerConfigWith(t *testing.T, plugins string) string {
	t.Helper()
	base, err := util.SchedulerConfig(controlPlane, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{}
	if err := yaml.Unmarshal([]byte(base), &cfg); err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := yaml.Unmarshal([]byte(plugins), &p); err != nil {
		t.Fatal(err)
	}
	profile := cfg["profiles"].([]any)[0].(map[string]any)
	profile["plugins"] = p
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestMinimalProfileIsRefused: the profile most users write first, multiPoint [Gang,
// NetworkTopologyAware], leaves kube-scheduler's DefaultPreemption on and releases a gang's
// waiting members before relocating a member: the scheduler does not start, and says why and
// what to write instead.
func TestMinimalProfileIsRefused(t *testing.T) {
	config := schedulerConfigWith(t, `
multiPoint:
  enabled:
  - name: Gang
  - name: NetworkTopologyAware
`)
	sched, err := util.StartScheduler(context.Background(), config)
	if err == nil {
		_ = sched.Stop()
		t.Fatal("the scheduler started with an unsafe profile")
	}
	want := composition.Error("hypernode-scheduler", []string{
		"DefaultPreemption runs with Gang (kube-scheduler enables it unless it is disabled): it preempts for one gang member at a time and evicts pods for a gang that still cannot run, or finds nothing worth evicting for a gang that would fit after one eviction; disable DefaultPreemption and enable GangPreemption",
		"NetworkTopologyAware's PostFilter runs after Gang's: a member whose planned node was taken would release its gang's waiting members before it is moved to a free node of the domain; name NetworkTopologyAware before Gang under postFilter: enabled",
	}).Error()
	if !strings.Contains(err.Error(), want) {
		t.Errorf("refusal:\n%v\nwant it to contain:\n%s", err, want)
	}
	if n := strings.Count(err.Error(), "composes hypernode-scheduler's plugins unsafely"); n != 1 {
		t.Errorf("the refusal is reported %d times, want once", n)
	}
}

// TestUserGuideConfigurationsStart: every KubeSchedulerConfiguration in docs/user-guide.md,
// read from the file, starts the scheduler (with the test control plane's kubeconfig and
// leader election off).
func TestUserGuideConfigurationsStart(t *testing.T) {
	guide, err := os.ReadFile(filepath.Join(util.RepoRoot(), "docs", "user-guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	connection, err := util.SchedulerClientConnection(controlPlane)
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for i, block := range strings.Split(string(guide), "```yaml\n")[1:] {
		block = block[:strings.Index(block, "```")]
		if !strings.Contains(block, "kind: KubeSchedulerConfiguration") {
			continue
		}
		blocks++
		cfg := map[string]any{}
		if err := yaml.Unmarshal([]byte(block), &cfg); err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		cfg["clientConnection"] = connection
		cfg["leaderElection"] = map[string]any{"leaderElect": false}
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		sched, err := util.StartScheduler(context.Background(), string(out))
		if err != nil {
			t.Errorf("the user guide's configuration %d does not start:\n%s\n%v", blocks, block, err)
			continue
		}
		if err := sched.Stop(); err != nil {
			t.Error(err)
		}
	}
	if blocks == 0 {
		t.Fatal("no KubeSchedulerConfiguration in docs/user-guide.md")
	}
}
