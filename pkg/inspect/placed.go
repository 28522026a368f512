package inspect

import (
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// placementOf describes where the bound members are: HyperNode -> node -> pods, from their
// lowest common HyperNode down.
func (c *Cluster) placementOf(bound []podgroup.Member) *PlacementReport {
	podsByNode := map[string][]string{}
	for _, m := range bound {
		podsByNode[m.Node] = append(podsByNode[m.Node], m.Pod.Name)
	}
	domain := placement.LowestCommon(c.snap, sortedNames(podsByNode))
	info, _ := c.snap.HyperNode(domain)
	r := &PlacementReport{Domain: domain, Tier: info.Tier, TierName: info.TierName, Pods: len(bound), Nodes: len(podsByNode)}

	// Build the tree top-down: every node hangs below the path from the domain to its leaf.
	root := &placedBuilder{domain: PlacedDomain{Name: domain, Tier: info.Tier, TierName: info.TierName}}
	for _, node := range sortedNames(podsByNode) {
		at := root
		if leaf, ok := c.snap.LeafOf(node); ok {
			path := []string{leaf}
			for _, a := range c.snap.Ancestors(leaf) {
				if a == domain {
					break
				}
				path = append(path, a)
			}
			if leaf == domain {
				path = nil
			}
			for i := len(path) - 1; i >= 0; i-- {
				hinfo, _ := c.snap.HyperNode(path[i])
				at = at.child(PlacedDomain{Name: path[i], Tier: hinfo.Tier, TierName: hinfo.TierName})
			}
		} else {
			at = at.child(PlacedDomain{Name: NotInHyperNode})
		}
		at.domain.Nodes = append(at.domain.Nodes, PlacedNode{Node: node, Pods: podsByNode[node]})
	}
	r.Tree = root.build()
	return r
}

// placedBuilder assembles a PlacedDomain tree.
type placedBuilder struct {
	domain   PlacedDomain
	children map[string]*placedBuilder
}

func (b *placedBuilder) child(d PlacedDomain) *placedBuilder {
	if b.children == nil {
		b.children = map[string]*placedBuilder{}
	}
	if c := b.children[d.Name]; c != nil {
		return c
	}
	c := &placedBuilder{domain: d}
	b.children[d.Name] = c
	return c
}

func (b *placedBuilder) build() PlacedDomain {
	out := b.domain
	for _, name := range sortedNames(b.children) {
		out.Children = append(out.Children, b.children[name].build())
	}
	return out
}
