// Package gang implements the Gang plugin: all-or-nothing scheduling of the pods of a
// scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1).
package gang

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	"github.com/hypernode-dev/hypernode-scheduler/apis/config/validation"
)

// Name is the name of the plugin used in the plugin registry and configurations.
const Name = "Gang"

// Gang holds the plugin's validated args.
type Gang struct {
	args config.GangArgs
}

var _ fwk.Plugin = &Gang{}

// New validates the args and builds the plugin. Invalid args fail the scheduler's start.
func New(_ context.Context, obj runtime.Object, _ fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.GangArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type GangArgs, got %T", obj)
	}
	if err := validation.ValidateGangArgs(nil, args); err != nil {
		return nil, err
	}
	return &Gang{args: *args}, nil
}

// Name returns the name of the plugin.
func (g *Gang) Name() string { return Name }
