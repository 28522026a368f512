package gang

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"
)

// The tests below drive, step by step, the interleavings in which a gang used to bind below
// minMember: a member's Unreserve (run by its binding goroutine) comes after the next
// member's Permit. Each asserts that the next member is not allowed alone.

// unreserve runs the framework's Unreserve of a member, as its binding goroutine does after
// WaitOnPermit failed.
func (e *env) unreserve(pod *v1.Pod) {
	e.fw.RunReservePluginsUnreserve(e.ctx, framework.NewCycleState(), pod, "node-1")
}

// firstOfTwoWaits creates the gang "train" of two members (timeout in seconds, nil for the
// default) and takes p0 through Reserve to Permit, where it waits.
func (e *env) firstOfTwoWaits(t *testing.T, timeout *int32) (*v1.Pod, *v1.Pod) {
	t.Helper()
	e.podGroup("train", 2, timeout)
	p0, p1 := member("p0", "train"), member("p1", "train")
	e.registry.SetPod(nil, p0)
	e.registry.SetPod(nil, p1)
	if s := e.reserveAndPermit(t, p0); s.Code() != fwk.Wait {
		t.Fatalf("Permit(p0) = %v, want Wait", s)
	}
	return p0, p1
}

// TestRejectedRoundIsNotCounted: a sibling's failure rejects the round; the next member's
// Permit comes before the rejected member's Unreserve and must not count it.
func TestRejectedRoundIsNotCounted(t *testing.T) {
	e := newEnv(t, 60)
	p0, p1 := e.firstOfTwoWaits(t, nil)
	// p1 reserves, then fails in a later plugin: the framework unreserves it.
	if s := e.fw.RunReservePluginsReserve(e.ctx, framework.NewCycleState(), p1, "node-1"); !s.IsSuccess() {
		t.Fatal(s)
	}
	e.unreserve(p1)
	// p1 is retried before p0's binding goroutine has unreserved p0.
	if s := e.reserveAndPermit(t, p1); s.Code() != fwk.Wait {
		t.Errorf("Permit(p1) after the round was rejected = %v, want Wait (p0 was rejected)", s)
	}
	if s := e.fw.WaitOnPermit(e.ctx, p0); s.Code() != fwk.Unschedulable {
		t.Errorf("p0 = %v, want rejected", s)
	}
}

// TestTimedOutRoundIsNotCounted: the round's deadline rejects the waiting member; a member
// arriving after it, before the rejected member's Unreserve, starts a new round.
func TestTimedOutRoundIsNotCounted(t *testing.T) {
	e := newEnv(t, 60)
	p0, p1 := e.firstOfTwoWaits(t, ptr.To[int32](1))
	// Returns when the deadline has rejected p0; its Unreserve is not run yet.
	if s := e.fw.WaitOnPermit(e.ctx, p0); s.Code() != fwk.Unschedulable {
		t.Fatalf("p0 = %v, want rejected at the deadline", s)
	}
	if s := e.reserveAndPermit(t, p1); s.Code() != fwk.Wait {
		t.Errorf("Permit(p1) after the deadline = %v, want Wait", s)
	}
}

// TestPreemptedWaiterFailsItsBatch: a waiting member is preempted after the quorum counted
// it (its Allow comes too late); the member allowed with it must not bind alone.
func TestPreemptedWaiterFailsItsBatch(t *testing.T) {
	e := newEnv(t, 60)
	p0, p1 := e.firstOfTwoWaits(t, nil)
	// Preemption stops the waiting member before the last member's Permit allows it.
	if !e.fw.GetWaitingPod(p0.UID).Preempt("DefaultPreemption", "preempted") {
		t.Fatal("could not preempt the waiting member")
	}
	if s := e.reserveAndPermit(t, p1); !s.IsSuccess() {
		t.Fatalf("Permit(p1) = %v, want Success (p0's Unreserve has not run)", s)
	}
	done := make(chan *fwk.Status)
	go func() { done <- e.fw.RunPreBindPlugins(e.ctx, framework.NewCycleState(), p1, "node-1") }()
	if s := e.fw.WaitOnPermit(e.ctx, p0); s.IsSuccess() {
		t.Fatalf("p0 = %v, want preempted", s)
	}
	e.unreserve(p0)
	s := <-done
	want := "gang team/train: member p0 was allowed with this one but did not bind"
	if s.Code() != fwk.Unschedulable || s.Message() != want {
		t.Errorf("PreBind(p1) = %v, want Unschedulable %q", s, want)
	}
}

// TestRejectedWaiterGoneBeforeTheQuorumFailsItsBatch: a waiting member is preempted and its
// binding goroutine has taken it out of the waiting pods, but its Unreserve has not run when
// the last member's Permit counts it; the last member must not bind alone.
func TestRejectedWaiterGoneBeforeTheQuorumFailsItsBatch(t *testing.T) {
	e := newEnv(t, 60)
	p0, p1 := e.firstOfTwoWaits(t, nil)
	if !e.fw.GetWaitingPod(p0.UID).Preempt("DefaultPreemption", "preempted") {
		t.Fatal("could not preempt the waiting member")
	}
	if s := e.fw.WaitOnPermit(e.ctx, p0); s.IsSuccess() {
		t.Fatalf("p0 = %v, want preempted", s)
	}
	if s := e.reserveAndPermit(t, p1); !s.IsSuccess() {
		t.Fatalf("Permit(p1) = %v, want Success (p0's Unreserve has not run)", s)
	}
	done := make(chan *fwk.Status)
	go func() { done <- e.fw.RunPreBindPlugins(e.ctx, framework.NewCycleState(), p1, "node-1") }()
	e.unreserve(p0)
	s := <-done
	want := "gang team/train: member p0 was allowed with this one but did not bind"
	if s.Code() != fwk.Unschedulable || s.Message() != want {
		t.Errorf("PreBind(p1) = %v, want Unschedulable %q", s, want)
	}
}

// TestBatchBindsWhenEveryMemberArrives: PreBind lets a batch through once all of it arrived.
func TestBatchBindsWhenEveryMemberArrives(t *testing.T) {
	e := newEnv(t, 60)
	p0, p1 := e.firstOfTwoWaits(t, nil)
	if s := e.reserveAndPermit(t, p1); !s.IsSuccess() {
		t.Fatalf("Permit(p1) = %v, want Success", s)
	}
	if s := e.fw.WaitOnPermit(e.ctx, p0); !s.IsSuccess() {
		t.Fatalf("p0 = %v, want allowed", s)
	}
	done := make(chan *fwk.Status)
	go func() { done <- e.fw.RunPreBindPlugins(e.ctx, framework.NewCycleState(), p0, "node-1") }()
	if s := e.fw.RunPreBindPlugins(e.ctx, framework.NewCycleState(), p1, "node-1"); !s.IsSuccess() {
		t.Errorf("PreBind(p1) = %v", s)
	}
	if s := <-done; !s.IsSuccess() {
		t.Errorf("PreBind(p0) = %v", s)
	}
	for _, p := range []*v1.Pod{p0, p1} {
		e.fw.RunPostBindPlugins(e.ctx, framework.NewCycleState(), p, "node-1")
	}
	if batches, memberRounds, rounds, _ := e.gangs.RoundsLeft(); batches != 0 || memberRounds != 0 || rounds != 0 {
		t.Errorf("state left after binding: %d batches, %d member rounds, %d rounds", batches, memberRounds, rounds)
	}
}

// TestLaterBatchSharesTheFateOfTheOneItCounted: an elastic gang's extra member, allowed
// while the quorum batch it counted had not passed its barrier, binds only after that batch
// passes, and never alone when that batch fails.
func TestLaterBatchSharesTheFateOfTheOneItCounted(t *testing.T) {
	for _, tc := range []struct {
		name string
		// p0Fails: p0, allowed in the quorum batch, fails before its PreBind.
		p0Fails bool
		want    map[string]string
	}{{
		name: "the quorum batch binds",
		want: map[string]string{"p0": "", "p1": "", "p2": ""},
	}, {
		name:    "the quorum batch fails",
		p0Fails: true,
		want: map[string]string{
			"p1": "gang team/train: member p0 was allowed with this one but did not bind",
			"p2": "gang team/train: member p0, allowed earlier and counted for this one, did not bind",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 60)
			pods := e.gangOf(2, 3)
			p0, p1, p2 := pods[0], pods[1], pods[2]
			if s := e.reserveAndPermit(t, p0); s.Code() != fwk.Wait {
				t.Fatalf("Permit(p0) = %v, want Wait", s)
			}
			if s := e.reserveAndPermit(t, p1); !s.IsSuccess() {
				t.Fatalf("Permit(p1) = %v, want Success", s)
			}
			// p2 counts p0 and p1, reserved and not bound: allowed at once, in a batch of its own.
			if s := e.reserveAndPermit(t, p2); !s.IsSuccess() {
				t.Fatalf("Permit(p2) = %v, want Success", s)
			}
			got := map[string]string{}
			results := make(chan struct {
				pod    string
				status *fwk.Status
			}, 3)
			preBind := func(p *v1.Pod) {
				go func() {
					results <- struct {
						pod    string
						status *fwk.Status
					}{p.Name, e.fw.RunPreBindPlugins(e.ctx, framework.NewCycleState(), p, "node-1")}
				}()
			}
			preBind(p2)
			preBind(p1)
			if s := e.fw.WaitOnPermit(e.ctx, p0); !s.IsSuccess() {
				t.Fatalf("p0 = %v, want allowed", s)
			}
			if tc.p0Fails {
				e.unreserve(p0)
			} else {
				preBind(p0)
			}
			for range tc.want {
				r := <-results
				got[r.pod] = r.status.Message()
				if r.status.IsSuccess() {
					e.fw.RunPostBindPlugins(e.ctx, framework.NewCycleState(), pods[r.pod[1]-'0'], "node-1")
				} else {
					e.unreserve(pods[r.pod[1]-'0'])
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PreBind messages (-want +got):\n%s", diff)
			}
			if batches, _, _, open := e.gangs.RoundsLeft(); batches != 0 || open != 0 {
				t.Errorf("state left: %d member batches, %d gangs with open batches", batches, open)
			}
		})
	}
}

// TestBindSlots: at most n members hold a binding slot; a member waits for one, gives up when
// its context ends, and a slot is freed exactly once whether PostBind or Unreserve frees it.
func TestBindSlots(t *testing.T) {
	s := newBindSlots(2)
	ctx := context.Background()
	for _, uid := range []types.UID{"a", "b"} {
		if err := s.acquire(ctx, uid); err != nil {
			t.Fatalf("acquire(%s) = %v", uid, err)
		}
	}
	cancelled, cancel := context.WithCancelCause(ctx)
	cancel(errors.New("binding cycle cancelled"))
	if err := s.acquire(cancelled, "c"); err == nil || err.Error() != "binding cycle cancelled" {
		t.Errorf("acquire(c) with every slot taken = %v, want the context's cause", err)
	}
	s.release("c") // never held: frees nothing
	s.release("a")
	s.release("a") // PostBind after Unreserve: frees nothing more
	if got := len(s.slots); got != 1 {
		t.Errorf("%d slots taken, want 1 (b)", got)
	}
	if err := s.acquire(cancelled, "c"); err == nil {
		// Both cases are ready when a slot is free and the context ended; either is correct,
		// but a free slot must not be lost.
		s.release("c")
	}
	if got := len(s.slots); got != 1 {
		t.Errorf("%d slots taken, want 1 (b)", got)
	}
}

// TestBatchBindsThroughSlots: a batch of three with two binding slots: two members leave
// PreBind, the third only when one of them finished binding.
func TestBatchBindsThroughSlots(t *testing.T) {
	e := newEnv(t, 60)
	e.plugin.binds = newBindSlots(2)
	pods := e.gangOf(3, 3)
	for i, p := range pods {
		want := fwk.Wait
		if i == len(pods)-1 {
			want = fwk.Success
		}
		if s := e.reserveAndPermit(t, p); s.Code() != want {
			t.Fatalf("Permit(%s) = %v, want %v", p.Name, s, want)
		}
	}
	type result struct {
		pod    string
		status *fwk.Status
	}
	done := make(chan result, len(pods))
	for _, p := range pods {
		go func() {
			done <- result{p.Name, e.fw.RunPreBindPlugins(e.ctx, framework.NewCycleState(), p, "node-1")}
		}()
	}
	first, second := <-done, <-done
	for _, r := range []result{first, second} {
		if !r.status.IsSuccess() {
			t.Fatalf("PreBind(%s) = %v", r.pod, r.status)
		}
	}
	select {
	case r := <-done:
		t.Fatalf("PreBind(%s) returned %v while both slots were held", r.pod, r.status)
	default:
	}
	e.fw.RunPostBindPlugins(e.ctx, framework.NewCycleState(), podNamed(pods, first.pod), "node-1")
	if r := <-done; !r.status.IsSuccess() {
		t.Errorf("PreBind(%s) after a slot was freed = %v", r.pod, r.status)
	}
}

func podNamed(pods []*v1.Pod, name string) *v1.Pod {
	for _, p := range pods {
		if p.Name == name {
			return p
		}
	}
	return nil
}
