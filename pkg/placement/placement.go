// Package placement plans where a gang goes in the HyperNode tree. It is pure: plain inputs
// (the tree snapshot, per-node capacities and resource usage), plain outputs (the chosen
// domain and the leaf of every pending member, or an explanation), no framework types.
//
// The plan, in three steps:
//
//  1. Capacity is real fit, computed by the caller: for each node, how many more members of
//     the gang pass the scheduler's Filter plugins when added one after another (capped at
//     the number of pending members). Leaves sum their nodes, parents their children.
//     Other gangs' plans hold their slots as nominations, which the caller's Filter sees.
//  2. Gradient search: for each tier ascending, up to the allowed tier (hard) or the virtual
//     root (soft), the candidates are the usable HyperNodes of that tier that contain every
//     bound or reserved member and whose capacity covers the pending members. The first tier
//     with a candidate wins; the strategy (BinPack or LeastWaste) picks among its candidates,
//     ties going to more members already inside, then to the name.
//  3. Inside the chosen domain the pending members are spread over as few children as
//     possible at every level (largest capacity first; the last leaf taken is the smallest
//     that holds the rest), down to leaves; members in rank order fill the chosen leaves in
//     tree order, so consecutive ranks share a leaf.
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
	// highest (docs/design.md, "Topology placement").
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
	Nodes    map[string]Node
	Strategy Strategy
	// PodRequest and Weights are the weighted resources of one member, for BinPack.
	PodRequest, Weights []float64
	// SubGroups, in placement order, are the sub-groups of the job whose members each need
	// their own domain inside the job's (their pending members are also in Pending).
	SubGroups []SubGroup
	// Shapes splits the pending members by pod shape when they are not all alike (requests,
	// node selection, tolerations): then Nodes' Capacity is not used, each shape has its own,
	// and Fit answers for nodes that already hold members planned before (mixed.go). Nil or
	// one shape: every member is like the one Nodes' capacities were counted for.
	Shapes []Shape
	Fit    Fitter
}

// Shape is one pod shape of a gang whose pending members differ.
type Shape struct {
	// Name describes the shape in messages, e.g. "cpu=1" or "cpu=8,nvidia.com/gpu=8".
	Name string
	// Members are the gang's members of this shape (pending ones are planned), in rank order.
	Members []string
	// Capacity is, per node, how many members of this shape fit on it next to none of the
	// gang's other members, capped like Node.Capacity.
	Capacity map[string]int
	// Request is the weighted request of one member (the order of Weights), for BinPack.
	Request []float64
}

// Fitter returns how many members of Shapes[shape] fit on node next to planned[i] members
// of each Shapes[i] planned there before, at most limit. It runs the scheduler's Filter
// plugins, so it is called only for nodes that planned members already share. The planner
// takes a shape's solo capacity as an upper bound: a Fitter never answers more than the
// node's solo capacity of the shape less the members of that shape planned on it.
type Fitter func(node string, planned []int, shape, limit int) int

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
	// PodNode maps each pending member to its node when the members differ in shape: which
	// node a member takes then decides whether the others still fit.
	PodNode map[string]string
}

// Unsatisfiable explains why no plan exists.
type Unsatisfiable struct{ Message string }

func (u *Unsatisfiable) Error() string { return u.Message }

// planner holds the state of one Plan call.
type planner struct {
	req      Request
	capacity map[string]int // per HyperNode (and LooseLeaf)
	loose    []string       // nodes in no usable leaf
	// planning counts, per leaf, the members a mixed packing planned so far (mixed.go).
	planning map[string]int
	// sums memoizes each HyperNode's weighted used and allocatable resources (BinPack), and
	// inside the candidates of a tier inside a domain: neither changes during one Make, and
	// a job with sub-groups asks for them once per sub-group.
	sums   map[string]resourceSums
	inside map[domainTier][]string
	// candidateRank is each tier's candidates' positions in Candidates (candidatesIn);
	// placedCounts the placed members below each HyperNode (placedBelow).
	candidateRank map[int]map[string]int
	placedCounts  map[string]int
	// undo, while place tries a domain, records the capacities it changes, to restore them.
	undo *[]capacityUndo
}

// capacityUndo is a capacity before place changed it.
type capacityUndo struct {
	key   string
	value int
}

// Make plans the pending members, or explains why it cannot.
func Make(req Request) (*Plan, error) {
	p := &planner{req: req, capacity: map[string]int{}}
	if len(req.Pending) == 0 {
		// Nothing to place: the domain is where the placed members are (messages name it).
		plan := &Plan{Domain: p.placedAncestor(), PodLeaf: map[string]string{}, LeafPods: map[string][]string{}}
		if info, ok := req.Tree.HyperNode(plan.Domain); ok && plan.Domain != "" {
			plan.Tier = info.Tier
		}
		return plan, nil
	}
	p.computeCapacity()
	var s search = uniform{p}
	if len(req.Shapes) > 1 {
		s = newMixed(p)
	}
	g := &gradient{p: p, s: s, placedIn: p.placedAncestor()}
	for _, tier := range req.Tree.Tiers() {
		// Hard: never above the allowed tier. Soft: the allowed tier is a preference, the
		// search goes on up to the whole cluster.
		if tier > req.MaxTier && !req.Soft {
			break
		}
		if plan := g.tryTier(tier); plan != nil {
			return plan, nil
		}
	}
	if SpansCluster(req.Tree, req.Soft, req.MaxTier) {
		if plan, err := g.tryCluster(); plan != nil || err != nil {
			return plan, err
		}
	}
	return nil, g.unsatisfiable()
}

// gradient is one run of the gradient search: the tiers tried, lowest first, and what each
// found.
type gradient struct {
	p        *planner
	s        search
	placedIn string
	attempts []tried
	// subGroupFailures say why candidates that held the job could not hold its sub-groups.
	subGroupFailures []string
}

// tried is a tier the search tried and its candidates, with what each could hold.
type tried struct {
	tier       int
	candidates []candidate
}

// tryTier places the gang in the best candidate of the tier, or records the tier's
// candidates as tried. Without sub-groups the strategy's best candidate wins. With
// sub-groups, the job-level preference: every candidate that holds the job and its
// sub-groups is scored by the sum of its sub-groups' best scores; the highest sum wins, ties
// going to the strategy's order.
func (g *gradient) tryTier(tier int) *Plan {
	req, s := g.p.req, g.s
	var cands, fitting []candidate
	for _, name := range req.Tree.Candidates(tier) {
		if g.placedIn != "" {
			if lca, ok := req.Tree.LCA(name, g.placedIn); !ok || lca != name {
				continue // it does not contain every placed member
			}
		}
		c := candidate{name: name, capacity: s.capacityOf(name)}
		if s.covers(name) {
			fitting = append(fitting, c)
		}
		cands = append(cands, c)
	}
	var best *Plan
	bestScore := 0.0
	for _, name := range s.rank(fitting) {
		plan, score, why := s.place(name, tier)
		if plan == nil {
			if why != "" {
				g.subGroupFailures = append(g.subGroupFailures, why)
			}
			continue
		}
		if len(req.SubGroups) == 0 {
			return plan
		}
		if best == nil || score > bestScore {
			best, bestScore = plan, score
		}
	}
	if best != nil {
		return best
	}
	for i := range cands {
		// A candidate tried and found short says how many members it really held.
		cands[i].capacity = s.capacityOf(cands[i].name)
	}
	g.attempts = append(g.attempts, tried{tier: tier, candidates: cands})
	return nil
}

// tryCluster places the gang over the whole cluster (soft, or hard at the root's tier); a
// soft gang that does not fit there either gets the cluster's count as its answer.
func (g *gradient) tryCluster() (*Plan, error) {
	req, s := g.p.req, g.s
	if s.covers(hypernode.VirtualRootName) {
		plan, _, why := s.place(hypernode.VirtualRootName, req.Tree.RootTier())
		if plan != nil {
			return plan, nil
		}
		if why != "" {
			g.subGroupFailures = append(g.subGroupFailures, why)
		}
	}
	if req.Soft && len(g.subGroupFailures) == 0 {
		demand := len(req.Pending)
		return nil, &Unsatisfiable{Message: fmt.Sprintf("%s: the whole cluster can host only %d of %d pods", req.Constraint, min(s.capacityOf(hypernode.VirtualRootName), demand), demand)}
	}
	return nil, nil
}

// unsatisfiable says why no domain can host the gang: per tier tried, the best candidates
// and what they hold; or that candidates held the job but not its sub-groups.
func (g *gradient) unsatisfiable() *Unsatisfiable {
	req, demand := g.p.req, len(g.p.req.Pending)
	var parts []string
	for _, a := range g.attempts {
		desc := describeCandidates(a.candidates, demand)
		if len(a.candidates) == 0 && g.placedIn != "" {
			desc = "none holds the placed members"
		}
		parts = append(parts, fmt.Sprintf("tier %d: %s", a.tier, desc))
	}
	msg := fmt.Sprintf("%s: no HyperNode can host %d pods", req.Constraint, demand)
	if shapes := g.s.describeShapes(); shapes != "" {
		msg = fmt.Sprintf("%s: no HyperNode can host %d pods (%s)", req.Constraint, demand, shapes)
	}
	switch {
	case g.placedIn == hypernode.VirtualRootName:
		msg += fmt.Sprintf(" together with the %d placed members, which no HyperNode holds together (one is on a node in no HyperNode, or they are in two top-level trees)", len(req.Placed))
	case g.placedIn != "":
		msg += fmt.Sprintf(" together with the %d placed members (in %s)", len(req.Placed), g.placedIn)
	}
	if len(parts) > 0 {
		msg += "; " + strings.Join(parts, "; ")
	} else {
		msg += fmt.Sprintf("; no HyperNode has a tier <= %d", req.MaxTier)
	}
	if len(g.subGroupFailures) > 0 {
		// The job fitted somewhere, its sub-groups did not.
		msg = fmt.Sprintf("%s: %d HyperNode(s) can host the job's %d pods but not its sub-groups; %s",
			req.Constraint, len(g.subGroupFailures), demand, strings.Join(firstN(g.subGroupFailures, 2), "; "))
	}
	return &Unsatisfiable{Message: msg}
}

// search is how Make judges and fills a candidate HyperNode: uniform when every pending
// member has the same shape (counts suffice), mixed otherwise (mixed.go).
type search interface {
	// capacityOf is how many pending members the HyperNode can host, for messages.
	capacityOf(name string) int
	// covers reports whether the HyperNode may host every pending member, by capacity.
	covers(name string) bool
	// rank orders candidates by the strategy and the tie-breaks, best first.
	rank(cands []candidate) []string
	// place plans the members into the HyperNode: the plan and its sub-group score, or nil
	// and why (empty when the only reason is that the members did not fit).
	place(name string, tier int) (*Plan, float64, string)
	// describeShapes names the shapes of the pending members in messages ("" for one shape).
	describeShapes() string
}

// uniform is the search of a gang whose pending members all have one shape.
type uniform struct{ *planner }

func (u uniform) capacityOf(name string) int { return u.capacity[name] }
func (u uniform) covers(name string) bool    { return u.capacity[name] >= len(u.req.Pending) }
func (u uniform) rank(cands []candidate) []string {
	return u.planner.rank(cands, len(u.req.Pending))
}
func (u uniform) place(name string, tier int) (*Plan, float64, string) {
	return u.planner.place(name, tier)
}
func (u uniform) describeShapes() string { return "" }

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

// placedAncestor returns the lowest HyperNode holding every placed member ("" if none).
func (p *planner) placedAncestor() string {
	return LowestCommon(p.req.Tree, p.req.Placed)
}
