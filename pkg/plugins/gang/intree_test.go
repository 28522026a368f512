package gang

import (
	"os"
	"testing"

	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

// frameworkruntimeInTree returns the in-tree plugins a test profile needs besides Gang.
func frameworkruntimeInTree() frameworkruntime.Registry {
	return frameworkruntime.Registry{
		queuesort.Name:     queuesort.New,
		defaultbinder.Name: defaultbinder.New,
	}
}

func TestMain(m *testing.M) {
	// The framework records its metrics, which must be registered first.
	metrics.Register()
	os.Exit(m.Run())
}
