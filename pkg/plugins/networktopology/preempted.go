package networktopology

import (
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
)

// A gang's preemption evicted pods in one domain so that the gang fits there; when its
// victims are gone the gang is planned again. Room that freed elsewhere meanwhile may rank
// better (BinPack's tighter fit), and a plan from scratch would go there: the evictions were
// for nothing, and the room they made goes to pods of lower priority. So, as kube-scheduler
// tries a preemptor's nominated node first, the plan after a preemption tries the preempted
// domain first (gangstate.View.Preempted), and plans anywhere only when the gang no longer
// fits there whole.

// searchPreferringPreempted runs the planner on the nodes of the domain the gang's last
// preemption made room in, and on every node when the gang does not fit there whole.
func (p *NetworkTopologyAware) searchPreferringPreempted(pl *planning) error {
	nodes := preemptedNodes(pl)
	if nodes == nil {
		return p.search(pl)
	}
	all, req := pl.nodes, pl.req
	pl.nodes = nodes
	err := p.search(pl)
	pl.nodes = all
	if err == nil {
		return nil
	}
	pl.logger.V(2).Info("The domain a gang preempted in no longer holds it; it is planned anywhere", "podGroup", pl.v.Key, "domain", pl.v.Preempted, "reason", err)
	simulated := pl.simulated
	pl.req, pl.result = req, nil
	err = p.search(pl)
	pl.simulated += simulated
	return err
}

// preemptedNodes returns the nodes of the gang's preempted domain, nil when it has none: no
// preemption ended lately, it spanned the whole cluster, or the domain left the tree.
func preemptedNodes(pl *planning) []fwk.NodeInfo {
	domain := pl.v.Preempted
	if domain == "" || domain == hypernode.VirtualRootName {
		return nil
	}
	if _, ok := pl.v.Tree.HyperNode(domain); !ok {
		return nil
	}
	inDomain := sets.New(pl.v.Tree.Nodes(domain)...)
	nodes := make([]fwk.NodeInfo, 0, inDomain.Len())
	for _, ni := range pl.nodes {
		if n := ni.Node(); n != nil && inDomain.Has(n.Name) {
			nodes = append(nodes, ni)
		}
	}
	return nodes
}
