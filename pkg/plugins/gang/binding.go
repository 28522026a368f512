package gang

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// batch is the set of members that Permit allowed together. They bind only when every one of
// them has reached PreBind: a member whose Allow came too late (it was preempted or timed
// out while the quorum was being counted) is unreserved instead, fails the batch, and then no
// member of the batch binds. Without the barrier the others would bind below minMember.
type batch struct {
	members int
	arrived int
	// ready is closed when every member arrived, failed when one member failed.
	ready  chan struct{}
	failed chan struct{}
	once   sync.Once
	reason string
}

func newBatch(members int) *batch {
	return &batch{members: members, ready: make(chan struct{}), failed: make(chan struct{})}
}

// fail fails the batch with the first reason given. g.mu must be held.
func (b *batch) fail(reason string) {
	b.once.Do(func() {
		b.reason = reason
		close(b.failed)
	})
}

// PreBindPreFlight: PreBind has work only for members allowed by Permit.
func (g *Gang) PreBindPreFlight(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	if _, ok := podgroup.KeyOf(pod); !ok {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// PreBind holds an allowed member until every member of its batch has reached PreBind, and
// fails it when one of them failed instead.
func (g *Gang) PreBind(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) *fwk.Status {
	g.mu.Lock()
	b := g.memberBatch[pod.UID]
	if b == nil {
		g.mu.Unlock()
		return nil
	}
	b.arrived++
	if b.arrived == b.members {
		close(b.ready)
	}
	g.mu.Unlock()
	select {
	case <-b.failed:
	case <-b.ready:
		select {
		case <-b.failed:
		default:
			return nil
		}
	case <-ctx.Done():
		return fwk.AsStatus(context.Cause(ctx))
	}
	g.mu.Lock()
	reason := b.reason
	g.mu.Unlock()
	return fwk.NewStatus(fwk.Unschedulable, reason)
}

// PostBind forgets the bound member's batch.
func (g *Gang) PostBind(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	g.mu.Lock()
	delete(g.memberBatch, pod.UID)
	g.mu.Unlock()
}
