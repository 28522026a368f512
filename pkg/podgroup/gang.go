package podgroup

import (
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// Member is one member of a gang as a Gang view holds it.
type Member struct {
	Pod *v1.Pod
	// Node is the node the member is bound to or reserved on; "" while it is pending.
	Node string
	// SubGroup is the member's sub-group; InSubGroup is false in the job's default group.
	SubGroup   SubGroup
	InSubGroup bool
}

// Gang is one consistent view of a gang, taken at one moment: its PodGroup with the parsed
// constraints, its pending members in rank order and its placed members with their nodes. It
// is what planning reads, handed out whole so that the planner's inputs come from one read.
// The pods and the PodGroup are shared with the informers and must not be modified.
type Gang struct {
	Key  Key
	Info Info
	// Pending are the members neither bound nor reserved, in rank order (rank, then name).
	Pending []Member
	// Placed are the members bound or reserved, by name.
	Placed []Member
	// SubGroups counts the members of each sub-group, read with the members: dropping a
	// sub-group is judged on the same members the plan places.
	SubGroups []SubGroupState
}

// PlacedNodes returns the node of every placed member (one entry per member).
func (g Gang) PlacedNodes() []string {
	out := make([]string, len(g.Placed))
	for i, m := range g.Placed {
		out[i] = m.Node
	}
	return out
}

// Including returns the view with pod added as a pending member when it is not a member yet
// (the registry has not seen it), in rank order.
func (g Gang) Including(pod *v1.Pod) Gang {
	for _, m := range g.Pending {
		if m.Pod.UID == pod.UID {
			return g
		}
	}
	m := Member{Pod: pod}
	m.SubGroup, m.InSubGroup = SubGroupOf(g.Info.SubGroupPolicies, pod)
	g.Pending = append(append([]Member(nil), g.Pending...), m)
	SortByRank(g.Pending)
	if m.InSubGroup {
		g.SubGroups = countedIn(append([]SubGroupState(nil), g.SubGroups...), m.SubGroup, false)
	}
	return g
}

// countedIn adds one member of sub to states, scheduled or not.
func countedIn(states []SubGroupState, sub SubGroup, scheduled bool) []SubGroupState {
	i := 0
	for i < len(states) && states[i].ID != sub.ID {
		i++
	}
	if i == len(states) {
		states = append(states, SubGroupState{SubGroup: sub})
	}
	states[i].Members++
	if scheduled {
		states[i].Scheduled++
	}
	return states
}

// Gang returns the view of a gang, read under the registry's lock in one pass.
func (r *Registry) Gang(key Key) Gang {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.GangLocked(key)
}

// GangLocked is Gang with the registry's lock held.
func (r *Registry) GangLocked(key Key) Gang {
	gang := Gang{Key: key}
	g := r.groups[key]
	if g == nil {
		return gang
	}
	gang.Info = g.infoLocked()
	for _, c := range g.subCounts {
		gang.SubGroups = append(gang.SubGroups, *c)
	}
	for uid, p := range g.members {
		m := Member{Pod: p}
		m.SubGroup, m.InSubGroup = g.memberSub[uid]
		switch node, reserved := g.assumed[uid]; {
		case g.bound.Has(uid):
			m.Node = p.Spec.NodeName
			gang.Placed = append(gang.Placed, m)
		case reserved:
			m.Node = node
			gang.Placed = append(gang.Placed, m)
		default:
			gang.Pending = append(gang.Pending, m)
		}
	}
	SortByRank(gang.Pending)
	sort.Slice(gang.Placed, func(i, j int) bool { return gang.Placed[i].Pod.Name < gang.Placed[j].Pod.Name })
	return gang
}

// NewGang builds the view of a gang from its PodGroup and its live member pods, as a client
// outside the scheduler sees them: a member with a node is placed. Constraints are parsed
// exactly as the registry parses them, defaultTopology standing for the scheduler's
// (Registry.SetDefaultTopology; nil: none).
func NewGang(pg *schedulingv1alpha1.PodGroup, pods []*v1.Pod, defaultTopology *NetworkTopology) Gang {
	return withPods(Gang{Key: Key{Namespace: pg.Namespace, Name: pg.Name}, Info: infoOf(pg, defaultTopology)}, pods)
}

// withPods adds the live member pods to a gang whose Info is parsed: a pod with a node is
// placed, the others pending, both in rank order, each counted in its sub-group.
func withPods(gang Gang, pods []*v1.Pod) Gang {
	gang.Info.Members = len(pods)
	for _, p := range pods {
		m := Member{Pod: p, Node: p.Spec.NodeName}
		m.SubGroup, m.InSubGroup = SubGroupOf(gang.Info.SubGroupPolicies, p)
		if m.InSubGroup {
			gang.SubGroups = countedIn(gang.SubGroups, m.SubGroup, m.Node != "")
		}
		if m.Node != "" {
			gang.Info.Scheduled++
			gang.Placed = append(gang.Placed, m)
		} else {
			gang.Pending = append(gang.Pending, m)
		}
	}
	SortByRank(gang.Pending)
	SortByRank(gang.Placed)
	return gang
}

// infoOf returns a PodGroup's parsed constraints, without member counts. A PodGroup that says
// nothing of topology (no constraint annotation, no sub-group policy with a constraint of
// its own, no unusable policy annotation) takes defaultTopology (nil: none).
func infoOf(pg *schedulingv1alpha1.PodGroup, defaultTopology *NetworkTopology) Info {
	topology, topologyErr := ParseNetworkTopology(pg.Annotations)
	policies, policyErr := ParseSubGroupPolicies(pg.Annotations, topology)
	info := Info{PodGroup: pg, Topology: topology, TopologyErr: topologyErr, SubGroupPolicies: policies, SubGroupErr: policyErr}
	info.HoldAfter, info.HoldErr = ParseHoldAfter(pg.Annotations)
	info.Hold, info.HoldRecordErr = ParseHoldRecord(pg.Annotations)
	if _, annotated := pg.Annotations[NetworkTopologyAnnotation]; defaultTopology != nil && !annotated && policyErr == nil && !info.PlacedByTopology() {
		info.Topology, info.TopologyDefault = defaultTopology.clone(), true
	}
	return info
}

// SortByRank orders members by rank (Job completion index or hypernode.dev/rank; members
// with a rank first), then by name with the numbers in names compared as numbers (worker-2
// before worker-10, as mpi-operator numbers its workers in rank order): the order in which
// the planner fills leaves, so neighbouring ranks share a leaf.
func SortByRank(members []Member) {
	sort.SliceStable(members, func(i, j int) bool {
		pi, pj := members[i].Pod, members[j].Pod
		ri, iok := Rank(pi)
		rj, jok := Rank(pj)
		if iok != jok {
			return iok
		}
		if iok && ri != rj {
			return ri < rj
		}
		return naturalLess(pi.Name, pj.Name)
	})
}

// naturalLess compares names as strings, except that runs of digits compare as numbers.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitPrefix(a), digitPrefix(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			if da != db {
				return da < db // the same number: fewer leading zeros first
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

// digitPrefix is the length of the run of ASCII digits s starts with.
func digitPrefix(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}
