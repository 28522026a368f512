package gangpreemption

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/metrics"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/networktopology"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// Holds (docs/design.md, "Holds"): a gang that cannot be placed, even by preemption, and that
// has waited holds the domain where it will fit soonest; NetworkTopologyAware's Filter keeps
// the pods after it in queue order off the room it needs there (gangstate.Hold).

// Event reasons of holds, recorded on PodGroups.
const (
	// EventGangHolding: the gang holds a domain that drains for it.
	EventGangHolding = "GangHolding"
	// EventHoldImpossible: no domain can host the gang even once every pod of its priority
	// or lower finishes; it holds nothing.
	EventHoldImpossible = "HoldImpossible"
	// EventHoldReleased: the gang's hold ended.
	EventHoldReleased = "HoldReleased"
)

// holdSweepPeriod is how often holds are checked against their timeout.
const holdSweepPeriod = 5 * time.Second

// maxInTheWay is how many of the pods a hold waits for its messages name.
const maxInTheWay = 3

// holdChoice is a domain where the gang fits once the pods in the way finish.
type holdChoice struct {
	*choice
	// load is how much of the domain's nodes the pods in the way take, in nodes (each pod's
	// share of its node, over the resources the gang requests).
	load float64
}

// sooner orders the domains a gang may hold by how soon it can fit there: the fewest pods in
// the way, the least room they take, the lowest tier, the smallest surplus (the placement
// strategy's tightest domain), the name.
func (c *holdChoice) sooner(o *holdChoice) bool {
	if c.evicted != o.evicted {
		return c.evicted < o.evicted
	}
	if c.load != o.load {
		return c.load < o.load
	}
	if ct, ot := tierRank(c.domain.tier), tierRank(o.domain.tier); ct != ot {
		return ct < ot
	}
	if c.surplus != o.surplus {
		return c.surplus < o.surplus
	}
	return c.domain.name < o.domain.name
}

// tierRank ranks the whole cluster (tier 0) after every HyperNode.
func tierRank(tier int) int {
	if tier == 0 {
		return int(^uint(0) >> 1)
	}
	return tier
}

// describe says what the domain waits for, for the domains not chosen.
func (c *holdChoice) describe() string {
	return fmt.Sprintf("%s waits for %d pod(s)", c.domain.name, c.evicted)
}

// holdFor decides the gang's hold after preemption could not place it: none before the gang
// has waited, its current one while the gang still fits there once the pods in the way
// finish, else the domain where it fits soonest. It returns what the member's condition says
// of it ("" when the gang does not hold).
func (pl *GangPreemption) holdFor(ctx context.Context, state fwk.CycleState, pod *v1.Pod, key podgroup.Key) string {
	logger := klog.FromContext(ctx)
	info := pl.registry.Info(key)
	if info.PodGroup == nil || info.HoldErr != nil {
		return ""
	}
	wait, on := pl.gangs.HoldWait(info)
	current := pl.gangs.Hold(key)
	if !on {
		pl.gangs.ReleaseHold(key, gangstate.HoldDisabled)
		return ""
	}
	now := time.Now()
	if current == nil {
		due := info.PodGroup.CreationTimestamp.Add(wait)
		if cooled := pl.gangs.HoldCooldown(key); cooled.After(due) {
			due = cooled
		}
		if now.Before(due) {
			pl.wakeAt(logger, key, due)
			return ""
		}
	}
	su, why := pl.setUp(pod, key)
	if su == nil {
		logger.V(4).Info("Gang does not hold", "podGroup", key, "why", why)
		return ""
	}
	if gangstate.HeldForRoom(state) {
		// Gang's PreFilter refused the member first: the other PreFilter plugins did not run
		// on this cycle's state, which cannot simulate a node; a fresh one can.
		fresh, status := networktopology.SimulationState(ctx, pl.handle, pl.devices, pod)
		if !status.IsSuccess() {
			return fmt.Sprintf("gang %s holds nothing: %s", key, status.Message())
		}
		state = fresh
	}
	sim, err := pl.newSimulation(ctx, state, pod, su, true)
	if err != nil {
		return fmt.Sprintf("gang %s holds nothing: %v", key, err)
	}
	precedence := podgroup.GangPrecedence(key, sim.priority, info.PodGroup.CreationTimestamp.Time)
	taken := pl.heldBefore(key, precedence)
	chosen, others, figures := pl.chooseHold(ctx, sim, su, current, taken)
	if chosen == nil && taken.Len() > 0 {
		if behind, _, _ := pl.chooseHold(ctx, sim, su, nil, nil); behind != nil {
			// It would fit in room held for gangs before it: it waits behind them.
			pl.gangs.ReleaseHold(key, gangstate.HoldDisplaced)
			return fmt.Sprintf("gang %s holds nothing yet: the domains where it fits soonest are held for gangs before it in queue order (%s)",
				key, behind.domain.name)
		}
	}
	if chosen == nil {
		pl.gangs.ReleaseHold(key, gangstate.HoldImpossible)
		msg := fmt.Sprintf("gang %s holds nothing: no domain can host %d members even when every pod of its priority or lower finishes (%s)",
			key, su.need, strings.Join(shorten(figures, 6), ", "))
		pl.events.Record(info.PodGroup, v1.EventTypeWarning, EventHoldImpossible, msg)
		return msg
	}
	h := holdOf(su, sim, chosen, precedence, now)
	if ok, why := pl.gangs.TakeHold(logger, h, pl.holdLimit(len(su.list))); !ok {
		return fmt.Sprintf("gang %s holds nothing: %s", key, why)
	}
	pl.holdRecords.Queue(key)
	if current == nil || current.Since != h.Since {
		metrics.HoldsStartedTotal.Inc()
		msg := fmt.Sprintf("gang %s: %s", key, h.Message())
		if len(others) > 0 {
			msg += "; not chosen: " + strings.Join(shorten(others, 3), "; ")
		}
		pl.events.Record(info.PodGroup, v1.EventTypeNormal, EventGangHolding, msg)
	}
	return h.Message()
}

// holdLimit is how many nodes holds may take together in a cluster of n nodes (-1: all).
func (pl *GangPreemption) holdLimit(n int) int {
	percent := pl.gangs.HoldPolicy().MaxNodesPercent
	if percent >= 100 {
		return -1
	}
	return int(percent) * n / 100
}

// heldBefore returns the nodes held for gangs that come before the gang in queue order: not
// its to hold (holds never share a node, so they never wait on each other).
func (pl *GangPreemption) heldBefore(key podgroup.Key, precedence podgroup.Precedence) sets.Set[string] {
	out := sets.New[string]()
	for _, h := range pl.gangs.Holds().List() {
		if h.Key != key && h.Precedence.Before(precedence) {
			out.Insert(h.Nodes()...)
		}
	}
	return out
}

// chooseHold returns the domain the gang holds: its current one while it still fits there once
// the pods in the way finish (moving would waste the room drained already), else the one where
// it fits soonest among the domains its constraint allows, without the nodes taken. It also
// returns the others that could host it, described, and the figures of those that cannot.
func (pl *GangPreemption) chooseHold(ctx context.Context, sim *simulation, su *setup, current *gangstate.Hold, taken sets.Set[string]) (*holdChoice, []string, []string) {
	var candidates []domain
	for _, tier := range su.tiers {
		for _, d := range tier {
			candidates = append(candidates, without(d, taken))
		}
	}
	if current != nil {
		for _, d := range candidates {
			if d.name == currentDomain(current) {
				if c, _, _ := sim.evaluate(ctx, d); c != nil {
					return pl.holdChoiceOf(sim, c), nil, nil
				}
			}
		}
	}
	var best *holdChoice
	var fitting []*holdChoice
	var figures []string
	for _, d := range candidates {
		c, fit, why := sim.evaluate(ctx, d)
		switch {
		case c != nil:
			hc := pl.holdChoiceOf(sim, c)
			fitting = append(fitting, hc)
			if best == nil || hc.sooner(best) {
				best = hc
			}
		case why != "":
			figures = append(figures, fmt.Sprintf("%s has no plan: %s", d.name, why))
		default:
			figures = append(figures, fmt.Sprintf("%s %d/%d", d.name, fit, sim.need))
		}
	}
	var others []string
	for _, c := range fitting {
		if c != best {
			others = append(others, c.describe())
		}
	}
	sort.Strings(others)
	return best, others, figures
}

// currentDomain is the name of the domain the hold is on, as the candidates name it.
func currentDomain(h *gangstate.Hold) string {
	if h.Domain == "" {
		return wholeCluster
	}
	return h.Domain
}

// without returns the domain without the nodes taken.
func without(d domain, taken sets.Set[string]) domain {
	if taken.Len() == 0 {
		return d
	}
	nodes := make([]string, 0, len(d.nodes))
	for _, n := range d.nodes {
		if !taken.Has(n) {
			nodes = append(nodes, n)
		}
	}
	return domain{name: d.name, tier: d.tier, nodes: nodes}
}

// holdChoiceOf measures the room the choice's pods in the way take.
func (pl *GangPreemption) holdChoiceOf(sim *simulation, c *choice) *holdChoice {
	requested := map[v1.ResourceName]bool{}
	for name := range resourcehelper.PodRequests(sim.pod, resourcehelper.PodResourcesOptions{}) {
		requested[name] = true
	}
	load := 0.0
	for _, u := range c.victims {
		for _, p := range u.pods {
			ni, ok := sim.nodes[p.node]
			if !ok {
				continue
			}
			share, counted := 0.0, 0
			for name, q := range resourcehelper.PodRequests(p.pod, resourcehelper.PodResourcesOptions{}) {
				if have := podgroup.Amount(ni.GetAllocatable(), name); requested[name] && have > 0 {
					share += float64(podgroup.QuantityAmount(name, q)) / float64(have)
					counted++
				}
			}
			if counted > 0 {
				load += share / float64(counted)
			}
		}
	}
	return &holdChoice{choice: c, load: load}
}

// holdOf is the hold of the choice: the room each node must keep for the members placed on
// it, and what the gang still waits for.
func holdOf(su *setup, sim *simulation, c *holdChoice, precedence podgroup.Precedence, now time.Time) *gangstate.Hold {
	members := map[string]*v1.Pod{sim.pod.Name: sim.pod}
	for _, m := range su.gang.Pending {
		members[m.Pod.Name] = m.Pod
	}
	need := map[string]v1.ResourceList{}
	add := func(node string, m *v1.Pod) {
		sum := need[node]
		if sum == nil {
			sum = v1.ResourceList{}
			need[node] = sum
		}
		for r, q := range resourcehelper.PodRequests(m, resourcehelper.PodResourcesOptions{}) {
			total := sum[r]
			total.Add(q)
			sum[r] = total
		}
		// The devices its own claims take: a pod whose claims take them is kept off too.
		if len(m.Spec.ResourceClaims) > 0 && sim.pl.handle != nil {
			d, err := devices.DemandOf(sim.pl.handle.SharedDRAManager(), m)
			if err != nil {
				klog.Background().V(4).Info("Cannot read a held member's device demand", "pod", klog.KObj(m), "err", err)
			}
			for r, q := range d.Requests() {
				total := sum[r]
				total.Add(q)
				sum[r] = total
			}
		}
	}
	for name, node := range c.assign {
		if m, ok := members[name]; ok {
			add(node, m)
		}
	}
	// Members reserved and not bound are released with their gang when it fails: the room
	// they take stays the gang's. While they hold it, later pods see it counted twice (used,
	// and needed), which keeps them off that node a little longer, no more.
	for _, m := range su.gang.Placed {
		if m.Pod.Spec.NodeName == "" && m.Node != "" {
			add(m.Node, m.Pod)
		}
	}
	busy := sets.New[string]()
	var inTheWay []string
	for _, u := range c.victims {
		for _, p := range u.pods {
			busy.Insert(p.node)
			inTheWay = append(inTheWay, p.pod.Namespace+"/"+p.pod.Name)
		}
	}
	sort.Strings(inTheWay)
	h := &gangstate.Hold{Key: su.gang.Key, Need: need, Precedence: precedence, Since: now, InTheWayCount: len(inTheWay),
		InTheWay: inTheWay[:min(len(inTheWay), maxInTheWay)]}
	if c.domain.tier > 0 {
		h.Domain, h.Tier = c.domain.name, c.domain.tier
	}
	for node := range need {
		if !busy.Has(node) {
			h.FreeNodes++
		}
	}
	return h
}

// wakeAt retries the gang when it may hold (its PodGroup old enough, its cool-off over):
// nothing else may requeue it then.
func (pl *GangPreemption) wakeAt(logger klog.Logger, key podgroup.Key, at time.Time) {
	pl.holdWakesMu.Lock()
	defer pl.holdWakesMu.Unlock()
	if t, ok := pl.holdWakes[key]; ok && t.at.Equal(at) {
		return
	} else if ok {
		t.timer.Stop()
	}
	pl.holdWakes[key] = holdWake{at: at, timer: time.AfterFunc(time.Until(at), func() {
		pl.holdWakesMu.Lock()
		delete(pl.holdWakes, key)
		pl.holdWakesMu.Unlock()
		pl.gangs.ActivatePending(logger, pl.handle, key)
	})}
}

// holdWake is a gang's retry when it may hold.
type holdWake struct {
	at    time.Time
	timer *time.Timer
}

// sweepHolds ends the holds past their timeout and those of gangs that cannot use them, and
// puts right the records that are not the holds' (one a user wrote, a write lost to a stale
// cache, a record an earlier leader left).
func (pl *GangPreemption) sweepHolds(context.Context) {
	pl.gangs.EndStaleHolds(time.Now())
	for _, key := range pl.gangs.HoldRecordsOutOfStep() {
		pl.holdRecords.Queue(key)
	}
}

// holdEnded reports a hold that ended, and retries a gang that may hold again.
func (pl *GangPreemption) holdEnded(logger klog.Logger, e gangstate.HoldEnd) {
	h := e.Hold
	metrics.HoldsEndedTotal.WithLabelValues(e.Reason).Inc()
	metrics.HoldDurationSeconds.WithLabelValues(e.Reason).Observe(time.Since(h.Since).Seconds())
	logger.V(2).Info("Gang hold ended", "podGroup", h.Key, "domain", h.Place(), "reason", e.Reason, "held", time.Since(h.Since).Round(time.Second))
	if e.Reason == gangstate.HoldDeleted {
		return // nothing to record on, nobody to tell
	}
	pl.holdRecords.Queue(h.Key)
	if e.Reason != gangstate.HoldMoved {
		pg := pl.registry.Info(h.Key).PodGroup
		pl.events.Record(pg, v1.EventTypeNormal, EventHoldReleased, fmt.Sprintf("gang %s no longer holds %s: %s", h.Key, h.Place(), holdEndWords[e.Reason]))
	}
	switch e.Reason {
	case gangstate.HoldDisplaced:
		pl.gangs.ActivatePending(logger, pl.handle, h.Key) // it chooses again now
	case gangstate.HoldTimedOut:
		pl.wakeAt(logger, h.Key, pl.gangs.HoldCooldown(h.Key))
	}
}

// holdEndWords says why a hold ended, for its Event.
var holdEndWords = map[string]string{
	gangstate.HoldBound:      "the gang bound its members",
	gangstate.HoldTimedOut:   "the hold did not let it bind within hold.timeoutSeconds; it may hold again after hold.waitSeconds",
	gangstate.HoldImpossible: "it cannot fit there, nor anywhere else, even when every pod of its priority or lower finishes",
	gangstate.HoldDisplaced:  "a gang before it in queue order needed its nodes, or the share of the cluster gangs may hold",
	gangstate.HoldDisabled:   "its PodGroup turned holds off",
	gangstate.HoldAbandoned:  "no member of the gang waits to be placed",
	gangstate.HoldGated:      "its members are held back before scheduling (see the PodGroup's Events)",
}
