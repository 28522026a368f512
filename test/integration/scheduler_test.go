package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// startScheduler starts the project's scheduler with the given config and stops it at the end
// of the test.
func startScheduler(t *testing.T, config string) {
	t.Helper()
	sched, err := util.StartScheduler(context.Background(), controlPlane, config)
	if err != nil {
		t.Fatalf("starting the scheduler: %v", err)
	}
	t.Cleanup(func() {
		if err := sched.Stop(); err != nil {
			t.Error(err)
		}
	})
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
	ns, err := util.CreateNamespace(ctx, c.kube, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	withNodes(t, c, "node-a")
	startScheduler(t, util.DefaultSchedulerConfig)

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
		pluginArgs string
		wantErr    string
	}{
		{
			name: "Gang timeout not positive",
			pluginArgs: `  - name: Gang
    args:
      defaultScheduleTimeoutSeconds: 0
`,
			wantErr: `initializing plugin "Gang": defaultScheduleTimeoutSeconds: Invalid value: 0: must be greater than 0`,
		},
		{
			name: "unknown candidate strategy",
			pluginArgs: `  - name: NetworkTopologyAware
    args:
      candidateScoringStrategy: MostAllocated
`,
			wantErr: `initializing plugin "NetworkTopologyAware": candidateScoringStrategy: Unsupported value: "MostAllocated": supported values: "BinPack", "LeastWaste"`,
		},
		{
			name: "negative fading",
			pluginArgs: `  - name: NetworkTopologyAware
    args:
      normalPod:
        fading: -1
`,
			wantErr: `initializing plugin "NetworkTopologyAware": normalPod.fading: Invalid value: -1: must be greater than or equal to 0`,
		},
		{
			name: "misspelled field",
			pluginArgs: `  - name: Gang
    args:
      defaultScheduleTimeout: 10
`,
			wantErr: `unknown field "defaultScheduleTimeout"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			config := util.DefaultSchedulerConfig + "  pluginConfig:\n" + tc.pluginArgs
			sched, err := util.StartScheduler(context.Background(), controlPlane, config)
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
