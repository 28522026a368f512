// Package plugins lists this project's scheduler plugins, so that the kube-scheduler binary
// and the in-process test schedulers register exactly the same set.
package plugins

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/pkg/features"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	// Registers the plugins' args in kube-scheduler's config scheme.
	_ "github.com/hypernode-dev/hypernode-scheduler/apis/config/scheme"
	topologyclient "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/gang"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/gangpreemption"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/networktopology"
)

// SchedulerName is the scheduler name that pods set in spec.schedulerName to be scheduled by
// the profile that runs this project's plugins.
const SchedulerName = "hypernode-scheduler"

// RegistryOptions register every plugin of this project with kube-scheduler's app. Call it
// once per scheduler: the plugins it registers share one HyperNode tree cache and one gang state
// (with its PodGroup registry), started on the scheduler's informers when the first plugin is built.
func RegistryOptions() []app.Option {
	var opts []app.Option
	for name, factory := range Registry(CRDClients{}) {
		opts = append(opts, app.WithPlugin(name, factory))
	}
	return opts
}

// CRDClients are the clients of the custom resources the plugins watch and write. A nil one is
// built from the scheduler's kubeconfig; kubectl hypernode gives fakes holding a copy of a
// cluster, to run the plugins on it.
type CRDClients struct {
	Topology  topologyclient.Interface
	PodGroups schedclientset.Interface
}

// Registry returns the factories of every plugin of this project, for one scheduler (see
// RegistryOptions).
func Registry(clients CRDClients) frameworkruntime.Registry {
	state := &processState{clients: clients}
	return frameworkruntime.Registry{
		gang.Name: func(ctx context.Context, obj runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
			_, gangs, err := state.start(ctx, handle)
			if err != nil {
				return nil, err
			}
			return gang.New(ctx, obj, handle, gangs)
		},
		gang.QueueSortName: func(ctx context.Context, _ runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
			_, gangs, err := state.start(ctx, handle)
			if err != nil {
				return nil, err
			}
			return gang.NewQueueSort(gangs.Registry()), nil
		},
		gang.RetryGateName: func(ctx context.Context, _ runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
			_, gangs, err := state.start(ctx, handle)
			if err != nil {
				return nil, err
			}
			return gang.NewRetryGate(handle, gangs), nil
		},
		gangpreemption.Name: func(ctx context.Context, _ runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
			cache, gangs, err := state.start(ctx, handle)
			if err != nil {
				return nil, err
			}
			return gangpreemption.New(ctx, handle, cache, gangs, state.clients.PodGroups)
		},
		networktopology.Name: func(ctx context.Context, obj runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
			cache, gangs, err := state.start(ctx, handle)
			if err != nil {
				return nil, err
			}
			return networktopology.New(ctx, obj, handle, cache, gangs, state.devices)
		},
	}
}

// FeatureDefaults are the kube-scheduler feature gates whose default this project's scheduler
// changes; `--feature-gates` still overrides them.
//
// NominatedNodeNameForExpectation (beta, on in 1.37) makes kube-scheduler write a pod's
// nominatedNodeName before the pod waits in Permit, to tell cluster autoscalers that it is
// about to bind. Every gang member waits in Permit, so a gang of 5,000 costs 5,000 extra pod
// status writes at once, and the client opens connection after connection to the apiserver
// for them: the 5,000-pod benchmark took 1.8x vanilla's time with it, 1.2x without
// (docs/benchmarks.md). Members waiting in Permit are not Unschedulable, so autoscalers do not
// act on them anyway. The cost: pods that wait in PreBind (volume binding) are not nominated
// either.
var FeatureDefaults = map[string]bool{
	string(features.NominatedNodeNameForExpectation): false,
}

// SetFeatureDefaults applies FeatureDefaults; call it before the command parses its flags.
func SetFeatureDefaults() error {
	return utilfeature.DefaultMutableFeatureGate.SetFromMap(FeatureDefaults)
}
