package gang

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/composition"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/names"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// RetryGateName is the name of the plugin that holds the members of a gang that cannot be
// placed now while one member retries for the whole gang.
const RetryGateName = names.GangRetryGate

// RetryGate is that plugin (podgroup/retry.go). It is a plugin of its own because
// kube-scheduler skips a gated pod for every cluster event that its gating plugin did not
// register: Gang and NetworkTopologyAware register the events that can help a gang, this one
// registers none, so a held member costs the queue nothing per event. Held members come back
// when their gang's hold ends (the retried member planned, or the blocker went away): the
// plugin that ends it activates them.
type RetryGate struct {
	handle fwk.Handle
	gangs  *gangstate.Tracker
}

var (
	_ fwk.PreEnqueuePlugin  = &RetryGate{}
	_ fwk.EnqueueExtensions = &RetryGate{}
)

// NewRetryGate builds the plugin and tells the gang state that the profile runs it.
func NewRetryGate(handle fwk.Handle, gangs *gangstate.Tracker) *RetryGate {
	gangs.EnableRetryGate(handle.ProfileName())
	return &RetryGate{handle: handle, gangs: gangs}
}

// Name returns the name of the plugin.
func (r *RetryGate) Name() string { return RetryGateName }

// PreEnqueue holds back every pending member of a held or blocked gang but the one retried.
func (r *RetryGate) PreEnqueue(_ context.Context, pod *v1.Pod) *fwk.Status {
	retried, held := r.gangs.RetryGate(pod)
	if !held {
		return nil
	}
	key, _ := podgroup.KeyOf(pod)
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
		fmt.Sprintf("gang %s cannot be placed now; its member %s is retried for the whole gang", key, retried))
}

// EventsToRegister registers no event: a held member is activated when its gang's hold ends,
// never requeued by a cluster event. It refuses an unsafe profile (composition.Check).
func (r *RetryGate) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	if err := composition.Check(r.handle); err != nil {
		return nil, err
	}
	return []fwk.ClusterEventWithHint{}, nil
}
