package podgroup

import (
	"fmt"
	"reflect"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
)

// TopologyFromArgs validates NetworkTopologyAware's defaultNetworkTopology arg as the
// annotation is validated and returns it as a constraint (nil for nil).
func TopologyFromArgs(c *config.NetworkTopologyConstraint) (*NetworkTopology, error) {
	if c == nil {
		return nil, nil
	}
	nt := NetworkTopology{Mode: TopologyMode(c.Mode), HighestTierName: c.HighestTierName}
	if c.HighestTierAllowed != nil {
		tier := int(*c.HighestTierAllowed)
		nt.HighestTierAllowed = &tier
	}
	return validateTopology(nt)
}

// SetDefaultTopology makes nt the network topology constraint of every PodGroup that says
// nothing of topology (see infoOf; nil: such gangs stay plain gangs), from NetworkTopologyAware's
// defaultNetworkTopology arg. The registry serves every profile of the scheduler, so every
// profile must ask for the same default: a second call with another one is an error. PodGroups
// already seen take the default at once, under a new revision, and their gangs are told.
func (r *Registry) SetDefaultTopology(nt *NetworkTopology) error {
	r.mu.Lock()
	if r.defaultSet {
		current := r.defaultTopology
		r.mu.Unlock()
		if !reflect.DeepEqual(current, nt) {
			return fmt.Errorf("two profiles set different defaultNetworkTopology args (%s and %s): "+
				"the PodGroup registry serves every profile, so they must agree", describeDefault(current), describeDefault(nt))
		}
		return nil
	}
	r.defaultSet, r.defaultTopology = true, nt
	var changed []Key
	for key, g := range r.groups {
		if g.podGroup == nil {
			continue
		}
		parsed := infoOf(g.podGroup, nt)
		if parsed.TopologyDefault != g.topologyDefault {
			g.topology, g.topologyErr, g.topologyDefault = parsed.Topology, parsed.TopologyErr, parsed.TopologyDefault
			g.revision++
			changed = append(changed, key)
		}
	}
	r.mu.Unlock()
	for _, key := range changed {
		r.Notify(key, true)
	}
	return nil
}

// DefaultTopology returns the scheduler's default constraint (nil: none), for native pod
// groups, which the registry does not hold.
func (r *Registry) DefaultTopology() *NetworkTopology {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.defaultTopology == nil {
		return nil
	}
	return r.defaultTopology.clone()
}

// clone is a copy of nt that shares nothing with it.
func (nt *NetworkTopology) clone() *NetworkTopology {
	c := *nt
	if nt.HighestTierAllowed != nil {
		tier := *nt.HighestTierAllowed
		c.HighestTierAllowed = &tier
	}
	return &c
}

func describeDefault(nt *NetworkTopology) string {
	if nt == nil {
		return "none"
	}
	return nt.String()
}
