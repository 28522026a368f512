package gang

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// TestPermitAllOrNothing: members wait until minMember are reserved, then all are allowed at
// once; the pending members are activated when the first one waits.
func TestPermitAllOrNothing(t *testing.T) {
	e := newEnv(t, 60)
	pods := e.gangOf(3, 3)
	// The third member made the group ready: the registry's listener activated them all.
	e.activator.mu.Lock()
	if diff := cmp.Diff([]string{"team/p0", "team/p1", "team/p2"}, sorted(e.activator.activated)); diff != "" {
		t.Errorf("activated when the group became ready (-want,+got):\n%s", diff)
	}
	e.activator.activated = nil
	e.activator.mu.Unlock()
	for _, p := range pods[:2] {
		if s := e.reserveAndPermit(t, p); s.Code() != fwk.Wait {
			t.Fatalf("Permit(%s) = %v, want Wait", p.Name, s)
		}
	}
	e.activator.mu.Lock()
	// The first waiting member activates the other two, once for the round.
	if diff := cmp.Diff([]string{"team/p1", "team/p2"}, sorted(e.activator.activated)); diff != "" {
		t.Errorf("activated pods (-want,+got):\n%s", diff)
	}
	e.activator.mu.Unlock()
	if s := e.reserveAndPermit(t, pods[2]); !s.IsSuccess() {
		t.Fatalf("Permit of the last member = %v, want Success", s)
	}
	for _, p := range pods[:2] {
		if s := e.fw.WaitOnPermit(e.ctx, p); !s.IsSuccess() {
			t.Errorf("waiting member %s: %v, want allowed", p.Name, s)
		}
	}
	if diff := cmp.Diff([]string{
		"Normal GangWaiting gang team/train: members are reserved and wait in Permit for the rest of the gang (minMember 3, timeout 1m0s)",
		"Normal GangScheduled gang team/train: 3 of 3 (minMember) members reserved or bound; 2 waiting members allowed to bind",
	}, drain(e.recorder.Events)); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
}

// TestUnreserveRejectsWaitingSiblings: one member's Unreserve rejects every waiting sibling at
// once, with a message that names the gang and the member.
func TestUnreserveRejectsWaitingSiblings(t *testing.T) {
	e := newEnv(t, 60)
	pods := e.gangOf(3, 3)
	for _, p := range pods[:2] {
		e.reserveAndPermit(t, p)
	}
	if got := e.registry.Info(podgroup.Key{Namespace: ns, Name: "train"}).Scheduled; got != 2 {
		t.Fatalf("scheduled = %d, want 2", got)
	}
	state := framework.NewCycleState()
	e.fw.RunReservePluginsReserve(e.ctx, state, pods[2], "node-1")
	e.fw.RunReservePluginsUnreserve(e.ctx, state, pods[2], "node-1")
	for _, p := range pods[:2] {
		s := e.fw.WaitOnPermit(e.ctx, p)
		if s.Code() != fwk.Unschedulable || s.Message() != "gang team/train rejected: member p2 was unreserved" {
			t.Errorf("waiting member %s: %v", p.Name, s)
		}
		// The framework unreserves rejected members.
		e.fw.RunReservePluginsUnreserve(e.ctx, framework.NewCycleState(), p, "node-1")
	}
	if got := e.registry.Info(podgroup.Key{Namespace: ns, Name: "train"}).Scheduled; got != 0 {
		t.Errorf("scheduled after the rejection = %d, want 0", got)
	}
	events := drain(e.recorder.Events)
	if want := "Warning GangRejected gang team/train: member p2 was unreserved; 2 waiting members rejected and their resources released"; !contains(events, want) {
		t.Errorf("events %q do not contain %q", events, want)
	}
}

// TestPermitTimeout: the wait is bounded by the PodGroup's scheduleTimeoutSeconds (else the
// default arg); when it expires the members are rejected and the gang reports the timeout.
func TestPermitTimeout(t *testing.T) {
	e := newEnv(t, 60)
	key := podgroup.Key{Namespace: ns, Name: "train"}
	e.podGroup("train", 2, nil)
	if got := e.plugin.timeout(e.registry.Info(key)); got != time.Minute {
		t.Errorf("default timeout = %v, want 1m", got)
	}
	e.podGroup("train", 2, ptr.To[int32](1))
	if got := e.plugin.timeout(e.registry.Info(key)); got != time.Second {
		t.Errorf("PodGroup timeout = %v, want 1s", got)
	}
	p0 := member("p0", "train")
	e.registry.SetPod(nil, p0)
	e.registry.SetPod(nil, member("p1", "train"))
	if s := e.reserveAndPermit(t, p0); s.Code() != fwk.Wait {
		t.Fatalf("Permit = %v, want Wait", s)
	}
	s := e.fw.WaitOnPermit(e.ctx, p0)
	if s.Code() != fwk.Unschedulable {
		t.Fatalf("after the timeout: %v, want Unschedulable", s)
	}
	e.fw.RunReservePluginsUnreserve(e.ctx, framework.NewCycleState(), p0, "node-1")
	// The deadline records its Event after releasing the gang lock: poll for it.
	want := "Warning GangTimedOut gang team/train: timed out after 1s waiting for 2 members (minMember); 1 were reserved or bound; 1 waiting members rejected and their resources released"
	var events []string
	if err := wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		events = append(events, drain(e.recorder.Events)...)
		return contains(events, want), nil
	}); err != nil {
		t.Errorf("events %q do not contain %q", events, want)
	}
}

// TestPermitTwoLevels: a job of minMember 4 with partitions of 2 (minSubGroups 2 of 3). The
// job is released when 4 members of 2 complete partitions are reserved; a member of the third
// partition then waits for its own partition only, and its failure rejects only its partition.
func TestPermitTwoLevels(t *testing.T) {
	e := newEnv(t, 60)
	pods := e.partitionedJob(`[{"name":"tp","subGroupSize":2,"minSubGroups":2,"matchLabelKeys":["partition"]}]`, 4, 6, 2)
	for _, i := range []int{0, 2, 1} {
		if s := e.reserveAndPermit(t, pods[i]); s.Code() != fwk.Wait {
			t.Fatalf("Permit(p%d) = %v, want Wait", i, s)
		}
	}
	if s := e.reserveAndPermit(t, pods[3]); !s.IsSuccess() {
		t.Fatalf("Permit of the member completing 2 partitions = %v, want Success", s)
	}
	for _, i := range []int{0, 1, 2} {
		if s := e.fw.WaitOnPermit(e.ctx, pods[i]); !s.IsSuccess() {
			t.Errorf("p%d: %v, want allowed", i, s)
		}
	}
	// The job is complete; p4 waits for its own partition.
	if s := e.reserveAndPermit(t, pods[4]); s.Code() != fwk.Wait {
		t.Fatalf("Permit(p4) = %v, want Wait for partition tp-2", s)
	}
	// p5 fails: only partition tp-2's waiting member is rejected.
	state := framework.NewCycleState()
	_, status := e.plugin.PostFilter(e.ctx, state, pods[5], framework.NewDefaultNodeToStatus())
	if want := "gang team/job: sub-group tp-2: this member cannot be placed, so no member of the sub-group binds; 1 waiting members released"; status.Message() != want {
		t.Errorf("PostFilter message %q, want %q", status.Message(), want)
	}
	if s := e.fw.WaitOnPermit(e.ctx, pods[4]); s.Code() != fwk.Unschedulable || s.Message() != "gang team/job rejected: sub-group tp-2: member p5 cannot be placed" {
		t.Errorf("p4: %v", s)
	}
}

// TestPermitCountsOnlyBindableMembers: members of incomplete sub-groups cannot bind, so they do
// not count toward minMember: with 4 members of a complete partition and 2 + 2 of incomplete
// ones, a job of minMember 8 is not complete.
func TestPermitCountsOnlyBindableMembers(t *testing.T) {
	e := newEnv(t, 60)
	pods := e.partitionedJob(`[{"name":"tp","subGroupSize":4,"minSubGroups":1,"matchLabelKeys":["partition"]}]`, 8, 12, 4)
	for _, i := range []int{0, 1, 2, 3, 4, 5, 8, 9} {
		if s := e.reserveAndPermit(t, pods[i]); s.Code() != fwk.Wait {
			t.Fatalf("Permit(p%d) = %v, want Wait: only 4 members can bind", i, s)
		}
	}
}

// TestElasticGangKeepsWaitersWhileOthersCanComplete: minMember 2 of 4. p0 waits; p1 and p2
// fail one after the other: the other members can still make minMember after p1's failure,
// so p0 keeps its place; after p2's, only p0 and p3 are left, still 2; a third failure (p3)
// leaves one, and the round is rejected.
func TestElasticGangKeepsWaitersWhileOthersCanComplete(t *testing.T) {
	e := newEnv(t, 60)
	pods := e.gangOf(2, 4)
	if s := e.reserveAndPermit(t, pods[0]); s.Code() != fwk.Wait {
		t.Fatalf("Permit(p0) = %v, want Wait", s)
	}
	keep := "gang team/train: this member cannot be placed now; the other members can still make minMember 2, so they keep their places"
	for _, p := range pods[1:3] {
		if _, s := e.plugin.PostFilter(e.ctx, framework.NewCycleState(), p, framework.NewDefaultNodeToStatus()); s.Message() != keep {
			t.Fatalf("PostFilter(%s) = %q, want %q", p.Name, s.Message(), keep)
		}
	}
	if got := e.registry.Info(podgroup.Key{Namespace: ns, Name: "train"}).Scheduled; got != 1 {
		t.Fatalf("scheduled = %d, want p0 still reserved", got)
	}
	_, s := e.plugin.PostFilter(e.ctx, framework.NewCycleState(), pods[3], framework.NewDefaultNodeToStatus())
	if want := "gang team/train: this member cannot be placed, so no member binds; 1 waiting members released"; s.Message() != want {
		t.Errorf("PostFilter(p3) = %q, want %q", s.Message(), want)
	}
	if s := e.fw.WaitOnPermit(e.ctx, pods[0]); s.Code() != fwk.Unschedulable || s.Message() != "gang team/train rejected: member p3 cannot be placed" {
		t.Errorf("p0: %v", s)
	}
}

// TestElasticGangCountsAMemberTheRegistryHasNotSeen: kube-scheduler's queue and the registry
// receive pod events through different handlers, so p2 can fail before the registry lists it.
// It is a third member of a gang of minMember 2: the other two can still make minMember, so
// p0 keeps waiting (counting only the registry's members, the round was rejected).
func TestElasticGangCountsAMemberTheRegistryHasNotSeen(t *testing.T) {
	e := newEnv(t, 60)
	e.podGroup("train", 2, nil)
	pods := []*v1.Pod{member("p0", "train"), member("p1", "train"), member("p2", "train")}
	e.registry.SetPod(nil, pods[0])
	e.registry.SetPod(nil, pods[1])
	if s := e.reserveAndPermit(t, pods[0]); s.Code() != fwk.Wait {
		t.Fatalf("Permit(p0) = %v, want Wait", s)
	}
	keep := "gang team/train: this member cannot be placed now; the other members can still make minMember 2, so they keep their places"
	if _, s := e.plugin.PostFilter(e.ctx, framework.NewCycleState(), pods[2], framework.NewDefaultNodeToStatus()); s.Message() != keep {
		t.Errorf("PostFilter(p2) = %q, want %q", s.Message(), keep)
	}
	if got := e.registry.Info(podgroup.Key{Namespace: ns, Name: "train"}).Scheduled; got != 1 {
		t.Errorf("scheduled = %d, want p0 still reserved", got)
	}
}

// TestElasticGangForgetsFailuresOfMembersThatReserved: minMember 3 of 4. p1 fails, then
// reserves after all; when p2 fails, only p2 counts as failed: p0, p1 and p3 can still make
// minMember, so the waiting members keep their places.
func TestElasticGangForgetsFailuresOfMembersThatReserved(t *testing.T) {
	e := newEnv(t, 60)
	pods := e.gangOf(3, 4)
	if s := e.reserveAndPermit(t, pods[0]); s.Code() != fwk.Wait {
		t.Fatalf("Permit(p0) = %v, want Wait", s)
	}
	keep := "gang team/train: this member cannot be placed now; the other members can still make minMember 3, so they keep their places"
	if _, s := e.plugin.PostFilter(e.ctx, framework.NewCycleState(), pods[1], framework.NewDefaultNodeToStatus()); s.Message() != keep {
		t.Fatalf("PostFilter(p1) = %q, want %q", s.Message(), keep)
	}
	if s := e.reserveAndPermit(t, pods[1]); s.Code() != fwk.Wait {
		t.Fatalf("Permit(p1) = %v, want Wait", s)
	}
	if _, s := e.plugin.PostFilter(e.ctx, framework.NewCycleState(), pods[2], framework.NewDefaultNodeToStatus()); s.Message() != keep {
		t.Errorf("PostFilter(p2) = %q, want %q", s.Message(), keep)
	}
	if got := e.registry.Info(podgroup.Key{Namespace: ns, Name: "train"}).Scheduled; got != 2 {
		t.Errorf("scheduled = %d, want p0 and p1 still reserved", got)
	}
}

// TestPostFilterOfAMemberLeftOut: a member its gang's plan left out (marked so by
// NetworkTopologyAware's PreFilter) fails in every cycle by design: with nobody of its
// sub-group waiting, its failure records no Event; the same failure of a member that was
// planned does, and both say what the gang does.
func TestPostFilterOfAMemberLeftOut(t *testing.T) {
	e := newEnv(t, 60)
	pods := e.partitionedJob(`[{"name":"tp","subGroupSize":2,"matchLabelKeys":["partition"]}]`, 2, 6, 2)
	want := "gang team/job: sub-group tp-2: this member cannot be placed, so no member of the sub-group binds"
	for _, tc := range []struct {
		name       string
		leftOut    bool
		wantEvents []string
	}{
		{name: "left out by the plan", leftOut: true},
		{name: "planned", wantEvents: []string{"Warning GangRejected gang team/job: sub-group tp-2: member p4 cannot be placed; 0 waiting members rejected and their resources released"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := framework.NewCycleState()
			if tc.leftOut {
				gangstate.MarkDeferred(state)
			}
			if _, status := e.plugin.PostFilter(e.ctx, state, pods[4], framework.NewDefaultNodeToStatus()); status.Message() != want {
				t.Errorf("PostFilter message %q, want %q", status.Message(), want)
			}
			if diff := cmp.Diff(tc.wantEvents, drain(e.recorder.Events)); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestBlockerThatReservesUnblocksItsGang: p1 fit no node and blocked its gang; a node
// changed, kube-scheduler's queue retried p1 and it reserved, before the registry saw the
// node change. Its Permit activates p0, whose PreFilter must not refuse it for a blocker
// that fits after all (it waited for an event that had already passed: CI failed on this in
// TestGangBlockedByMemberThatFitsNoNode).
func TestBlockerThatReservesUnblocksItsGang(t *testing.T) {
	e := newEnv(t, 60)
	pods := e.gangOf(2, 2)
	key := podgroup.Key{Namespace: ns, Name: "train"}
	e.gangs.SetBlocked(key, gangstate.Blocker{UID: "p1", Name: "p1", Reason: "2 node(s) didn't match Pod's node affinity/selector"})
	blocked := "gang team/train is blocked: its member p1 fits no node (2 node(s) didn't match Pod's node affinity/selector); the gang is retried when that member or the nodes change"
	if _, s := e.plugin.PreFilter(e.ctx, framework.NewCycleState(), pods[0], nil); s.Message() != blocked {
		t.Fatalf("PreFilter(p0) while p1 blocks = %q, want %q", s.Message(), blocked)
	}
	if s := e.reserveAndPermit(t, pods[1]); s.Code() != fwk.Wait {
		t.Fatalf("Permit(p1) = %v, want Wait", s)
	}
	if _, s := e.plugin.PreFilter(e.ctx, framework.NewCycleState(), pods[0], nil); s.Code() != fwk.Skip {
		t.Errorf("PreFilter(p0) after the blocker reserved = %v %q, want Skip", s.Code(), s.Message())
	}
}

// TestNeededSubGroupWithoutSpareReleasesTheRound: minSubGroups 2 of tp (pairs), minMember 2;
// tp-0's pods are deleted, tp-1 waits in Permit, a member of tp-2 fails. The job cannot reach
// minSubGroups without tp-2 (tp-0 is gone: it does not count), and tp-2 has no member to
// spare, so the waiting members are released, although the job has more members than
// minMember. Before, tp-0 counted as one of the job's sub-groups and tp-1 kept waiting
// until the round's deadline.
func TestNeededSubGroupWithoutSpareReleasesTheRound(t *testing.T) {
	e := newEnv(t, 60)
	pods := e.partitionedJob(`[{"name":"tp","subGroupSize":2,"minSubGroups":2,"matchLabelKeys":["partition"]}]`, 2, 6, 2)
	e.registry.DeletePod(pods[0])
	e.registry.DeletePod(pods[1])
	if s := e.reserveAndPermit(t, pods[2]); s.Code() != fwk.Wait {
		t.Fatalf("Permit(p2) = %v, want Wait", s)
	}
	_, s := e.plugin.PostFilter(e.ctx, framework.NewCycleState(), pods[4], framework.NewDefaultNodeToStatus())
	if want := "gang team/job: this member cannot be placed, so no member binds; 1 waiting members released"; s.Message() != want {
		t.Errorf("PostFilter(p4) = %q, want %q", s.Message(), want)
	}
	if s := e.fw.WaitOnPermit(e.ctx, pods[2]); s.Code() != fwk.Unschedulable {
		t.Errorf("p2 after p4 failed: %v, want rejected", s)
	}
}
