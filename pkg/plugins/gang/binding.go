package gang

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/metrics"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// The members Permit allows together form a batch (gangstate.Batch): they bind only when
// every one of them has reached PreBind, and a batch allowed while an earlier batch of its
// gang is still short of its barrier binds only after that one passes it.

// awaitEarlier waits until the batches allowed before b have passed their barriers, and
// fails b when one of them failed: its quorum counted their members.
func (g *Gang) awaitEarlier(ctx context.Context, b *gangstate.Batch) *fwk.Status {
	for _, e := range b.Earlier {
		select {
		case <-e.Failed:
		case <-e.Ready:
			select {
			case <-e.Failed:
			default:
				continue
			}
		case <-ctx.Done():
			return fwk.AsStatus(context.Cause(ctx))
		}
		g.gangs.Lock()
		g.gangs.FailBatchLocked(b, e.Member, fmt.Sprintf("gang %s: member %s, allowed earlier and counted for this one, did not bind", b.Key, e.Member))
		reason := b.Reason
		g.gangs.Unlock()
		return fwk.NewStatus(fwk.Unschedulable, reason)
	}
	return nil
}

// PreBindPreFlight: PreBind has work only for members allowed by Permit.
func (g *Gang) PreBindPreFlight(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	if _, ok := podgroup.KeyOf(pod); !ok {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// PreBind holds an allowed member until every member of its batch has reached PreBind, and
// fails it when one of them failed instead; then it waits for a binding slot.
func (g *Gang) PreBind(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) *fwk.Status {
	g.gangs.Lock()
	b := g.gangs.MemberBatchLocked(pod.UID)
	if b == nil {
		g.gangs.Unlock()
		return nil
	}
	g.gangs.ArriveLocked(b)
	g.gangs.Unlock()
	select {
	case <-b.Failed:
	case <-b.Ready:
		select {
		case <-b.Failed:
		default:
			if s := g.awaitEarlier(ctx, b); s != nil {
				return s
			}
			if err := g.binds.acquire(ctx, pod.UID); err != nil {
				return fwk.AsStatus(err)
			}
			return nil
		}
	case <-ctx.Done():
		return fwk.AsStatus(context.Cause(ctx))
	}
	g.gangs.Lock()
	reason := b.Reason
	g.gangs.Unlock()
	return fwk.NewStatus(fwk.Unschedulable, reason)
}

// PostBind forgets the bound member's batch and frees its binding slot. When the first batch
// of a gang (the one Permit allowed at its quorum) has bound, the time since the gang's first
// reservation is recorded.
func (g *Gang) PostBind(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	g.binds.release(pod.UID)
	key, _ := podgroup.KeyOf(pod)
	g.gangs.Lock()
	b := g.gangs.MemberBatchLocked(pod.UID)
	g.gangs.LeaveBatchLocked(pod.UID)
	var took time.Duration
	done := false
	if b != nil {
		b.Bound++
		// The first batch of the gang, not an extra member's that happened to bind first.
		if start, ok := g.gangs.BindingStartedLocked(key); ok && b.Bound == b.Members && len(b.Earlier) == 0 && !g.gangs.QuorumBoundLocked(key) {
			took, done = time.Since(start), true
		}
	}
	g.gangs.Unlock()
	if done {
		metrics.GangSchedulingDuration.Observe(took.Seconds())
		klog.FromContext(ctx).V(2).Info("Gang bound", "podGroup", key, "members", b.Members, "sinceFirstReservation", took)
	}
}

// maxConcurrentBinds bounds the batch members that make their binding API calls at once.
const maxConcurrentBinds = 64

// bindSlots bounds how many allowed members bind at the same time. Permit allows a whole
// batch in one instant: without a bound a 5,000-pod gang starts 5,000 binding calls together,
// the client opens new connections once one connection's stream limit is reached, and the
// apiserver queues the calls beyond its in-flight limit; a steady stream finishes sooner
// (docs/benchmarks.md, "Big gang"). A slot is held from PreBind to PostBind or Unreserve.
type bindSlots struct {
	slots chan struct{}
	mu    sync.Mutex
	held  map[types.UID]bool
}

func newBindSlots(n int) *bindSlots {
	return &bindSlots{slots: make(chan struct{}, n), held: map[types.UID]bool{}}
}

func (s *bindSlots) acquire(ctx context.Context, uid types.UID) error {
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	s.mu.Lock()
	s.held[uid] = true
	s.mu.Unlock()
	return nil
}

// release frees the member's slot if it holds one: PostBind and Unreserve both call it.
func (s *bindSlots) release(uid types.UID) {
	s.mu.Lock()
	held := s.held[uid]
	delete(s.held, uid)
	s.mu.Unlock()
	if held {
		<-s.slots
	}
}
