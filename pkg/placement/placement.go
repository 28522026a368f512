// Package placement plans where a gang goes in the HyperNode tree. It is pure: plain inputs
// (the tree snapshot, per-node capacities and resource usage), plain outputs (the chosen
// domain and the leaf of every pending member, or an explanation), no framework types.
//
// The plan, in three steps:
//
//  1. Capacity is real fit, computed by the caller: for each node, how many more members of
//     the gang pass the scheduler's Filter plugins when added one after another (capped at
//     the number of pending members). Leaves sum their nodes, parents their children.
//     Slots that other gangs' plans already promised are subtracted per leaf (the ledger).
//  2. Gradient search: for each tier ascending, up to the allowed tier (hard) or the virtual
//     root (soft), the candidates are the usable HyperNodes of that tier that contain every
//     bound or reserved member and whose capacity covers the pending members. The first tier
//     with a candidate wins; the strategy (BinPack or LeastWaste) picks among its candidates,
//     ties going to more members already inside, then to the name.
//  3. Inside the chosen domain the pending members are spread over as few children as
//     possible at every level (largest capacity first), down to leaves; members in rank order
//     fill the chosen leaves in tree order, so consecutive ranks share a leaf.
package placement

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
)

// Strategy chooses among the candidate HyperNodes of one tier.
type Strategy string

const (
	// BinPack prefers the candidate whose weighted resource use, with the gang added, is the
	// highest (seed 000 section 4).
	BinPack Strategy = "BinPack"
	// LeastWaste prefers the candidate whose capacity exceeds the demand the least.
	LeastWaste Strategy = "LeastWaste"
)

// LooseLeaf is the pseudo-leaf of the nodes in no usable leaf; only the virtual root holds it.
const LooseLeaf = hypernode.VirtualRootName

// looseKey is the capacity entry of LooseLeaf (the root's own entry is the whole cluster).
const looseKey = hypernode.VirtualRootName + "/loose"

// Node is what the planner knows of one node.
type Node struct {
	// Capacity is how many more pending members fit on the node.
	Capacity int
	// Used and Allocatable are the node's weighted resources (the order of Request.Weights),
	// for BinPack.
	Used, Allocatable []float64
}

// Request is one planning problem.
type Request struct {
	Tree *hypernode.Snapshot
	// Constraint describes the constraint for messages, e.g. "hard topology (tier<=2)".
	Constraint string
	// MaxTier is the highest tier the gang may span. Soft is true when the whole cluster (the
	// virtual root) is an acceptable last resort.
	MaxTier int
	Soft    bool
	// Pending are the members to place, in rank order.
	Pending []string
	// Placed are the nodes of the members that are bound or reserved (one entry per member).
	Placed []string
	// Nodes are the cluster's nodes; a node missing here has no capacity.
	Nodes map[string]Node
	// Promised counts, per leaf, the slots other gangs' plans hold and have not reserved yet.
	Promised map[string]int
	Strategy Strategy
	// PodRequest and Weights are the weighted resources of one member, for BinPack.
	PodRequest, Weights []float64
	// SubGroups, in placement order, are the sub-groups of the job whose members each need
	// their own domain inside the job's (their pending members are also in Pending).
	SubGroups []SubGroup
}

// SubGroup is one sub-group (partition) of the job.
type SubGroup struct {
	ID string
	// Policy is the sub-group's policy name.
	Policy string
	// Constraint describes the sub-group's constraint for messages.
	Constraint string
	// MaxTier is the highest tier the sub-group may span (Soft: a preference).
	MaxTier int
	Soft    bool
	// Pending are the sub-group's pending members, in rank order; Placed the nodes of its
	// bound or reserved members.
	Pending []string
	Placed  []string
}

// Plan is where the pending members go.
type Plan struct {
	// Domain is the chosen HyperNode (VirtualRootName for the whole cluster) and Tier its tier.
	Domain string
	Tier   int
	// PodLeaf maps each pending member to its leaf (LooseLeaf: the nodes in no usable leaf).
	PodLeaf map[string]string
	// LeafPods is the same by leaf, in rank order.
	LeafPods map[string][]string
}

// Unsatisfiable explains why no plan exists.
type Unsatisfiable struct{ Message string }

func (u *Unsatisfiable) Error() string { return u.Message }

// planner holds the state of one Plan call.
type planner struct {
	req      Request
	capacity map[string]int // per HyperNode (and LooseLeaf), after the ledger
	loose    []string       // nodes in no usable leaf
}

// Make plans the pending members, or explains why it cannot.
func Make(req Request) (*Plan, error) {
	p := &planner{req: req, capacity: map[string]int{}}
	demand := len(req.Pending)
	if demand == 0 {
		return &Plan{PodLeaf: map[string]string{}, LeafPods: map[string][]string{}}, nil
	}
	p.computeCapacity()
	placedIn := p.placedAncestor()

	tiers := req.Tree.Tiers()
	rootTier := req.Tree.RootTier()
	type tried struct {
		tier       int
		candidates []candidate
	}
	var attempts []tried
	var subGroupFailures []string
	for _, tier := range tiers {
		// Hard: never above the allowed tier. Soft: the allowed tier is a preference, the
		// search goes on up to the whole cluster.
		if tier > req.MaxTier && !req.Soft {
			break
		}
		var cands []candidate
		for _, name := range req.Tree.Candidates(tier) {
			if placedIn != "" {
				if lca, ok := req.Tree.LCA(name, placedIn); !ok || lca != name {
					continue // it does not contain every placed member
				}
			}
			cands = append(cands, candidate{name: name, capacity: p.capacity[name]})
		}
		attempts = append(attempts, tried{tier: tier, candidates: cands})
		var fitting []candidate
		for _, c := range cands {
			if c.capacity >= demand {
				fitting = append(fitting, c)
			}
		}
		// Without sub-groups the strategy's best candidate wins. With sub-groups, seed 003's
		// job-level preference: every candidate that holds the job and its sub-groups is
		// scored by the sum of its sub-groups' best scores; the highest sum wins, ties going
		// to the strategy's order.
		var best *Plan
		bestScore := 0.0
		for _, name := range p.rank(fitting, demand) {
			plan, score, why := p.place(name, tier)
			if plan == nil {
				subGroupFailures = append(subGroupFailures, why)
				continue
			}
			if len(req.SubGroups) == 0 {
				return plan, nil
			}
			if best == nil || score > bestScore {
				best, bestScore = plan, score
			}
		}
		if best != nil {
			return best, nil
		}
	}
	if req.Soft || req.MaxTier >= rootTier {
		root := p.capacity[hypernode.VirtualRootName]
		if root >= demand {
			plan, _, why := p.place(hypernode.VirtualRootName, rootTier)
			if plan != nil {
				return plan, nil
			}
			subGroupFailures = append(subGroupFailures, why)
		}
		if req.Soft && len(subGroupFailures) == 0 {
			return nil, &Unsatisfiable{Message: fmt.Sprintf("%s: the whole cluster can host only %d of %d pods", req.Constraint, root, demand)}
		}
	}
	var parts []string
	for _, a := range attempts {
		parts = append(parts, fmt.Sprintf("tier %d: %s", a.tier, describeCandidates(a.candidates, demand)))
	}
	msg := fmt.Sprintf("%s: no HyperNode can host %d pods", req.Constraint, demand)
	if placedIn != "" && placedIn != hypernode.VirtualRootName {
		msg += fmt.Sprintf(" together with the %d placed members (in %s)", len(req.Placed), placedIn)
	}
	if len(parts) > 0 {
		msg += "; " + strings.Join(parts, "; ")
	} else {
		msg += fmt.Sprintf("; no HyperNode has a tier <= %d", req.MaxTier)
	}
	if len(subGroupFailures) > 0 {
		// The job fitted somewhere, its sub-groups did not.
		msg = fmt.Sprintf("%s: %d HyperNode(s) can host the job's %d pods but not its sub-groups; %s",
			req.Constraint, len(subGroupFailures), demand, strings.Join(firstN(subGroupFailures, 2), "; "))
	}
	return nil, &Unsatisfiable{Message: msg}
}

type candidate struct {
	name     string
	capacity int
}

// describeCandidates lists the best two candidates as name placeable/demand.
func describeCandidates(cands []candidate, demand int) string {
	if len(cands) == 0 {
		return "no usable HyperNode"
	}
	sorted := append([]candidate(nil), cands...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].capacity != sorted[j].capacity {
			return sorted[i].capacity > sorted[j].capacity
		}
		return sorted[i].name < sorted[j].name
	})
	const shown = 2
	var parts []string
	for _, c := range sorted[:min(shown, len(sorted))] {
		parts = append(parts, fmt.Sprintf("%s %d/%d", c.name, min(c.capacity, demand), demand))
	}
	out := strings.Join(parts, ", ")
	if len(sorted) > shown {
		out += fmt.Sprintf(" (+%d more)", len(sorted)-shown)
	}
	return out
}

// Capacities returns how many of the request's pending members each usable HyperNode, and the
// virtual root, can host after the ledger: the numbers the search compares with the demand.
// Tools that explain a plan use it to show what the planner saw.
func Capacities(req Request) map[string]int {
	p := &planner{req: req, capacity: map[string]int{}}
	p.computeCapacity()
	delete(p.capacity, looseKey)
	return p.capacity
}

// computeCapacity sums node capacities bottom-up, after the ledger.
func (p *planner) computeCapacity() {
	tree := p.req.Tree
	inLeaf := map[string]bool{}
	var walk func(string) int
	walk = func(name string) int {
		info, ok := tree.HyperNode(name)
		if !ok || info.Excluded {
			return 0
		}
		total := 0
		if info.Leaf {
			for _, n := range info.Nodes {
				inLeaf[n] = true
				total += p.req.Nodes[n].Capacity
			}
			total = max(total-p.req.Promised[name], 0)
		} else {
			for _, c := range info.Children {
				total += walk(c)
			}
		}
		p.capacity[name] = total
		return total
	}
	rootTotal := 0
	for _, c := range tree.Root().Children {
		rootTotal += walk(c)
	}
	looseTotal := 0
	for n, node := range p.req.Nodes {
		if !inLeaf[n] {
			p.loose = append(p.loose, n)
			looseTotal += node.Capacity
		}
	}
	sort.Strings(p.loose)
	looseTotal = max(looseTotal-p.req.Promised[LooseLeaf], 0)
	p.capacity[looseKey] = looseTotal
	p.capacity[hypernode.VirtualRootName] = rootTotal + looseTotal
}

// placedAncestor returns the lowest HyperNode holding every placed member ("" if none).
func (p *planner) placedAncestor() string {
	return LowestCommon(p.req.Tree, p.req.Placed)
}

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

// place plans the job into domain: each sub-group first, in order, inside its own smallest
// HyperNode within the domain, then the members in no sub-group. It returns the plan and the
// sum of the sub-groups' scores, or nil and the reason when a sub-group does not fit.
// Capacities are restored afterwards.
func (p *planner) place(domain string, tier int) (*Plan, float64, string) {
	if len(p.req.SubGroups) == 0 {
		return p.assign(domain, tier), 0, ""
	}
	saved := make(map[string]int, len(p.capacity))
	for k, v := range p.capacity {
		saved[k] = v
	}
	defer func() { p.capacity = saved }()
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

// score is the strategy's score of a HyperNode for demand members (higher is better).
func (p *planner) score(name string, demand int) float64 {
	if p.req.Strategy == LeastWaste {
		return -float64(p.capacity[name] - demand)
	}
	return p.binPackScore(name, demand)
}

// subGroupHome finds the HyperNode for a sub-group inside domain: the lowest tier its
// constraint allows with a HyperNode that holds its placed members and can host its pending
// ones; among those, more placed members inside first, then the strategy's highest score
// (seed 003's sub-job preference), then the name. It returns the HyperNode and its score.
func (p *planner) subGroupHome(domain string, sg SubGroup) (string, float64, bool) {
	tree := p.req.Tree
	domainInfo, _ := tree.HyperNode(domain)
	placedIn := LowestCommon(tree, sg.Placed)
	inside := func(h string) bool {
		lca, ok := tree.LCA(h, domain)
		return ok && lca == domain
	}
	demand := len(sg.Pending)
	for _, tier := range tree.Tiers() {
		if tier > domainInfo.Tier || (tier > sg.MaxTier && !sg.Soft) {
			break
		}
		best, bestScore, bestPlaced := "", 0.0, -1
		for _, h := range tree.Candidates(tier) {
			if !inside(h) || p.capacity[h] < demand {
				continue
			}
			if placedIn != "" {
				if lca, ok := tree.LCA(h, placedIn); !ok || lca != h {
					continue
				}
			}
			placed := 0
			for _, n := range sg.Placed {
				if leaf, ok := tree.LeafOf(n); ok {
					if lca, _ := tree.LCA(leaf, h); lca == h {
						placed++
					}
				}
			}
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
		p.capacity[looseKey] -= n
		p.capacity[hypernode.VirtualRootName] -= n
		return
	}
	p.capacity[leaf] -= n
	for _, a := range p.req.Tree.Ancestors(leaf) {
		p.capacity[a] -= n
	}
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
	covered := 0
	for _, c := range byCapacity {
		if covered >= count {
			break
		}
		if caps[c] == 0 {
			continue
		}
		chosen[c] = true
		covered += caps[c]
	}
	// Fill the chosen children in tree order, so consecutive ranks share a subtree.
	remaining := count
	for _, c := range children {
		if !chosen[c] || remaining == 0 {
			continue
		}
		n := min(caps[c], remaining)
		remaining -= n
		if c == looseKey {
			*out = append(*out, leafCount{leaf: LooseLeaf, count: n})
			continue
		}
		p.spread(c, n, out)
	}
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
