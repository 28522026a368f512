// Package plugins lists this project's scheduler plugins, so that the kube-scheduler binary
// and the in-process test schedulers register exactly the same set.
package plugins

import (
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	// Registers the plugins' args in kube-scheduler's config scheme.
	_ "github.com/hypernode-dev/hypernode-scheduler/apis/config/scheme"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/gang"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/networktopology"
)

// SchedulerName is the scheduler name that pods set in spec.schedulerName to be scheduled by
// the profile that runs this project's plugins.
const SchedulerName = "hypernode-scheduler"

// RegistryOptions register every plugin of this project with kube-scheduler's app.
func RegistryOptions() []app.Option {
	return []app.Option{
		app.WithPlugin(gang.Name, gang.New),
		app.WithPlugin(networktopology.Name, networktopology.New),
	}
}
