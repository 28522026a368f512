package networktopology

import (
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// A gang's preemption evicted pods in one domain so that the gang fits there; when its
// victims are gone the gang is planned again. Room that freed elsewhere meanwhile may rank
// better (BinPack's tighter fit), and a plan from scratch would go there: the evictions were
// for nothing, and the room they made goes to pods of lower priority. So, as kube-scheduler
// tries a preemptor's nominated node first, the plan after a preemption tries the nodes the
// preemption nominated the members on, then its domain (gangstate.View.Preempted; after a
// failover, the nodes the members' status.nominatedNodeName name), and plans anywhere only
// when the gang fits in neither.

// searchPreferringPreempted runs the planner on the room the gang's last preemption made,
// narrowest first, and on every node when the gang does not fit there whole.
func (p *NetworkTopologyAware) searchPreferringPreempted(pl *planning) error {
	all, req := pl.nodes, pl.req
	simulated := 0
	room, tries := preemptedTries(pl)
	for _, try := range tries {
		pl.nodes = try.nodes
		err := p.search(pl)
		pl.nodes = all
		simulated += pl.simulated
		if err == nil {
			pl.simulated, pl.room = simulated, try.name
			return nil
		}
		pl.logger.V(2).Info("The room a gang's preemption made no longer holds it", "podGroup", pl.v.Key, "room", try.name, "domain", room.Domain, "reason", err)
		pl.req, pl.result = req, nil
	}
	err := p.search(pl)
	pl.simulated += simulated
	return err
}

// preemptedTry is one set of nodes the plan tries first.
type preemptedTry struct {
	name  string // "nominated nodes" or "domain", for the log
	nodes []fwk.NodeInfo
}

// preemptedTries returns the room the gang's last preemption made (the record, or else the
// members' nominations) and its tries: the nodes it nominated the members on, then the nodes
// of its domain when that has more (none when the domain is the whole cluster or left the
// tree); no tries when there is no such room.
func preemptedTries(pl *planning) (*gangstate.PreemptedRoom, []preemptedTry) {
	room := pl.v.Preempted
	if room == nil {
		room = nominatedRoom(pl.v.Gang)
	}
	if room == nil {
		return nil, nil
	}
	var tries []preemptedTry
	if len(room.Nodes) > 0 {
		tries = append(tries, preemptedTry{name: "nominated nodes", nodes: nodesIn(pl.nodes, sets.New(room.Nodes...))})
	}
	if _, ok := pl.v.Tree.HyperNode(room.Domain); ok && room.Domain != hypernode.VirtualRootName {
		if domain := sets.New(pl.v.Tree.Nodes(room.Domain)...); domain.Len() > len(room.Nodes) {
			tries = append(tries, preemptedTry{name: "domain", nodes: nodesIn(pl.nodes, domain)})
		}
	}
	return room, tries
}

// nominatedRoom is the room a preemption made that this process has no record of: the nodes
// the pending members' status.nominatedNodeName name. Only a preemption writes that field for
// a gang member (a plan nominates in memory, and rewrites the field only where a preemption
// wrote it; a dropped plan clears it), so after a failover or a restart that came once the
// victims were gone (nothing to resume), it still names the room their eviction made.
func nominatedRoom(gang podgroup.Gang) *gangstate.PreemptedRoom {
	nodes := sets.New[string]()
	for _, m := range gang.Pending {
		if n := m.Pod.Status.NominatedNodeName; n != "" {
			nodes.Insert(n)
		}
	}
	if nodes.Len() == 0 {
		return nil
	}
	return &gangstate.PreemptedRoom{Nodes: sets.List(nodes)}
}

// nodesIn returns the nodes of all that are in names.
func nodesIn(all []fwk.NodeInfo, names sets.Set[string]) []fwk.NodeInfo {
	out := make([]fwk.NodeInfo, 0, names.Len())
	for _, ni := range all {
		if n := ni.Node(); n != nil && names.Has(n.Name) {
			out = append(out, ni)
		}
	}
	return out
}
