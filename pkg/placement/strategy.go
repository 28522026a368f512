package placement

import (
	"sort"
)

// rank orders candidates by the strategy, then the tie-breaks, best first.
func (p *planner) rank(cands []candidate, demand int) []string {
	type scored struct {
		candidate
		score  float64
		placed int
	}
	all := make([]scored, 0, len(cands))
	for _, c := range cands {
		s := scored{candidate: c, placed: p.placedInside(c.name)}
		switch p.req.Strategy {
		case LeastWaste:
			s.score = -float64(c.capacity - demand)
		default:
			s.score = p.binPackScore(c.name, demand)
		}
		all = append(all, s)
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

func (p *planner) placedInside(name string) int {
	count := 0
	for _, node := range p.req.Placed {
		leaf, ok := p.req.Tree.LeafOf(node)
		if !ok {
			continue
		}
		if lca, ok := p.req.Tree.LCA(leaf, name); ok && lca == name {
			count++
		}
	}
	return count
}

// binPackScore is sum_r w_r*(used_r+demand*req_r)/alloc_r / sum_r w_r over the HyperNode's
// nodes, 0 when a resource would overflow.
func (p *planner) binPackScore(name string, demand int) float64 {
	weights := p.req.Weights
	used := make([]float64, len(weights))
	alloc := make([]float64, len(weights))
	for _, n := range p.req.Tree.Nodes(name) {
		node := p.req.Nodes[n]
		for i := range weights {
			if i < len(node.Used) {
				used[i] += node.Used[i]
			}
			if i < len(node.Allocatable) {
				alloc[i] += node.Allocatable[i]
			}
		}
	}
	return BinPackScore(used, alloc, p.req.PodRequest, float64(demand), weights)
}

// BinPackScore is the weighted bin-pack score of adding count pods of request to a domain with
// the given used and allocatable resources: sum_r w_r*(used_r+count*req_r)/alloc_r / sum_r w_r,
// 0 when a requested resource would overflow. Resources with zero weight or no allocatable
// and no request are ignored.
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
		if alloc[i] == 0 {
			if req > 0 {
				return 0
			}
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
