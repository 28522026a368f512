package podgroup

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// SubGroupState is what the plugins need to know about one sub-group.
type SubGroupState struct {
	SubGroup
	Members, Scheduled int
}

func (g *Group) scheduled(uid types.UID) bool {
	_, reserved := g.assumed[uid]
	return g.bound.Has(uid) || reserved
}

// track updates the sub-group counts around a change of one member: call it with the member's
// state before the change, then apply the change, then call the returned function.
func (g *Group) track(uid types.UID) func() {
	sub, inSub := g.memberSub[uid]
	_, wasMember := g.members[uid]
	wasScheduled := g.scheduled(uid)
	return func() {
		if !inSub {
			return
		}
		c := g.subCounts[sub.ID]
		if c == nil {
			return
		}
		_, isMember := g.members[uid]
		if wasMember && !isMember {
			c.Members--
		}
		if now := g.scheduled(uid); now != wasScheduled {
			if now {
				g.addScheduled(c, 1)
			} else {
				g.addScheduled(c, -1)
			}
		}
	}
}

// addScheduled changes a sub-group's scheduled count by delta and keeps the group's
// aggregates (incompleteScheduled, completeByPolicy) true.
func (g *Group) addScheduled(c *SubGroupState, delta int) {
	size := g.subGroupSize(c.Policy)
	wasComplete := c.Scheduled >= size
	if !wasComplete {
		g.incompleteScheduled -= c.Scheduled
	}
	c.Scheduled += delta
	isComplete := c.Scheduled >= size
	if !isComplete {
		g.incompleteScheduled += c.Scheduled
	}
	switch {
	case isComplete && !wasComplete:
		g.completeByPolicy[c.Policy]++
	case wasComplete && !isComplete:
		g.completeByPolicy[c.Policy]--
	}
}

// subGroupSize is the subGroupSize of a policy (0 for one the group does not have: its
// sub-groups count as complete, as Permit always counted them).
func (g *Group) subGroupSize(policy string) int {
	for _, p := range g.subGroups {
		if p.Name == policy {
			return int(p.SubGroupSize)
		}
	}
	return 0
}

// assignSubGroupLocked puts a member in its sub-group.
func (g *Group) assignSubGroupLocked(uid types.UID, pod *v1.Pod) {
	sub, ok := SubGroupOf(g.subGroups, pod)
	if !ok {
		return
	}
	g.memberSub[uid] = sub
	c := g.subCounts[sub.ID]
	if c == nil {
		c = &SubGroupState{SubGroup: sub}
		g.subCounts[sub.ID] = c
		if g.subGroupSize(sub.Policy) == 0 {
			g.completeByPolicy[sub.Policy]++ // complete with nobody scheduled
		}
	}
	c.Members++
	if g.scheduled(uid) {
		g.addScheduled(c, 1)
	}
}

// unassignSubGroupLocked takes a member out of its sub-group's counts.
func (g *Group) unassignSubGroupLocked(uid types.UID) {
	sub, ok := g.memberSub[uid]
	if !ok {
		return
	}
	if c := g.subCounts[sub.ID]; c != nil {
		c.Members--
		if g.scheduled(uid) {
			g.addScheduled(c, -1)
		}
	}
	delete(g.memberSub, uid)
}

// rebuildSubGroupsLocked recomputes every member's sub-group (the policies changed).
func (g *Group) rebuildSubGroupsLocked() {
	g.memberSub = map[types.UID]SubGroup{}
	g.subCounts = map[string]*SubGroupState{}
	g.incompleteScheduled, g.completeByPolicy = 0, map[string]int{}
	for uid, p := range g.members {
		g.assignSubGroupLocked(uid, p)
	}
}

// CanDropSubGroup reports whether a job can still reach minSubGroups of policy without one
// more of its sub-groups, dropped counting the ones of each policy already left out. A
// sub-group whose members are all gone is not one of the job's.
func CanDropSubGroup(info Info, states []SubGroupState, dropped map[string]int, policy string) bool {
	total := 0
	for _, s := range states {
		if s.Policy == policy && s.Members > 0 {
			total++
		}
	}
	sp, ok := info.Policy(policy)
	return ok && total-dropped[policy]-1 >= int(sp.MinSubGroups)
}
