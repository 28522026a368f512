package gangstate

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// View is one gang as a member's scheduling cycle sees it: the gang's data (the PodGroup and
// its counts, and its members when the gang is planned), its state (its plan or failed plan
// as far as they answer the member), the member's precedence against other gangs, and the
// tree it was judged on. It is taken once, when the member's PreFilter begins (Begin), and
// kept in the cycle's state (ViewOf) for the later extension points of the same cycle. It
// must not be modified, except through the tracker.
type View struct {
	Key  Key
	Pod  *v1.Pod
	Info podgroup.Info
	Tree *hypernode.Snapshot
	// Precedence is the gang's when it competes for room, judged by this member.
	Precedence podgroup.Precedence
	// Answer is what answers the member, as the judge of Begin found: the gang's Plan, its
	// Failure (another member retries for the gang), its constraint (the tree cannot serve
	// it), or nothing (the gang is planned again). Plan is nil unless it answers; Failure is
	// the gang's last failed plan, whether it answers or not (a new failure counts on).
	Answer  Answer
	Plan    *Plan
	Failure *PlanFailure
	// Dropped is the plan Begin dropped because it did not answer: the caller withdraws its
	// promises.
	Dropped *Plan
	// Gang is the gang's members, this one among them, read with the rest of the view when
	// the gang is planned again (Answer is Replan).
	Gang podgroup.Gang
	// Preempted is the room the gang's last preemption made, which its next plan tries
	// first (nil for none; PreemptedRoomFor).
	Preempted *PreemptedRoom
}

// Answer is what answers a member of a gang that NetworkTopologyAware plans.
type Answer int

const (
	// Replan: nothing answers; the gang is planned again.
	Replan Answer = iota
	// PlanAnswers: the gang's plan places the member, or leaves it out for lack of room.
	PlanAnswers
	// FailureAnswers: the gang's last plan failed and nothing that can change that happened;
	// another member retries for the gang.
	FailureAnswers
	// ConstraintRefused: the gang's constraint cannot be served by the tree.
	ConstraintRefusedAnswer
)

const viewKey fwk.StateKey = "hypernode.dev/gang-view"

func (v *View) Clone() fwk.StateData { return v }

// ViewOf returns the view the cycle's PreFilter took (nil: none; the pod is not a member of a
// gang the plugin plans).
func ViewOf(state fwk.CycleState) *View {
	if state == nil {
		return nil
	}
	d, err := state.Read(viewKey)
	if err != nil {
		return nil
	}
	v, _ := d.(*View)
	return v
}

// Cycle is how a plugin begins a member's cycle (Begin).
type Cycle struct {
	// Placed says whether the plugin places the gang; its other members are not viewed.
	Placed func(podgroup.Info) bool
	// Ready waits until the plugin can judge (its informers synced) and returns the tree to
	// judge on.
	Ready func(context.Context) (*hypernode.Snapshot, error)
	// Judge decides, under the gangs' lock, what answers the member: the view has the gang's
	// plan and failed plan (either may be nil), which it may update (a plan's last use, a
	// failure's wake). When it answers Replan, the gang's plan is dropped (the view's Dropped,
	// whose promises the caller withdraws). It must not call out, nor the tracker but for its
	// ...Locked methods.
	Judge func(context.Context, *View) Answer
}

// Begin begins a member's scheduling cycle for a plugin that places its gang: the gang's
// requeue claim ends (the next cluster event may requeue the gang again), and the gang's view
// is taken, judged and kept in the cycle's state. It returns nil, and keeps nothing, for a pod
// whose gang the plugin does not place (a pod without a gang, a gang without a PodGroup).
func (t *Tracker) Begin(ctx context.Context, state fwk.CycleState, pod *v1.Pod, c Cycle) (*View, error) {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return nil, nil
	}
	t.reg.RLock()
	info := t.reg.InfoLocked(key)
	t.reg.RUnlock()
	if info.PodGroup == nil || !c.Placed(info) {
		return nil, nil
	}
	tree, err := c.Ready(ctx)
	if err != nil {
		return nil, err
	}
	t.reg.Lock()
	defer t.reg.Unlock()
	v := &View{Key: key, Pod: pod, Info: t.reg.InfoLocked(key), Tree: tree}
	if v.Info.PodGroup == nil || !c.Placed(v.Info) {
		return nil, nil
	}
	v.Precedence = podgroup.PrecedenceOf(pod, key, v.Info.PodGroup)
	if s, _ := t.gangLocked(key); s != nil {
		s.requeued = ""
		v.Plan, v.Failure = s.plan, s.planFailure
		if s.preempted != nil && t.now().Before(s.preemptedUntil) {
			v.Preempted = s.preempted
		}
	}
	v.Answer = c.Judge(ctx, v)
	if v.Answer == Replan && v.Plan != nil {
		// The plan that does not answer goes: its slots must not hold the gang's own room
		// against the new plan, and if no new plan comes, its members must not follow it.
		v.Dropped = t.DropPlanLocked(key)
	}
	if v.Answer != PlanAnswers {
		v.Plan = nil
	}
	if v.Answer == Replan {
		v.Gang = t.reg.GangLocked(key).Including(pod)
	}
	state.Write(viewKey, v)
	return v, nil
}

// Settlement is what a member's PreFilter decided for its gang, told to the tracker in one
// step (Settle): exactly one of its parts.
type Settlement struct {
	// Refused: the tree of generation RefusedOn cannot serve the gang's constraint;
	// RetryNow says the tree changed since (the member is activated to be judged again).
	Refused   bool
	RefusedOn uint64
	RetryNow  func() bool
	// Held: the gang's failed plan answered; the member waits in GangRetryGate while another
	// retries for the gang.
	Held bool
	// Plan is the gang's new plan. Others are the members it places besides this one, which
	// are activated when no hold of the gang ended (refused members wait in the queue); the
	// gang's held members are activated when its hold ends.
	Plan   *Plan
	Others []*v1.Pod
	// Failure is the gang's failed plan, made for this member. Blockers are members that fit
	// no node of the cluster, each of which blocks the gang if the job cannot do without it
	// (and the others known to fit nowhere), tried in order until one does; Status gives the
	// failure's answer once that is known (the index of the blocker, -1 for none).
	Failure  *PlanFailure
	Blockers []Blocker
	Status   func(blocked int) *fwk.Status
	// Activate are members activated once the lock is released.
	Activate []*v1.Pod
}

// Settled is what a Settlement did.
type Settled struct {
	// Replaced is the plan the new one replaced (nil: none), whose promises the caller
	// withdraws.
	Replaced *Plan
	// Blocked is the index of the Settlement's blocker that blocks the gang (-1: none);
	// Reported says it newly does.
	Blocked  int
	Reported bool
	// Status is the failure's answer.
	Status *fwk.Status
}

// Settle applies a member's Settlement to its gang, under the lock, then activates the members
// it wakes (held members whose hold ended, the member itself to go to the gate or to be
// judged again) outside it.
func (t *Tracker) Settle(logger klog.Logger, handle fwk.Handle, v *View, s Settlement) Settled {
	out := Settled{Blocked: -1}
	activate := s.Activate
	notify := false
	t.reg.Lock()
	switch {
	case s.Refused:
		t.RefuseLocked(v.Key, s.RefusedOn)
		if s.RetryNow != nil && s.RetryNow() {
			t.ForgetRefusalLocked(v.Key)
			activate = append(activate, v.Pod)
		}
	case s.Held:
		activate = append(activate, t.toRetryGateLocked(handle.ProfileName(), v.Pod)...)
	case s.Plan != nil:
		out.Replaced = t.SetPlanLocked(v.Key, s.Plan)
		if s.RetryNow != nil && s.RetryNow() {
			// The tree changed while the plan was made, and its listener ran before this plan
			// existed: a plan that places nobody no longer answers, and nothing else would
			// retry the members it leaves out.
			activate = append(activate, v.Pod)
		}
		if g, d := t.peekLocked(v.Key); g != nil && g.retryHeld {
			t.step(v.Key, RetryReleased, func() { g.releaseRetryLocked() })
			activate = append(activate, pendingLocked(d)...)
		} else {
			activate = append(activate, s.Others...)
		}
	case s.Failure != nil:
		for i, b := range s.Blockers {
			blocked, reported, freed := t.setBlockedLocked(v.Key, b)
			notify = notify || freed
			if blocked {
				out.Blocked, out.Reported = i, reported
				break
			}
		}
		out.Status = s.Status(out.Blocked)
		s.Failure.Status = out.Status
		t.RecordPlanFailureLocked(v.Key, v.Pod, s.Failure)
		if s.RetryNow != nil && s.RetryNow() {
			// The tree changed while the plan was made, and its listener ran before this
			// failure existed: nothing else would retry the gang on the new tree.
			activate = append(activate, v.Pod)
		}
	}
	t.reg.Unlock()
	if notify {
		t.reg.Notify(v.Key, false)
	}
	Activate(logger, handle, activate...)
	return out
}

// pendingLocked returns the group's pending members.
func pendingLocked(d *podgroup.Group) []*v1.Pod {
	if d == nil {
		return nil
	}
	var out []*v1.Pod
	d.EachPendingLocked(func(_ types.UID, p *v1.Pod) { out = append(out, p) })
	return out
}
