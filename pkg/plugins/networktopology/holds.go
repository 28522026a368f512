package networktopology

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// Holds (docs/design.md, "Holds"): a gang that waited holds a domain (gangstate.Hold); this
// plugin's Filter keeps every pod that comes after the gang in queue order off the room the
// gang needs there, in scheduling cycles and in every capacity simulation (plans, preemption),
// so that all of them count the same room.

const (
	holdStateKey  fwk.StateKey = "Holds" + Name
	ignorePlanKey fwk.StateKey = "IgnorePlan" + Name
)

// holdState is the holds a pod keeps clear of in one cycle, its request, and the code of a
// refusal: UnschedulableAndUnresolvable for a pod without a gang, so that DefaultPreemption
// does not evict pods on held nodes for it (the room freed would be the gang's); Unschedulable
// for a gang member, whose own gang's preemption decides, and which a hold must not make look
// as if it fit no node for good (gangstate.RefusedForGood).
type holdState struct {
	ahead *gangstate.HoldsAhead
	// req is the pod's requests and the devices its claims take (devices.ClassResource).
	req  v1.ResourceList
	code fwk.Code
	// inventory tells a node's free devices of a class.
	inventory *devices.Inventory
}

func (s *holdState) Clone() fwk.StateData { return s }

type ignorePlan struct{}

func (ignorePlan) Clone() fwk.StateData { return ignorePlan{} }

// WithoutPlan is a copy of the cycle state in which this plugin's Filter does not narrow a
// member to its plan, but still keeps it off held room: GangPreemption's simulation chooses
// the domain itself.
func WithoutPlan(state fwk.CycleState) fwk.CycleState {
	c := state.Clone()
	c.Write(ignorePlanKey, ignorePlan{})
	return c
}

// ignoringPlan reports whether the state is WithoutPlan's.
func ignoringPlan(state fwk.CycleState) bool {
	_, err := state.Read(ignorePlanKey)
	return err == nil
}

// readHolds records in the state the holds the pod must keep clear of, and reports whether
// there are any. No hold: one atomic load.
func (p *NetworkTopologyAware) readHolds(state fwk.CycleState, pod *v1.Pod) bool {
	ix := p.gangs.Holds()
	if ix == nil {
		return false
	}
	key, inGang := podgroup.KeyOf(pod)
	ahead := ix.After(p.precedence(pod, key, inGang), key, inGang)
	if ahead == nil {
		return false
	}
	code := fwk.UnschedulableAndUnresolvable
	if inGang {
		code = fwk.Unschedulable
	}
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	for name, q := range p.deviceDemand(pod).Requests() {
		req[name] = q // the devices its claims take, as a hold's need names them
	}
	state.Write(holdStateKey, &holdState{ahead: ahead, req: req, code: code, inventory: p.inventory})
	return true
}

// precedence is the pod's place in queue order (GangQueueSort): its priority, then its
// gang's PodGroup creation, or its own creation for a pod without a gang.
func (p *NetworkTopologyAware) precedence(pod *v1.Pod, key podgroup.Key, inGang bool) podgroup.Precedence {
	if inGang {
		if created, ok := p.registry.Created(key); ok {
			return podgroup.GangPrecedence(key, corev1helpers.PodPriority(pod), created)
		}
	}
	return podgroup.PlainPrecedence(pod)
}

// heldBy returns why a hold keeps the pod off the node (nil when none does).
func heldBy(state fwk.CycleState, ni fwk.NodeInfo) *fwk.Status {
	s := readState[*holdState](state, holdStateKey)
	if s == nil {
		return nil
	}
	allocatable, requested := ni.GetAllocatable(), ni.GetRequested()
	free := func(name v1.ResourceName) int64 {
		if class, ok := devices.ClassOf(name); ok && s.inventory != nil {
			return s.inventory.Free(ni.Node().Name, class)
		}
		return podgroup.Amount(allocatable, name) - podgroup.Amount(requested, name)
	}
	if h := s.ahead.Keeps(ni.Node().Name, s.req, free); h != nil {
		// One reason for every node of the hold: kube-scheduler counts them as one line.
		return fwk.NewStatus(s.code, fmt.Sprintf("node(s) held for gang %s, which comes before this pod in queue order (%s)", h.Key, h.Place()))
	}
	return nil
}

// holdTouched asks the gangs holding the node to look at their hold again when a pod they do
// not keep away (of higher precedence, or another scheduler's) reserves room there: the
// domain may no longer drain in time, or at all.
func (p *NetworkTopologyAware) holdTouched(logger klog.Logger, pod *v1.Pod, node string) {
	ix := p.gangs.Holds()
	if ix == nil {
		return
	}
	key, inGang := podgroup.KeyOf(pod)
	var touched []podgroup.Key
	for _, h := range ix.On(node) {
		if inGang && h.Key == key {
			continue
		}
		if !h.Precedence.Before(p.precedence(pod, key, inGang)) {
			touched = append(touched, h.Key)
		}
	}
	for _, k := range touched {
		logger.V(4).Info("A pod the hold does not keep away took room of it", "pod", klog.KObj(pod), "node", node, "podGroup", k)
		p.gangs.ActivatePending(logger, p.handle, k)
	}
}
