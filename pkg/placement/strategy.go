package placement

import (
	"sort"

	v1 "k8s.io/api/core/v1"
)

// rank orders candidates by the strategy, then the tie-breaks, best first.
func (p *planner) rank(cands []candidate, demand int) []string {
	return p.rankBy(cands, func(c candidate) float64 {
		if p.req.Strategy == LeastWaste {
			return -float64(c.capacity - demand)
		}
		return p.binPackScore(c.name, demand)
	})
}

// rankBy orders candidates by score, then more placed members inside, then the name.
func (p *planner) rankBy(cands []candidate, score func(candidate) float64) []string {
	type scored struct {
		candidate
		score  float64
		placed int
	}
	all := make([]scored, 0, len(cands))
	for _, c := range cands {
		all = append(all, scored{candidate: c, placed: p.placedInside(c.name), score: score(c)})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].score != all[j].score {
			return all[i].score > all[j].score
		}
		if all[i].placed != all[j].placed {
			return all[i].placed > all[j].placed
		}
		return all[i].name < all[j].name
	})
	out := make([]string, len(all))
	for i, c := range all {
		out[i] = c.name
	}
	return out
}

// placedInside counts the gang's members below HyperNode name: the placed ones, and those
// a mixed packing planned so far.
func (p *planner) placedInside(name string) int {
	count := p.placedBelow(name)
	for leaf, n := range p.planning {
		if leaf == LooseLeaf {
			continue
		}
		if lca, ok := p.req.Tree.LCA(leaf, name); ok && lca == name {
			count += n
		}
	}
	return count
}

// binPackScore is sum_r w_r*(used_r+demand*req_r)/alloc_r / sum_r w_r over the HyperNode's
// nodes, 0 when a resource would overflow.
func (p *planner) binPackScore(name string, demand int) float64 {
	request := make([]float64, len(p.req.Weights))
	for i := range request {
		if i < len(p.req.PodRequest) {
			request[i] = p.req.PodRequest[i] * float64(demand)
		}
	}
	return p.binPackScoreOf(name, request)
}

// binPackScoreOf is the BinPack score of adding request (the sum of the members' weighted
// requests) to HyperNode name.
func (p *planner) binPackScoreOf(name string, request []float64) float64 {
	sums, ok := p.sums[name]
	if !ok {
		weights := p.req.Weights
		sums = resourceSums{used: make([]float64, len(weights)), alloc: make([]float64, len(weights))}
		for _, n := range p.req.Tree.Nodes(name) {
			node := p.req.Nodes[n]
			for i := range weights {
				// A node's use of a resource it does not list (provided through DRA there)
				// would count against other nodes' allocatable (BinPackScore).
				if i < len(node.Allocatable) && node.Allocatable[i] != 0 {
					sums.alloc[i] += node.Allocatable[i]
					if i < len(node.Used) {
						sums.used[i] += node.Used[i]
					}
				}
			}
		}
		if p.sums == nil {
			p.sums = map[string]resourceSums{}
		}
		p.sums[name] = sums
	}
	return BinPackScore(sums.used, sums.alloc, request, 1, p.req.Weights)
}

// resourceSums are a HyperNode's nodes' weighted used and allocatable resources, summed.
type resourceSums struct{ used, alloc []float64 }

// BinPackScore is the weighted bin-pack score of adding count pods of request to a domain with
// the given used and allocatable resources: sum_r w_r*(used_r+count*req_r)/alloc_r / sum_r w_r
// over the weighted resources r the pods request and the domain's nodes list as allocatable,
// 0 when one would overflow and when there is no such resource. A requested resource that no
// node of the domain lists (a GPU that a DeviceClass provides through DRA, a resource an
// extender manages) is left out: the pods passed Filter there, so something else provides it,
// and its sums say nothing about how full the domain is.
func BinPackScore(used, alloc, request []float64, count float64, weights []float64) float64 {
	total, weightSum := 0.0, 0.0
	for i, w := range weights {
		if w == 0 {
			continue
		}
		req := 0.0
		if i < len(request) {
			req = request[i] * count
		}
		if req == 0 {
			// Only the resources the pods ask for (seed 000): a GPU gang is packed by GPUs
			// and CPUs, not by the memory nobody requested.
			continue
		}
		if alloc[i] == 0 {
			continue
		}
		u := used[i] + req
		if u > alloc[i] {
			return 0
		}
		total += w * u / alloc[i]
		weightSum += w
	}
	if weightSum == 0 {
		return 0
	}
	return total / weightSum
}

// score is the strategy's score of a HyperNode for demand members (higher is better).
func (p *planner) score(name string, demand int) float64 {
	if p.req.Strategy == LeastWaste {
		return -float64(p.capacity[name] - demand)
	}
	return p.binPackScore(name, demand)
}

// placedBelow counts the placed members below HyperNode name, from counts made once per plan
// (each member's leaf and its ancestors): ranking every child of a spine around 5,000 placed
// members must not walk them all per child.
func (p *planner) placedBelow(name string) int {
	if p.placedCounts == nil {
		perLeaf := map[string]int{}
		for _, n := range p.req.Placed {
			if leaf, ok := p.req.Tree.LeafOf(n); ok {
				perLeaf[leaf]++
			}
		}
		p.placedCounts = make(map[string]int, 2*len(perLeaf))
		for leaf, c := range perLeaf {
			p.placedCounts[leaf] += c
			for _, a := range p.req.Tree.Ancestors(leaf) {
				p.placedCounts[a] += c
			}
		}
	}
	return p.placedCounts[name]
}

// Amounts returns the quantities of resources in list, in the units BinPack weighs them in
// (milli-CPU, else the resource's own unit): what Request.PodRequest and Node.Used and
// Allocatable hold.
func Amounts(list v1.ResourceList, resources []v1.ResourceName) []float64 {
	out := make([]float64, len(resources))
	for i, r := range resources {
		q := list[r]
		if r == v1.ResourceCPU {
			out[i] = float64(q.MilliValue())
		} else {
			out[i] = float64(q.Value())
		}
	}
	return out
}

// Weights returns the resources BinPack weighs and their weights, in the order Request.Weights
// and Amounts use: cpu, memory, then the extended resources by name; a resource of weight 0
// is left out.
func Weights(cpu, memory int64, extended map[v1.ResourceName]int64) ([]v1.ResourceName, []float64) {
	var resources []v1.ResourceName
	var weights []float64
	add := func(name v1.ResourceName, w int64) {
		if w > 0 {
			resources, weights = append(resources, name), append(weights, float64(w))
		}
	}
	add(v1.ResourceCPU, cpu)
	add(v1.ResourceMemory, memory)
	names := make([]v1.ResourceName, 0, len(extended))
	for name := range extended {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	for _, name := range names {
		add(name, extended[name])
	}
	return resources, weights
}
