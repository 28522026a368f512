// Package plugintesting holds what the plugins' tests share to run a real kube-scheduler
// framework: profiles loaded as kube-scheduler loads its configuration file (defaults and
// validation included), and a pod nominator that holds nothing.
package plugintesting

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// LoadProfiles loads the profiles of a KubeSchedulerConfiguration written in YAML (the
// apiVersion and kind are added), with kube-scheduler's defaults for everything it leaves
// out. The caller imports the scheme of any plugin args it sets.
func LoadProfiles(tb testing.TB, profilesYAML string) []schedconfig.KubeSchedulerProfile {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "config.yaml")
	yaml := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" + profilesYAML
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		tb.Fatal(err)
	}
	cfg, err := options.LoadConfigFromFile(klog.Background(), path)
	if err != nil {
		tb.Fatal(err)
	}
	return cfg.Profiles
}

// NoNominations is a PodNominator without nominated pods: every method does nothing.
type NoNominations struct{}

// AddNominatedPod does nothing.
func (NoNominations) AddNominatedPod(klog.Logger, fwk.PodInfo, *fwk.NominatingInfo) {}

// DeleteNominatedPodIfExists does nothing.
func (NoNominations) DeleteNominatedPodIfExists(*v1.Pod) {}

// UpdateNominatedPod does nothing.
func (NoNominations) UpdateNominatedPod(klog.Logger, *v1.Pod, fwk.PodInfo) {}

// NominatedPodsForNode returns no pods.
func (NoNominations) NominatedPodsForNode(string) []fwk.PodInfo { return nil }
