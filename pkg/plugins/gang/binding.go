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

	"github.com/hypernode-dev/hypernode-scheduler/pkg/metrics"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// batch is the set of members that Permit allowed together. They bind only when every one of
// them has reached PreBind: a member whose Allow came too late (it was preempted or timed
// out while the quorum was being counted) is unreserved instead, fails the batch, and then no
// member of the batch binds. Without the barrier the others would bind below minMember.
//
// A batch allowed while an earlier batch of its gang is still short of its barrier counted
// that batch's members in its quorum: it binds only after they pass it, and fails with them
// (an extra member of an elastic gang, a sub-group completed after the job's batch).
type batch struct {
	key     podgroup.Key
	members int
	// earlier are the gang's batches still open when this one was allowed.
	earlier []*batch
	arrived int
	// bound counts the members that reached PostBind.
	bound int
	// ready is closed when every member arrived, failed when one member failed.
	ready  chan struct{}
	failed chan struct{}
	once   sync.Once
	// member is the member whose failure failed the batch, reason what its members are told.
	member, reason string
}

// newBatchLocked makes a gang's batch of members, after the gang's open batches. g.mu must be
// held.
func (g *Gang) newBatchLocked(key podgroup.Key, members int) *batch {
	b := &batch{key: key, members: members, ready: make(chan struct{}), failed: make(chan struct{})}
	open := g.openBatches[key]
	for e := range open {
		b.earlier = append(b.earlier, e)
	}
	if open == nil {
		open = map[*batch]struct{}{}
		g.openBatches[key] = open
	}
	open[b] = struct{}{}
	return b
}

// failLocked fails the batch because the member did not bind, with the first reason given.
// g.mu must be held.
func (g *Gang) failLocked(b *batch, member, reason string) {
	b.once.Do(func() {
		b.member, b.reason = member, reason
		close(b.failed)
	})
	g.closeLocked(b)
}

// closeLocked takes a batch that passed its barrier or failed out of its gang's open batches.
// g.mu must be held.
func (g *Gang) closeLocked(b *batch) {
	open := g.openBatches[b.key]
	delete(open, b)
	if len(open) == 0 {
		delete(g.openBatches, b.key)
	}
}

// awaitEarlier waits until the batches allowed before b have passed their barriers, and
// fails b when one of them failed: its quorum counted their members.
func (g *Gang) awaitEarlier(ctx context.Context, b *batch) *fwk.Status {
	for _, e := range b.earlier {
		select {
		case <-e.failed:
		case <-e.ready:
			select {
			case <-e.failed:
			default:
				continue
			}
		case <-ctx.Done():
			return fwk.AsStatus(context.Cause(ctx))
		}
		g.mu.Lock()
		g.failLocked(b, e.member, fmt.Sprintf("gang %s: member %s, allowed earlier and counted for this one, did not bind", b.key, e.member))
		reason := b.reason
		g.mu.Unlock()
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
	g.mu.Lock()
	b := g.memberBatch[pod.UID]
	if b == nil {
		g.mu.Unlock()
		return nil
	}
	b.arrived++
	if b.arrived == b.members {
		close(b.ready)
		g.closeLocked(b)
	}
	g.mu.Unlock()
	select {
	case <-b.failed:
	case <-b.ready:
		select {
		case <-b.failed:
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
	g.mu.Lock()
	reason := b.reason
	g.mu.Unlock()
	return fwk.NewStatus(fwk.Unschedulable, reason)
}

// PostBind forgets the bound member's batch and frees its binding slot. When the first batch
// of a gang (the one Permit allowed at its quorum) has bound, the time since the gang's first
// reservation is recorded.
func (g *Gang) PostBind(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	g.binds.release(pod.UID)
	key, _ := podgroup.KeyOf(pod)
	g.mu.Lock()
	b := g.memberBatch[pod.UID]
	delete(g.memberBatch, pod.UID)
	var took time.Duration
	done := false
	if b != nil {
		b.bound++
		// The first batch of the gang, not an extra member's that happened to bind first.
		if start, ok := g.firstReserved[key]; ok && b.bound == b.members && len(b.earlier) == 0 && !g.bound.Has(key) {
			g.bound.Insert(key)
			took, done = time.Since(start), true
		}
	}
	g.mu.Unlock()
	if done {
		metrics.GangSchedulingDuration.Observe(took.Seconds())
		klog.FromContext(ctx).V(2).Info("Gang bound", "podGroup", key, "members", b.members, "sinceFirstReservation", took)
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
