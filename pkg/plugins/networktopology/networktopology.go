// Package networktopology implements the NetworkTopologyAware plugin: it places each gang
// inside the smallest network domain (HyperNode) that can hold it.
package networktopology

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	"github.com/hypernode-dev/hypernode-scheduler/apis/config/validation"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
)

// Name is the name of the plugin used in the plugin registry and configurations.
const Name = "NetworkTopologyAware"

// NetworkTopologyAware holds the plugin's validated args and the process's HyperNode tree.
type NetworkTopologyAware struct {
	args  config.NetworkTopologyAwareArgs
	cache *hypernode.Cache
}

var _ fwk.Plugin = &NetworkTopologyAware{}

// New validates the args and builds the plugin. Invalid args fail the scheduler's start.
func New(ctx context.Context, obj runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.NetworkTopologyAwareArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type NetworkTopologyAwareArgs, got %T", obj)
	}
	if err := validation.ValidateNetworkTopologyAwareArgs(nil, args); err != nil {
		return nil, err
	}
	// One tree per scheduler process, shared by every profile and plugin that reads it.
	cache, err := hypernode.Shared(ctx, handle.SharedInformerFactory(), handle.KubeConfig(), handle.EventRecorder())
	if err != nil {
		return nil, err
	}
	return &NetworkTopologyAware{args: *args, cache: cache}, nil
}

// Name returns the name of the plugin.
func (p *NetworkTopologyAware) Name() string { return Name }
