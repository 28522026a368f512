package placement

import (
	"fmt"
	"sort"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
)

// place plans the job into domain: each sub-group first, in order, inside its own smallest
// HyperNode within the domain, then the members in no sub-group. It returns the plan and the
// sum of the sub-groups' scores, or nil and the reason when a sub-group does not fit.
// Capacities are restored afterwards.
func (p *planner) place(domain string, tier int) (*Plan, float64, string) {
	if len(p.req.SubGroups) == 0 {
		return p.assign(domain, tier), 0, ""
	}
	// Capacities are restored from a journal of what changed, not a copy of every HyperNode's:
	// with sub-groups, place runs for every fitting candidate of a tier.
	var undo []capacityUndo
	p.undo = &undo
	defer func() {
		for i := len(undo) - 1; i >= 0; i-- {
			p.capacity[undo[i].key] = undo[i].value
		}
		p.undo = nil
	}()
	plan := &Plan{Domain: domain, Tier: tier, PodLeaf: map[string]string{}, LeafPods: map[string][]string{}}
	total := 0.0
	inSubGroup := map[string]bool{}
	for _, sg := range p.req.SubGroups {
		for _, pod := range sg.Pending {
			inSubGroup[pod] = true
		}
		if len(sg.Pending) == 0 {
			continue
		}
		home, score, ok := p.subGroupHome(domain, sg)
		if !ok {
			return nil, 0, fmt.Sprintf("in %s: sub-group %s (%s) fits no HyperNode for its %d pods", domain, sg.ID, sg.Constraint, len(sg.Pending))
		}
		total += score
		p.fill(plan, home, sg.Pending)
	}
	var rest []string
	for _, pod := range p.req.Pending {
		if !inSubGroup[pod] {
			rest = append(rest, pod)
		}
	}
	if len(rest) > 0 {
		if p.capacity[domain] < len(rest) {
			return nil, 0, fmt.Sprintf("in %s: no room left for the %d members outside the sub-groups", domain, len(rest))
		}
		p.fill(plan, domain, rest)
	}
	return plan, total, ""
}

// subGroupHome finds the HyperNode for a sub-group inside domain: the lowest tier its
// constraint allows with a HyperNode that holds its placed members and can host its pending
// ones; among those, more placed members inside first, then the strategy's highest score
// (the sub-job preference of docs/design.md, "Sub-groups"), then the name. It returns the HyperNode and its score.
func (p *planner) subGroupHome(domain string, sg SubGroup) (string, float64, bool) {
	tree := p.req.Tree
	domainInfo, _ := tree.HyperNode(domain)
	placedIn := LowestCommon(tree, sg.Placed)
	demand := len(sg.Pending)
	for _, tier := range tree.Tiers() {
		if tier > domainInfo.Tier || (tier > sg.MaxTier && !sg.Soft) {
			break
		}
		best, bestScore, bestPlaced := "", 0.0, -1
		for _, h := range p.candidatesIn(domain, tier) {
			if p.capacity[h] < demand {
				continue
			}
			if placedIn != "" {
				if lca, ok := tree.LCA(h, placedIn); !ok || lca != h {
					continue
				}
			}
			placed := countInside(tree, sg.Placed, h)
			score := p.score(h, demand)
			if best == "" || placed > bestPlaced || (placed == bestPlaced && score > bestScore) {
				best, bestScore, bestPlaced = h, score, placed
			}
		}
		if best != "" {
			return best, bestScore, true
		}
	}
	if (sg.Soft || sg.MaxTier >= domainInfo.Tier) && p.capacity[domain] >= demand {
		return domain, p.score(domain, demand), true
	}
	return "", 0, false
}

// candidatesIn returns the candidates of a tier inside domain (domain itself included when
// it is of that tier), in Candidates' order. It walks domain's subtree: O(its size), not
// O(the tier's candidates), since with sub-groups it runs for every candidate of a tier.
func (p *planner) candidatesIn(domain string, tier int) []string {
	key := domainTier{domain, tier}
	if out, ok := p.inside[key]; ok {
		return out
	}
	rank := p.candidateRank[tier]
	if rank == nil {
		cands := p.req.Tree.Candidates(tier)
		rank = make(map[string]int, len(cands))
		for i, h := range cands {
			rank[h] = i
		}
		if p.candidateRank == nil {
			p.candidateRank = map[int]map[string]int{}
		}
		p.candidateRank[tier] = rank
	}
	out := []string{}
	var walk func(h string)
	walk = func(h string) {
		info, ok := p.req.Tree.HyperNode(h)
		switch {
		case !ok || info.Tier < tier:
		case info.Tier == tier:
			if _, candidate := rank[h]; candidate {
				out = append(out, h)
			}
		default:
			for _, c := range info.Children {
				walk(c)
			}
		}
	}
	walk(domain)
	sort.Slice(out, func(i, j int) bool { return rank[out[i]] < rank[out[j]] })
	if p.inside == nil {
		p.inside = map[domainTier][]string{}
	}
	p.inside[key] = out
	return out
}

type domainTier struct {
	domain string
	tier   int
}

// fill spreads pods (in order) below home, records them in plan, and takes their slots.
func (p *planner) fill(plan *Plan, home string, pods []string) {
	var counts []leafCount
	p.spread(home, len(pods), &counts)
	next := 0
	for _, lc := range counts {
		for range lc.count {
			pod := pods[next]
			next++
			plan.PodLeaf[pod] = lc.leaf
			plan.LeafPods[lc.leaf] = append(plan.LeafPods[lc.leaf], pod)
		}
		p.consume(lc.leaf, lc.count)
	}
}

// consume takes n slots of a leaf (and of its ancestors up to the virtual root).
func (p *planner) consume(leaf string, n int) {
	if leaf == LooseLeaf {
		p.take(looseKey, n)
		p.take(hypernode.VirtualRootName, n)
		return
	}
	p.take(leaf, n)
	for _, a := range p.req.Tree.Ancestors(leaf) {
		p.take(a, n)
	}
}

// take takes n slots of one capacity, noting its value first while place tries a domain.
func (p *planner) take(key string, n int) {
	if p.undo != nil {
		*p.undo = append(*p.undo, capacityUndo{key, p.capacity[key]})
	}
	p.capacity[key] -= n
}

func firstN(s []string, n int) []string {
	return s[:min(n, len(s))]
}

// assign spreads the pending members over the domain.
func (p *planner) assign(domain string, tier int) *Plan {
	plan := &Plan{Domain: domain, Tier: tier, PodLeaf: map[string]string{}, LeafPods: map[string][]string{}}
	var counts []leafCount
	p.spread(domain, len(p.req.Pending), &counts)
	next := 0
	for _, lc := range counts {
		for range lc.count {
			pod := p.req.Pending[next]
			next++
			plan.PodLeaf[pod] = lc.leaf
			plan.LeafPods[lc.leaf] = append(plan.LeafPods[lc.leaf], pod)
		}
	}
	return plan
}

type leafCount struct {
	leaf  string
	count int
}

// spread distributes count members below name over as few children as possible, appending the
// leaves it uses in tree order.
func (p *planner) spread(name string, count int, out *[]leafCount) {
	if count <= 0 {
		return
	}
	info, _ := p.req.Tree.HyperNode(name)
	if info.Leaf {
		*out = append(*out, leafCount{leaf: name, count: count})
		return
	}
	children := append([]string(nil), info.Children...)
	caps := map[string]int{}
	for _, c := range children {
		caps[c] = p.capacity[c]
	}
	if name == hypernode.VirtualRootName {
		children = append(children, looseKey)
		caps[looseKey] = p.capacity[looseKey]
	}
	// Fewest children: the children holding placed members first (to stay next to them),
	// then the largest capacity; the nodes in no HyperNode always last.
	placed := map[string]int{}
	for _, c := range children {
		if c != looseKey {
			placed[c] = p.placedInside(c)
		}
	}
	byCapacity := append([]string(nil), children...)
	sort.SliceStable(byCapacity, func(i, j int) bool {
		a, b := byCapacity[i], byCapacity[j]
		if (a == looseKey) != (b == looseKey) {
			return b == looseKey
		}
		if placed[a] != placed[b] {
			return placed[a] > placed[b]
		}
		return caps[a] > caps[b]
	})
	chosen := map[string]bool{}
	covered, partial := 0, ""
	for i, c := range byCapacity {
		if covered >= count {
			break
		}
		if caps[c] == 0 {
			continue
		}
		if covered+caps[c] >= count && p.isLeaf(c) {
			// The last leaf: the smallest of equal rank that holds the rest takes it, so a
			// larger leaf stays whole for the next gang (best fit; as many leaves).
			rest, rank := count-covered, placed[c]
			c = smallest(byCapacity[i:], caps, c, func(d string) bool {
				return !chosen[d] && placed[d] == rank && caps[d] >= rest && p.isLeaf(d)
			})
			partial = c
		}
		chosen[c] = true
		covered += caps[c]
	}
	// Fill the chosen children in tree order, so consecutive ranks share a subtree. Among
	// leaves the best fit is the one filled partly; above them, the last in tree order (the
	// leaves below each child are counted by the recursion, not here).
	remaining := count
	for _, c := range children {
		if !chosen[c] || remaining == 0 {
			continue
		}
		n := min(caps[c], remaining)
		if partial != "" {
			n = caps[c]
			if c == partial {
				n = count - (covered - caps[c])
			}
		}
		remaining -= n
		if c == looseKey {
			*out = append(*out, leafCount{leaf: LooseLeaf, count: n})
			continue
		}
		p.spread(c, n, out)
	}
}

func (p *planner) isLeaf(name string) bool {
	info, ok := p.req.Tree.HyperNode(name)
	return ok && info.Leaf
}

// smallest returns the candidate that fits accepts with the smallest capacity, fallback
// unless one is smaller.
func smallest(candidates []string, caps map[string]int, fallback string, fits func(string) bool) string {
	best := fallback
	for _, d := range candidates {
		if caps[d] < caps[best] && fits(d) {
			best = d
		}
	}
	return best
}

// AssignNodes returns a node of its leaf for every member of a plan, so that each member's
// slot can be held on a node (the plugin nominates it there): a plan of several shapes already
// chose them; otherwise the leaf's nodes are filled in order up to their capacity in req
// (simulated for the chosen domain).
func AssignNodes(req Request, plan *Plan) map[string]string {
	if plan.PodNode != nil {
		return plan.PodNode
	}
	out := make(map[string]string, len(plan.PodLeaf))
	for leaf, pods := range plan.LeafPods {
		var nodes []string
		if leaf == LooseLeaf {
			nodes = LooseNodes(req.Tree, req.Nodes)
		} else if info, ok := req.Tree.HyperNode(leaf); ok {
			nodes = info.Nodes
		}
		next := 0
		for _, n := range nodes {
			for range req.Nodes[n].Capacity {
				if next == len(pods) {
					break
				}
				out[pods[next]] = n
				next++
			}
		}
	}
	return out
}
