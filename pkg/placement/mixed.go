package placement

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
)

// mixed is the search of a gang whose pending members differ in shape (a launcher and its
// workers, a head and its workers). A count per node no longer says what fits: a node that
// holds one worker may still hold the launcher, or not. Each candidate HyperNode is packed
// for real instead: shape by shape, scarcest first, the members of a shape are spread over
// as few leaves as possible (the leaves the gang already uses first), then onto nodes, where
// a node that holds members planned before is asked again (Request.Fit) what still fits.
type mixed struct {
	*planner
	// order lists the shapes with pending members, scarcest first (fewest whole-cluster
	// slots per member needed): the big members take their nodes before the small ones fill
	// the gaps.
	order []int
	// shapeOf is the shape of each pending member, demand the pending members per shape.
	shapeOf map[string]int
	demand  []int
	// solo is each shape's capacity per HyperNode with no other member planned.
	solo []map[string]int
	// packed is how many members a candidate held when its packing fell short.
	packed map[string]int
	// fits memoizes Fit by node, shape and what is planned on the node.
	fits map[string]int
}

func newMixed(p *planner) *mixed {
	m := &mixed{planner: p, shapeOf: map[string]int{}, demand: make([]int, len(p.req.Shapes)),
		solo: make([]map[string]int, len(p.req.Shapes)), packed: map[string]int{}, fits: map[string]int{}}
	for s, shape := range p.req.Shapes {
		for _, name := range shape.Members {
			m.shapeOf[name] = s
		}
	}
	for _, name := range p.req.Pending {
		m.demand[m.shapeOf[name]]++
	}
	slots := make([]float64, len(p.req.Shapes))
	for s, shape := range p.req.Shapes {
		if m.demand[s] == 0 {
			continue
		}
		m.order = append(m.order, s)
		m.solo[s] = map[string]int{}
		total := p.sumCapacity(hypernode.VirtualRootName, func(n string) int { return shape.Capacity[n] }, m.solo[s])
		slots[s] = float64(total) / float64(m.demand[s])
	}
	sort.SliceStable(m.order, func(i, j int) bool { return slots[m.order[i]] < slots[m.order[j]] })
	return m
}

// capacityOf is an upper bound of the members the HyperNode holds (each shape alone), or
// what its packing really held once it was tried.
func (m *mixed) capacityOf(name string) int {
	if n, ok := m.packed[name]; ok {
		return n
	}
	total := 0
	for _, s := range m.order {
		total += min(m.solo[s][name], m.demand[s])
	}
	return total
}

// covers: every shape fits the HyperNode alone (necessary; the packing decides).
func (m *mixed) covers(name string) bool {
	for _, s := range m.order {
		if m.solo[s][name] < m.demand[s] {
			return false
		}
	}
	return true
}

func (m *mixed) describeShapes() string {
	var parts []string
	for _, s := range m.order {
		parts = append(parts, fmt.Sprintf("%d x %s", m.demand[s], m.req.Shapes[s].Name))
	}
	return strings.Join(parts, ", ")
}

// rank orders candidates like the uniform search, scoring BinPack with the requests of the
// real members.
func (m *mixed) rank(cands []candidate) []string {
	request := m.requestOf(m.req.Pending)
	return m.rankBy(cands, func(c candidate) float64 {
		if m.req.Strategy == LeastWaste {
			return -float64(c.capacity - len(m.req.Pending))
		}
		return m.binPackScoreOf(c.name, request)
	})
}

// requestOf sums the weighted requests of members.
func (m *mixed) requestOf(members []string) []float64 {
	out := make([]float64, len(m.req.Weights))
	for _, name := range members {
		for i, r := range m.req.Shapes[m.shapeOf[name]].Request {
			if i < len(out) {
				out[i] += r
			}
		}
	}
	return out
}

// packing is one packing in progress: the plan so far and what it put on each node.
type packing struct {
	plan *Plan
	// onNode counts, per node, the members planned on it by shape.
	onNode map[string][]int
	// inLeaf counts the members planned per leaf, so that later shapes join those leaves;
	// leafShapes the same by shape.
	inLeaf     map[string]int
	leafShapes map[string][]int
	// puts records every put, so that a trial packing can be undone (undo).
	puts []put
}

// put is one call of packing.put: pods of shape on node of leaf, and whether it was the
// first member planned on the node and in the leaf.
type put struct {
	node, leaf       string
	shape            int
	pods             []string
	newNode, newLeaf bool
}

func newPacking(domain string, tier int) *packing {
	return &packing{plan: &Plan{Domain: domain, Tier: tier, PodLeaf: map[string]string{},
		LeafPods: map[string][]string{}, PodNode: map[string]string{}}, onNode: map[string][]int{}, inLeaf: map[string]int{},
		leafShapes: map[string][]int{}}
}

// mark is the point undo returns the packing to.
func (pk *packing) mark() int { return len(pk.puts) }

// undo takes back every put made since mark, newest first.
func (pk *packing) undo(mark int) {
	for i := len(pk.puts) - 1; i >= mark; i-- {
		p := pk.puts[i]
		pk.onNode[p.node][p.shape] -= len(p.pods)
		if p.newNode {
			delete(pk.onNode, p.node)
		}
		for _, pod := range p.pods {
			delete(pk.plan.PodLeaf, pod)
			delete(pk.plan.PodNode, pod)
		}
		pk.inLeaf[p.leaf] -= len(p.pods)
		pk.leafShapes[p.leaf][p.shape] -= len(p.pods)
		pk.plan.LeafPods[p.leaf] = pk.plan.LeafPods[p.leaf][:len(pk.plan.LeafPods[p.leaf])-len(p.pods)]
		if p.newLeaf {
			delete(pk.inLeaf, p.leaf)
			delete(pk.leafShapes, p.leaf)
			delete(pk.plan.LeafPods, p.leaf)
		}
	}
	pk.puts = pk.puts[:mark]
}

// place packs the job into domain: each sub-group into its own HyperNode inside the domain,
// then the members in no sub-group.
func (m *mixed) place(domain string, tier int) (*Plan, float64, string) {
	pk := newPacking(domain, tier)
	if len(m.req.SubGroups) == 0 {
		if placed, ok := m.pack(pk, domain, m.req.Pending); !ok {
			m.packed[domain] = placed
			return nil, 0, ""
		}
		return pk.plan, 0, ""
	}
	total := 0.0
	inSubGroup := map[string]bool{}
	for _, sg := range m.req.SubGroups {
		for _, pod := range sg.Pending {
			inSubGroup[pod] = true
		}
		if len(sg.Pending) == 0 {
			continue
		}
		score, ok := m.subGroupHome(pk, domain, sg)
		if !ok {
			return nil, 0, fmt.Sprintf("in %s: sub-group %s (%s) fits no HyperNode for its %d pods", domain, sg.ID, sg.Constraint, len(sg.Pending))
		}
		total += score
	}
	var rest []string
	for _, pod := range m.req.Pending {
		if !inSubGroup[pod] {
			rest = append(rest, pod)
		}
	}
	if _, ok := m.pack(pk, domain, rest); !ok {
		return nil, 0, fmt.Sprintf("in %s: no room left for the %d members outside the sub-groups", domain, len(rest))
	}
	return pk.plan, total, ""
}

// subGroupHome packs a sub-group into pk, into the lowest tier inside domain that its
// constraint allows and that holds its placed members; among the HyperNodes of that tier
// where it fits: more placed members inside first, then the strategy's score, then the
// name. It returns the home's score and whether there was one (pk is unchanged if not).
// The HyperNodes are ranked first and packed in that order until one holds the sub-group,
// each failed trial undone: the first that fits is the best, so a sub-group costs one
// packing where it fits at once, never a copy of the job's packing per HyperNode.
func (m *mixed) subGroupHome(pk *packing, domain string, sg SubGroup) (float64, bool) {
	tree := m.req.Tree
	domainInfo, _ := tree.HyperNode(domain)
	placedIn := LowestCommon(tree, sg.Placed)
	request := m.requestOf(sg.Pending)
	score := func(h string) float64 {
		if m.req.Strategy == LeastWaste {
			return -float64(m.capacityOf(h) - len(sg.Pending))
		}
		return m.binPackScoreOf(h, request)
	}
	type option struct {
		name   string
		placed int
		score  float64
	}
	for _, tier := range tree.Tiers() {
		if tier > domainInfo.Tier || (tier > sg.MaxTier && !sg.Soft) {
			break
		}
		var options []option
		for _, h := range m.candidatesIn(domain, tier) {
			if placedIn != "" {
				if lca, ok := tree.LCA(h, placedIn); !ok || lca != h {
					continue
				}
			}
			sc := score(h)
			if math.IsNaN(sc) {
				sc = math.Inf(-1) // ranked last (only non-finite resources give one): a valid order
			}
			options = append(options, option{name: h, placed: countInside(tree, sg.Placed, h), score: sc})
		}
		// Stable: equal options stay in Candidates' order, by name.
		sort.SliceStable(options, func(i, j int) bool {
			if options[i].placed != options[j].placed {
				return options[i].placed > options[j].placed
			}
			return options[i].score > options[j].score
		})
		for _, o := range options {
			if m.leafTooFull(pk, o.name, sg.Pending) {
				continue
			}
			mark := pk.mark()
			if _, ok := m.pack(pk, o.name, sg.Pending); ok {
				return o.score, true
			}
			pk.undo(mark)
		}
	}
	if sg.Soft || sg.MaxTier >= domainInfo.Tier {
		mark := pk.mark()
		if _, ok := m.pack(pk, domain, sg.Pending); ok {
			return score(domain), true
		}
		pk.undo(mark)
	}
	return 0, false
}

// leafTooFull reports whether h is a leaf that cannot hold members on top of pk for
// certain: for some shape, its solo capacity less the members of that shape planned in it
// is below what the members need (a member planned on a node takes one of its shape's solo
// slots there, and members of other shapes only take room). Without it, every sub-group
// would try each full leaf before the first with room.
func (m *mixed) leafTooFull(pk *packing, h string, members []string) bool {
	planned := pk.leafShapes[h]
	if planned == nil {
		return false // nothing planned in it: packing it is the real test
	}
	if info, ok := m.req.Tree.HyperNode(h); !ok || !info.Leaf {
		return false
	}
	need := make([]int, len(m.req.Shapes))
	for _, name := range members {
		need[m.shapeOf[name]]++
	}
	for s, n := range need {
		if n > 0 && m.solo[s][h]-planned[s] < n {
			return true
		}
	}
	return false
}

// pack plans members below home on top of pk, shape by shape in m.order. It returns how
// many members it placed and whether all of them fit.
func (m *mixed) pack(pk *packing, home string, members []string) (int, bool) {
	byShape := make([][]string, len(m.req.Shapes))
	for _, name := range members {
		s := m.shapeOf[name]
		byShape[s] = append(byShape[s], name)
	}
	placed := 0
	for _, s := range m.order {
		pods := byShape[s]
		if len(pods) == 0 {
			continue
		}
		nodeCap := func(n string) int { return m.nodeCapacity(pk, n, s) }
		if m.packIntoUsedLeaves(pk, home, s, pods) {
			placed += len(pods)
			continue
		}
		m.capacity = map[string]int{}
		if total := m.sumCapacity(home, nodeCap, m.capacity); total < len(pods) {
			return placed + total, false
		}
		m.planning = pk.inLeaf
		var counts []leafCount
		m.spread(home, len(pods), &counts)
		m.planning = nil
		next := 0
		for _, lc := range counts {
			left := lc.count
			for _, n := range m.nodesOf(pk, lc.leaf) {
				k := min(nodeCap(n), left)
				if k <= 0 {
					continue
				}
				pk.put(n, lc.leaf, s, len(m.req.Shapes), pods[next:next+k])
				next += k
				left -= k
				if left == 0 {
					break
				}
			}
		}
		if next < len(pods) {
			// Cannot happen: a leaf's count never exceeds its nodes' capacities. A short
			// plan must still never pass as whole.
			return placed + next, false
		}
		placed += len(pods)
	}
	return placed, true
}

// put plans pods (of shape s) on node n of leaf.
func (pk *packing) put(n, leaf string, s, shapes int, pods []string) {
	_, inLeaf := pk.inLeaf[leaf]
	pk.puts = append(pk.puts, put{node: n, leaf: leaf, shape: s, pods: pods, newNode: pk.onNode[n] == nil, newLeaf: !inLeaf})
	if pk.onNode[n] == nil {
		pk.onNode[n] = make([]int, shapes)
	}
	pk.onNode[n][s] += len(pods)
	for _, pod := range pods {
		pk.plan.PodLeaf[pod] = leaf
		pk.plan.PodNode[pod] = n
		pk.plan.LeafPods[leaf] = append(pk.plan.LeafPods[leaf], pod)
	}
	pk.inLeaf[leaf] += len(pods)
	if pk.leafShapes[leaf] == nil {
		pk.leafShapes[leaf] = make([]int, shapes)
	}
	pk.leafShapes[leaf][s] += len(pods)
}

// packIntoUsedLeaves plans the pods of a later shape (a launcher after its workers) into the
// leaves below home that the packing already uses, the leaf with the most members first, if
// they hold all of them; it changes nothing otherwise. It looks only at those leaves' nodes,
// so a launcher joining 5,000 workers asks what fits next to them on one node, not on 5,000.
func (m *mixed) packIntoUsedLeaves(pk *packing, home string, s int, pods []string) bool {
	tree := m.req.Tree
	var leaves []string
	if info, ok := tree.HyperNode(home); ok && info.Leaf {
		// A leaf holds no other leaf: no need to look at every leaf the packing uses.
		if _, used := pk.inLeaf[home]; used {
			leaves = append(leaves, home)
		}
	} else {
		leaves = m.usedLeavesBelow(pk, home)
	}
	if len(leaves) == 0 {
		return false
	}
	sort.Slice(leaves, func(i, j int) bool {
		a, b := leaves[i], leaves[j]
		if (a == LooseLeaf) != (b == LooseLeaf) {
			return b == LooseLeaf
		}
		if pk.inLeaf[a] != pk.inLeaf[b] {
			return pk.inLeaf[a] > pk.inLeaf[b]
		}
		return a < b
	})
	type take struct {
		node, leaf string
		count      int
	}
	var takes []take
	left := len(pods)
	for _, leaf := range leaves {
		for _, n := range m.nodesOf(pk, leaf) {
			k := min(m.nodeCapacity(pk, n, s), left)
			if k <= 0 {
				continue
			}
			takes = append(takes, take{n, leaf, k})
			left -= k
			if left == 0 {
				break
			}
		}
		if left == 0 {
			break
		}
	}
	if left > 0 {
		return false
	}
	next := 0
	for _, t := range takes {
		pk.put(t.node, t.leaf, s, len(m.req.Shapes), pods[next:next+t.count])
		next += t.count
	}
	return true
}

// usedLeavesBelow returns the leaves below home that the packing uses (LooseLeaf below the
// virtual root), unordered.
func (m *mixed) usedLeavesBelow(pk *packing, home string) []string {
	var leaves []string
	for leaf := range pk.inLeaf {
		if leaf == LooseLeaf {
			if home == hypernode.VirtualRootName {
				leaves = append(leaves, leaf)
			}
			continue
		}
		if lca, ok := m.req.Tree.LCA(leaf, home); ok && lca == home {
			leaves = append(leaves, leaf)
		}
	}
	return leaves
}

// nodesOf returns the nodes of a leaf in the order members fill them: nodes that already
// hold planned members first (to keep the others whole), then the leaf's order.
func (m *mixed) nodesOf(pk *packing, leaf string) []string {
	var nodes []string
	if leaf == LooseLeaf {
		nodes = m.loose
	} else {
		info, _ := m.req.Tree.HyperNode(leaf)
		nodes = info.Nodes
	}
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if pk.onNode[n] != nil {
			out = append(out, n)
		}
	}
	for _, n := range nodes {
		if pk.onNode[n] == nil {
			out = append(out, n)
		}
	}
	return out
}

// nodeCapacity is how many more members of shape s fit on n with what pk planned there.
func (m *mixed) nodeCapacity(pk *packing, n string, s int) int {
	solo := m.req.Shapes[s].Capacity[n]
	planned := pk.onNode[n]
	if planned == nil || solo == 0 {
		return solo
	}
	if m.req.Fit == nil {
		return 0 // nobody can tell what fits next to the planned members
	}
	var key strings.Builder
	key.WriteString(n)
	key.WriteString("/" + strconv.Itoa(s))
	for _, c := range planned {
		key.WriteString("/" + strconv.Itoa(c))
	}
	if c, ok := m.fits[key.String()]; ok {
		return c
	}
	c := min(m.req.Fit(n, planned, s, solo), solo)
	m.fits[key.String()] = c
	return c
}

// countInside counts the nodes (one per placed member) below HyperNode h.
func countInside(tree *hypernode.Snapshot, nodes []string, h string) int {
	count := 0
	for _, n := range nodes {
		if leaf, ok := tree.LeafOf(n); ok {
			if lca, _ := tree.LCA(leaf, h); lca == h {
				count++
			}
		}
	}
	return count
}
