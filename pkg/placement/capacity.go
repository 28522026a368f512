package placement

import (
	"sort"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
)

// Capacities returns how many of the request's pending members each usable HyperNode, and the
// virtual root, can host: the numbers the search compares with the demand.
// Tools that explain a plan use it to show what the planner saw.
// For members of several shapes it is an upper bound: what each shape alone can use, summed.
func Capacities(req Request) map[string]int {
	p := &planner{req: req, capacity: map[string]int{}}
	p.computeCapacity()
	delete(p.capacity, looseKey)
	if len(req.Shapes) > 1 && len(req.Pending) > 0 {
		m := newMixed(p)
		for name := range p.capacity {
			p.capacity[name] = m.capacityOf(name)
		}
	}
	return p.capacity
}

// computeCapacity sums node capacities bottom-up.
func (p *planner) computeCapacity() {
	p.loose = LooseNodes(p.req.Tree, p.req.Nodes)
	p.sumCapacity(hypernode.VirtualRootName, func(n string) int { return p.req.Nodes[n].Capacity }, p.capacity)
}

// sumCapacity sums nodeCap bottom-up below home into out (every HyperNode below it, and for
// the virtual root the loose nodes too), and returns home's total.
func (p *planner) sumCapacity(home string, nodeCap func(string) int, out map[string]int) int {
	tree := p.req.Tree
	var walk func(string) int
	walk = func(name string) int {
		info, ok := tree.HyperNode(name)
		if !ok || info.Excluded {
			return 0
		}
		total := 0
		if info.Leaf {
			for _, n := range info.Nodes {
				total += nodeCap(n)
			}
		} else {
			for _, c := range info.Children {
				total += walk(c)
			}
		}
		out[name] = total
		return total
	}
	if home != hypernode.VirtualRootName {
		return walk(home)
	}
	rootTotal := 0
	for _, c := range tree.Root().Children {
		rootTotal += walk(c)
	}
	looseTotal := 0
	for _, n := range p.loose {
		looseTotal += nodeCap(n)
	}
	out[looseKey] = looseTotal
	out[hypernode.VirtualRootName] = rootTotal + looseTotal
	return rootTotal + looseTotal
}

// LooseNodes returns the nodes of the request that are in no usable leaf, sorted.
func LooseNodes(tree *hypernode.Snapshot, nodes map[string]Node) []string {
	var out []string
	for n := range nodes {
		if _, ok := tree.LeafOf(n); !ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
