// Package gangpreemption implements the GangPreemption plugin, which replaces kube-scheduler's
// DefaultPreemption in the profile: a pod that is not in a gang is preempted for exactly as
// DefaultPreemption does (the plugin wraps it); a gang member preempts for its whole gang, all
// or nothing. Per candidate domain (the HyperNodes of the tiers its constraint allows, lowest
// tier first; the whole cluster for a gang without a hard constraint) the plugin removes
// every pod of lower priority, checks that minMember members then fit, gives back every
// victim that is not needed (highest priority first), and evicts the victims of the cheapest
// domain. When no domain can hold the gang even then, nothing is evicted and the members say
// so. See docs/design.md, "Gang preemption".
package gangpreemption

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	schedclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/eventlog"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/names"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podstatus"
)

// Name is the name of the plugin used in the plugin registry and configurations.
const Name = names.GangPreemption

// Event reasons recorded on PodGroups.
const (
	// EventGangPreempting: pods of lower priority are evicted so that the gang fits.
	EventGangPreempting = "GangPreempting"
	// EventPreemptionNotHelpful: no domain can hold the gang even without the pods of lower
	// priority; nothing was evicted.
	EventPreemptionNotHelpful = "PreemptionNotHelpful"
	eventAction               = "Preempt"
)

// GangPreemption is the plugin. DefaultPreemption is embedded for the pods that are not gang
// members, and for its PreEnqueue (a pod whose preemption runs asynchronously waits for it).
type GangPreemption struct {
	*defaultpreemption.DefaultPreemption
	handle   fwk.Handle
	cache    *hypernode.Cache
	registry *podgroup.Registry
	gangs    *gangstate.Tracker
	events   *eventlog.Log
	// devices counts the members' DRA devices in the simulations; nil without DRA.
	devices *devices.Source
	pods    corelisters.PodLister
	pdbs    policylisters.PodDisruptionBudgetLister
	// nominations writes the members' status.nominatedNodeName, as kube-scheduler writes
	// its preemptor's: it holds the room in the API, so a restarted scheduler keeps it.
	nominations *podstatus.Writer
	// ctx is the scheduler's: evictions outlive the cycle that decided them (evict.go).
	ctx context.Context
	// evictPod evicts one victim (upstream's executor; the tests fake it); evicting counts
	// the evictions under way, for the tests to wait on.
	evictPod func(ctx context.Context, preemptor *gangPreemptor, victim *v1.Pod) (inMemory bool, err error)
	evicting sync.WaitGroup

	// Each gang's preemption under way is in the gang state (gangstate.Preemption).
	// refused are the pods whose eviction failed, until when they are not chosen again,
	// guarded by refusedMu.
	refusedMu sync.Mutex
	refused   map[types.UID]time.Time
	// natives are the native pod groups' preemptions under way, by entity key (a PodGroup and
	// a CompositePodGroup may share a name), guarded by nativesMu (native.go).
	nativesMu sync.Mutex
	natives   map[string]*nativeAttempt
	// holdRecords writes each gang's hold record on its PodGroup (hold.go); holdWakes are
	// the retries of gangs that may hold later, guarded by holdWakesMu.
	holdRecords *podgroup.HoldWriter
	holdWakesMu sync.Mutex
	holdWakes   map[podgroup.Key]holdWake
	// scheduling says this process has begun to schedule (beginScheduling, once).
	scheduling atomic.Bool
	beginOnce  sync.Once
}

var (
	_ fwk.PostFilterPlugin  = &GangPreemption{}
	_ fwk.PreEnqueuePlugin  = &GangPreemption{}
	_ fwk.PreFilterPlugin   = &GangPreemption{}
	_ fwk.EnqueueExtensions = &GangPreemption{}
	_ fwk.SignPlugin        = &GangPreemption{}
)

// defaultArgs are DefaultPreemption's defaults (kube-scheduler's v1 config): the wrapped
// plugin is configured by them, since the profile disables DefaultPreemption itself.
func defaultArgs() *schedconfig.DefaultPreemptionArgs {
	return &schedconfig.DefaultPreemptionArgs{MinCandidateNodesPercentage: 10, MinCandidateNodesAbsolute: 100}
}

// New builds the plugin around the scheduler's tree cache and gang state (with its PodGroup
// registry).
func New(ctx context.Context, handle fwk.Handle, cache *hypernode.Cache, gangs *gangstate.Tracker, podGroups schedclientset.Interface) (*GangPreemption, error) {
	registry := gangs.Registry()
	fts := plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	dp, err := defaultpreemption.New(ctx, defaultArgs(), handle, fts)
	if err != nil {
		return nil, fmt.Errorf("building the wrapped DefaultPreemption: %w", err)
	}
	pl := &GangPreemption{
		DefaultPreemption: dp,
		handle:            handle,
		cache:             cache,
		registry:          registry,
		gangs:             gangs,
		events:            eventlog.New(handle.EventRecorder(), eventAction),
		devices:           devices.NewSource(handle.SharedDRAManager(), dynamicresources.AllocatorFeatures(fts)).WithVictims(),
		pods:              handle.SharedInformerFactory().Core().V1().Pods().Lister(),
		pdbs:              handle.SharedInformerFactory().Policy().V1().PodDisruptionBudgets().Lister(),

		refused: map[types.UID]time.Time{},
		ctx:     ctx,
	}
	pl.evictPod = func(ctx context.Context, preemptor *gangPreemptor, victim *v1.Pod) (bool, error) {
		return pl.Executor.PreemptPod(ctx, &victimCandidate{node: victim.Spec.NodeName, pod: victim}, preemptor, victim, Name)
	}
	pl.nominations = podstatus.NewWriter("gang-preemption-nominations", handle.ClientSet(),
		handle.SharedInformerFactory().Core().V1().Pods().Lister(), pl.nominationWish)
	pl.nominations.Run(ctx)
	registry.OnGroupDelete(pl.forget)
	if err := pl.addVictimHandler(ctx); err != nil {
		return nil, err
	}
	if err := pl.startHolds(ctx, podGroups); err != nil {
		return nil, err
	}
	return pl, nil
}

// startHolds prepares the gangs' hold records and the reports of holds that end. Writing
// records and ending stale holds begin with the first scheduling cycle (beginScheduling).
func (pl *GangPreemption) startHolds(ctx context.Context, client schedclientset.Interface) error {
	pl.holdWakes = map[podgroup.Key]holdWake{}
	pl.holdRecords = podgroup.NewHoldWriter(client, pl.registry, func(key podgroup.Key) *podgroup.HoldRecord {
		if h := pl.gangs.Hold(key); h != nil {
			return h.Record()
		}
		return nil
	})
	logger := klog.FromContext(ctx)
	pl.gangs.OnHoldEnd(func(e gangstate.HoldEnd) { pl.holdEnded(logger, e) })
	return nil
}

// beginScheduling starts, at this process's first scheduling cycle once the PodGroups are
// known, what only the scheduler that schedules may do: continue the holds the PodGroups
// record, write records, and end stale holds. A standby replica builds its plugins and
// informers before it leads but runs no cycle, so it neither restores a record it would
// hold stale nor writes over the leader's. One atomic load per cycle after that.
func (pl *GangPreemption) beginScheduling() {
	if pl.scheduling.Load() || !pl.registry.HasSynced() {
		return
	}
	pl.beginOnce.Do(func() {
		logger := klog.FromContext(pl.ctx)
		n := pl.gangs.RestoreHolds(time.Now())
		logger.V(2).Info("Scheduling begins: holds restored from their PodGroups' records", "holds", n)
		pl.holdRecords.Run(pl.ctx)
		go wait.UntilWithContext(pl.ctx, pl.sweepHolds, holdSweepPeriod)
		pl.scheduling.Store(true)
	})
}

// Name returns the name of the plugin.
func (pl *GangPreemption) Name() string { return Name }

// PostFilter preempts for a pod that fits no node: DefaultPreemption for a pod without a
// gang, the whole gang's preemption for a gang member. Per-pod preemption never runs for a
// gang member: it would evict for one member of a gang that may never fit as a whole. While
// the gang's preemption runs (it just evicted, its victims terminate, or the scheduler's
// cache still counts them) the status is UnschedulableAndUnresolvable, with the member's
// nomination as the result: it ends the PostFilter chain before Gang's, which would release
// the members waiting in Permit, and their nodes with them, to pods of lower priority (the
// preemption counted those members as placed). Otherwise it is Unschedulable, and Gang's
// PostFilter releases them as after any failure.
func (pl *GangPreemption) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	result, status := pl.postFilter(ctx, state, pod, m)
	if status.Code() == fwk.Unschedulable && gangstate.RefusedBeforeFilterMark.In(state) {
		// Gang's PreFilter refused the member before the other PreFilter plugins ran: the
		// PostFilter plugins after this one have nothing to do for it (Gang's), or fail on
		// the state their PreFilter never wrote (DynamicResources': "not found", in the
		// member's condition). This decision ends the chain.
		status = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, status.Reasons()...)
	}
	return result, status
}

func (pl *GangPreemption) postFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	key, ok := podgroup.KeyOf(pod)
	if !ok {
		return pl.DefaultPreemption.PostFilter(ctx, state, pod, m)
	}
	// A member refused by PreFilter while its gang's preemption was under way, or one of a
	// draining gang that failed on a snapshot taken before the drain began: Unresolvable ends
	// the chain before Gang's PostFilter, so the members that reserved the freed nodes keep
	// them, and this one keeps its nomination. One that failed in Filter is requeued by the
	// activation that began the drain.
	if d := readHeld(state); d != nil {
		if !d.terminating {
			return nominate(d.node), fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "preemption: "+drainingMsg(d.node))
		}
		if msg, node, running := pl.preempting(key, pod); running {
			return nominate(node), fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "preemption: "+msg)
		}
		// The attempt ended after PreFilter refused the member (an eviction failed, its
		// deadline, the PodGroup deleted): its end activated the gang, which decides again
		// in a full cycle; until then the member holds nothing.
		return clearNomination(), fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("preemption: gang %s: its preemption ended during this cycle; the gang is retried", key))
	}
	// The member keeps its nomination: kube-scheduler ends a failed attempt by resetting the
	// pod's nomination to the result's (or to its status.nominatedNodeName). Asked again after
	// resume, which may start an attempt, or end one at once when its victims are gone.
	if msg, node, running := pl.preempting(key, pod); running {
		return nominate(node), fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "preemption: "+msg)
	}
	pl.resume(ctx, key, pod)
	if msg, node, running := pl.preempting(key, pod); running {
		return nominate(node), fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "preemption: "+msg)
	}
	if pl.gangs.Held(pod) {
		// Another member is retried for the gang (GangRetryGate): it decides for all.
		return clearNomination(), fwk.NewStatus(fwk.Unschedulable, withHold(pl.gangs.Hold(key), fmt.Sprintf("preemption: gang %s is retried through another member", key)))
	}
	if gangstate.Yielded(state) {
		// The gang was planned into room that lower-precedence gangs are giving back: the
		// room is there without evicting anybody.
		return clearNomination(), fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("preemption: not attempted: gang %s is planned into room that lower-precedence gangs are releasing", key))
	}
	if gangstate.HeldForRoom(state) {
		// Gang refused the member for its gang's last failure, which decided preemption:
		// nothing that can make room happened since. Time passed, though: the gang may hold.
		msg := fmt.Sprintf("preemption: not attempted: gang %s waits for room after its last attempt", key)
		if held := pl.holdFor(ctx, state, pod, key); held != "" {
			msg = held + "; " + msg
		}
		return clearNomination(), fwk.NewStatus(fwk.Unschedulable, msg)
	}
	if gangstate.Deferred(state) {
		// The plan holds the gang without this member (minMember, and minSubGroups): the gang
		// preempts for what it needs, not for the members it can do without.
		return clearNomination(), fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("preemption: not attempted: gang %s is planned without this member, which waits for room", key))
	}
	schedmetrics.PreemptionAttempts.Inc()
	result, status := pl.preemptForGang(ctx, state, pod, key)
	if result == nil {
		// No preemption holds room for the member: a nomination it still has (of an
		// abandoned attempt, or one from before a restart) goes, in memory and in the API,
		// as DefaultPreemption clears its preemptor's.
		result = clearNomination()
	}
	verdict := "preemption: " + status.Message()
	if !status.IsSuccess() {
		gangstate.SetPreemptionVerdict(state, verdict)
	}
	if status.Code() == fwk.Unschedulable {
		// Nothing is evicted for the gang: it may hold a domain that drains for it instead.
		if held := pl.holdFor(ctx, state, pod, key); held != "" {
			verdict = held + "; " + verdict
		}
	}
	return result, fwk.NewStatus(status.Code(), verdict)
}

// withHold puts what the gang's hold waits for before a member's message (none: as it is).
func withHold(h *gangstate.Hold, msg string) string {
	if h == nil {
		return msg
	}
	return h.Message() + "; " + msg
}

// clearNomination is the PostFilter result that clears the pod's nominated node.
func clearNomination() *fwk.PostFilterResult {
	return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride}}
}

// nominate is the PostFilter result that keeps the member on the node its gang's attempt
// nominated it to; a member the attempt does not place ("") holds nothing.
func nominate(node string) *fwk.PostFilterResult {
	if node == "" {
		return clearNomination()
	}
	return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatedNodeName: node, NominatingMode: fwk.ModeOverride}}
}

// nominationWish is nominationUpdate for a wish still true when it is written: a node only
// while the gang's preemption still nominates the member there and its victims terminate
// (the writes of a large gang stream in after the preemption may have ended and a plan
// nominated the member elsewhere).
func (pl *GangPreemption) nominationWish(pod *v1.Pod, node string) *v1.PodStatus {
	if node != "" {
		key, _ := podgroup.KeyOf(pod)
		pl.gangs.Lock()
		a := pl.gangs.WaitingPreemptionLocked(key)
		current := a != nil && a.Nodes[pod.UID] == node
		pl.gangs.Unlock()
		if !current {
			return nil
		}
	}
	return podstatus.SetNominatedNode(pod, node)
}

// forget ends the preemption of a gang whose PodGroup was deleted, and withdraws the
// nominations of one whose victims still terminated.
func (pl *GangPreemption) forget(key podgroup.Key) {
	pl.gangs.Lock()
	a := pl.gangs.ForgetPreemptionLocked(key)
	pl.gangs.Unlock()
	if a != nil && !a.Draining {
		pl.withdraw(a.Members)
	}
	if a != nil {
		// Members refused in PreFilter wait for no other event of this plugin.
		pl.gangs.ActivatePending(klog.Background(), pl.handle, key)
		pl.gangs.PreemptionEnded(key)
	}
	pl.events.Forget(key)
}

// withdraw clears the members' nominations of an abandoned preemption, in memory and in the
// API.
func (pl *GangPreemption) withdraw(members []*v1.Pod) {
	for _, m := range members {
		pl.handle.DeleteNominatedPodIfExists(m)
		pl.nominations.Set(m, "")
	}
}
