package integration

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// startScheduler starts the project's scheduler with the manifests' config (and the given
// plugin args instead of the manifests' ones) and stops it at the end of the test, unless the
// stop it returns was called before (a restart).
func startScheduler(t *testing.T, pluginArgs map[string]map[string]any) (stop func()) {
	t.Helper()
	config, err := util.SchedulerConfig(controlPlane, pluginArgs)
	if err != nil {
		t.Fatal(err)
	}
	sched, err := util.StartScheduler(context.Background(), config)
	if err != nil {
		t.Fatalf("starting the scheduler: %v", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if err := sched.Stop(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// testNamespace creates a namespace for the test and deletes its pods when the test ends.
func testNamespace(t *testing.T, c clients) string {
	t.Helper()
	ctx := context.Background()
	ns, err := util.CreateNamespace(ctx, c.kube, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := util.DeletePodsNow(ctx, c.kube, ns); err != nil {
			t.Error(err)
		}
		if err := util.DeleteClaimsNow(ctx, c.kube, ns); err != nil {
			t.Error(err)
		}
	})
	return ns
}

// withNodes creates nodes and deletes every node when the test ends.
func withNodes(t *testing.T, c clients, nodes ...string) {
	t.Helper()
	ctx := context.Background()
	for _, name := range nodes {
		if err := util.CreateNodes(ctx, c.kube, util.Node(name, "4", "16Gi", nil)); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if err := util.DeleteAllNodes(ctx, c.kube); err != nil {
			t.Error(err)
		}
	})
}

func TestSchedulerBindsPod(t *testing.T) {
	ctx := context.Background()
	c := newClients(t)
	ns := testNamespace(t, c)
	withNodes(t, c, "node-a")
	startScheduler(t, nil)

	pod := util.Pod(ns, "p0", plugins.SchedulerName, "1", nil)
	other := util.Pod(ns, "for-another-scheduler", "some-other-scheduler", "1", nil)
	if _, err := c.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.kube.CoreV1().Pods(ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := util.WaitForPodsBound(ctx, c.kube, ns, []string{"p0"}, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"p0": "node-a"}, got); diff != "" {
		t.Errorf("unexpected placement (-want,+got):\n%s", diff)
	}
	// The pod for another scheduler name is not ours to bind.
	bound, err := util.BoundPods(ctx, c.kube, ns)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"p0": "node-a"}, bound); diff != "" {
		t.Errorf("unexpected bound pods (-want,+got):\n%s", diff)
	}
}

func TestSchedulerRefusesInvalidPluginArgs(t *testing.T) {
	tests := []struct {
		name       string
		pluginArgs map[string]map[string]any
		wantErr    string
	}{
		{
			name:       "Gang timeout not positive",
			pluginArgs: map[string]map[string]any{"Gang": {"defaultScheduleTimeoutSeconds": 0}},
			wantErr:    `initializing plugin "Gang": defaultScheduleTimeoutSeconds: Invalid value: 0: must be greater than 0 and at most 870 (kube-scheduler rejects a pod that waits 15 minutes in Permit)`,
		},
		{
			name:       "Gang timeout past kube-scheduler's Permit limit",
			pluginArgs: map[string]map[string]any{"Gang": {"defaultScheduleTimeoutSeconds": 3600}},
			wantErr:    `initializing plugin "Gang": defaultScheduleTimeoutSeconds: Invalid value: 3600: must be greater than 0 and at most 870 (kube-scheduler rejects a pod that waits 15 minutes in Permit)`,
		},
		{
			name:       "unknown candidate strategy",
			pluginArgs: map[string]map[string]any{"NetworkTopologyAware": {"candidateScoringStrategy": "MostAllocated"}},
			wantErr:    `initializing plugin "NetworkTopologyAware": candidateScoringStrategy: Unsupported value: "MostAllocated": supported values: "BinPack", "LeastWaste"`,
		},
		{
			name:       "negative fading",
			pluginArgs: map[string]map[string]any{"NetworkTopologyAware": {"normalPod": map[string]any{"fading": -1}}},
			wantErr:    `initializing plugin "NetworkTopologyAware": normalPod.fading: Invalid value: -1: must be a finite number greater than or equal to 0`,
		},
		{
			name:       "all bin-pack weights zero",
			pluginArgs: map[string]map[string]any{"NetworkTopologyAware": {"hyperNodeBinPack": map[string]any{"cpu": 0, "memory": 0, "resources": map[string]any{}}}},
			wantErr:    `initializing plugin "NetworkTopologyAware": hyperNodeBinPack: Invalid value: "all weights 0": at least one resource weight must be greater than 0`,
		},
		{
			name:       "misspelled field",
			pluginArgs: map[string]map[string]any{"Gang": {"defaultScheduleTimeout": 10}},
			wantErr:    `unknown field "defaultScheduleTimeout"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			config, err := util.SchedulerConfig(controlPlane, tc.pluginArgs)
			if err != nil {
				t.Fatal(err)
			}
			sched, err := util.StartScheduler(context.Background(), config)
			if err == nil {
				_ = sched.Stop()
				t.Fatalf("the scheduler started with invalid args; want an error containing %q", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error does not contain %q:\n%v", tc.wantErr, err)
			}
		})
	}
}
