package gangstate

import fwk "k8s.io/kube-scheduler/framework"

// CycleMark is a fact about a member's scheduling cycle that one plugin writes into the
// cycle's state for the others (a marker without data).
type CycleMark fwk.StateKey

// Cycle marks NetworkTopologyAware and Gang write for the PostFilter plugins.
const (
	// deferredMark: the member's gang's plan leaves it out for lack of room (a sub-group that
	// does not fit next to the others, a member beyond minMember).
	deferredMark CycleMark = "hypernode.dev/deferred"
	// yieldedMark: the member's gang was just planned into room that waiting
	// lower-precedence gangs are giving back.
	yieldedMark CycleMark = "hypernode.dev/yielded"
	// waitingForRoomMark: see MarkHeldForRoom.
	waitingForRoomMark CycleMark = "hypernode.dev/waiting-for-room"
	// RefusedBeforeFilterMark: Gang's PreFilter refused the member (held behind its blocker,
	// or for its gang's remembered failure) before the other PreFilter plugins ran.
	RefusedBeforeFilterMark CycleMark = "hypernode.dev/refused-before-filter"
	// SimulationMark: the state is a capacity simulation's, not a scheduling cycle's
	// (NetworkTopologyAware's SimulationState): PreFilter plugins that plan, gate or record
	// an attempt skip it.
	SimulationMark CycleMark = "hypernode.dev/simulation"
	// NoPlacementMark: NetworkTopologyAware generated no placement for a native pod group, so
	// no member ran a PreFilter plugin in its pod-group cycle (a pod-group cycle's mark).
	NoPlacementMark CycleMark = "hypernode.dev/no-placement"
)

// stateStore is a cycle state: a pod's, or a pod group's.
type stateStore interface {
	Read(fwk.StateKey) (fwk.StateData, error)
	Write(fwk.StateKey, fwk.StateData)
}

type markState struct{}

func (markState) Clone() fwk.StateData { return markState{} }

// Set records the mark in the cycle's state.
func (m CycleMark) Set(state stateStore) { state.Write(fwk.StateKey(m), markState{}) }

// In reports whether the cycle's state carries the mark.
func (m CycleMark) In(state stateStore) bool {
	_, err := state.Read(fwk.StateKey(m))
	return err == nil
}

// MarkHeldForRoom records in the cycle's state that Gang refused the member because its
// gang's last attempt found no room and nothing that can make room happened since.
func MarkHeldForRoom(state fwk.CycleState) { waitingForRoomMark.Set(state) }

// HeldForRoom reports whether Gang refused the member of this cycle for its gang's
// remembered failure: the attempt that failed decided preemption already, and the refusal
// rejects nobody.
func HeldForRoom(state fwk.CycleState) bool { return waitingForRoomMark.In(state) }

// preemptionVerdictKey carries GangPreemption's verdict on the cycle's member to Gang's
// PostFilter, which runs after it.
const preemptionVerdictKey fwk.StateKey = "hypernode.dev/preemption-verdict"

type verdictState string

func (v verdictState) Clone() fwk.StateData { return v }

// SetPreemptionVerdict records why preemption does not place the cycle's member.
func SetPreemptionVerdict(state fwk.CycleState, verdict string) {
	state.Write(preemptionVerdictKey, verdictState(verdict))
}

// PreemptionVerdict returns why preemption did not place the cycle's member ("" when it was
// not asked): the remembered failure of a gang placed member by member keeps it, so that its
// refused members still say why preemption does not help.
func PreemptionVerdict(state fwk.CycleState) string {
	v, err := state.Read(preemptionVerdictKey)
	if err != nil {
		return ""
	}
	s, _ := v.(verdictState)
	return string(s)
}

// MarkDeferred records in the cycle's state that the member is left out by its gang's plan.
func MarkDeferred(state fwk.CycleState) { deferredMark.Set(state) }

// Deferred reports whether the member of this cycle is left out by its gang's plan: the gang
// runs without it, so it is nothing to preempt for and its failure rejects nobody.
func Deferred(state fwk.CycleState) bool { return deferredMark.In(state) }

// MarkYielded records in the cycle's state that the member's gang was planned into room that
// lower-precedence gangs yield.
func MarkYielded(state fwk.CycleState) { yieldedMark.Set(state) }

// Yielded reports whether the member's gang was planned in this cycle into room that
// lower-precedence gangs yield: the member retries once they have released it, so nothing
// is to be preempted for it and its refusal rejects nobody of its own gang.
func Yielded(state fwk.CycleState) bool { return yieldedMark.In(state) }
