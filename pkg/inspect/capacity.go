package inspect

import (
	"math"
	"sort"

	v1 "k8s.io/api/core/v1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
)

// CapacityReport is, per tier, the largest gang of one pod shape that could start now inside
// one domain of the tier: the number to quote for "how big a job can I run right now".
type CapacityReport struct {
	Resource string `json:"resource"`
	// Request is what one pod of the shape requests (Shape names the pod it was read from).
	Request []ResourceAmount `json:"request"`
	Shape   string           `json:"shape,omitempty"`
	Tiers   []CapacityTier   `json:"tiers"`
	// UnusableNodes counts the nodes that take no pod of the shape (taints, selectors, not
	// ready or cordoned).
	UnusableNodes int      `json:"unusableNodes"`
	NotCounted    []string `json:"notCounted,omitempty"`
	Warnings      []string `json:"warnings,omitempty"`
}

// CapacityTier is one tier (the last is the whole cluster): the largest gang one domain of it
// holds, the domain, and the next best.
type CapacityTier struct {
	Tier     int    `json:"tier"`
	TierName string `json:"tierName,omitempty"`
	// Largest is the most pods of the shape one domain holds now; Domain is that domain.
	Largest int    `json:"largest"`
	Domain  string `json:"domain,omitempty"`
	// Candidates are the tier's best domains, most room first.
	Candidates []CapacityDomain `json:"candidates"`
	More       int              `json:"more,omitempty"`
}

// CapacityDomain is a domain and how many pods of the shape it holds now.
type CapacityDomain struct {
	Name  string `json:"name"`
	Holds int    `json:"holds"`
}

// Capacity counts, per tier, how many pods like shape each domain holds now, by the same
// count plan and explain use (requests, taints and tolerations, node selection, devices).
func (c *Cluster) Capacity(shape *v1.Pod, res v1.ResourceName) CapacityReport {
	if res == "" {
		res = c.DefaultResource()
	}
	request := podRequests(shape)
	in, notCounted := c.inputOf(shape, request, math.MaxInt32)
	r := CapacityReport{Resource: string(res), Shape: shape.Name, NotCounted: notCounted, Warnings: c.warningsFor(res)}
	for _, name := range shownResources(res) {
		if q, ok := request[name]; ok {
			r.Request = append(r.Request, ResourceAmount{Resource: string(name), Amount: q})
		}
	}
	nodes := make(map[string]placement.Node, len(c.Nodes))
	for _, n := range c.Nodes {
		holds, why := c.nodeCapacity(n.Name, in)
		if why != "" {
			r.UnusableNodes++
		}
		nodes[n.Name] = placement.Node{Capacity: holds}
	}
	capacity := placement.Capacities(placement.Request{Tree: c.snap, Nodes: nodes})
	for _, tier := range append(append([]int(nil), c.snap.Tiers()...), c.snap.RootTier()) {
		names := c.snap.Candidates(tier)
		if tier == c.snap.RootTier() {
			names = []string{hypernode.VirtualRootName}
		}
		t := CapacityTier{Tier: tier}
		for _, name := range names {
			if info, ok := c.snap.HyperNode(name); ok && t.TierName == "" {
				t.TierName = info.TierName
			}
			t.Candidates = append(t.Candidates, CapacityDomain{Name: name, Holds: capacity[name]})
		}
		sort.SliceStable(t.Candidates, func(i, j int) bool {
			if t.Candidates[i].Holds != t.Candidates[j].Holds {
				return t.Candidates[i].Holds > t.Candidates[j].Holds
			}
			return t.Candidates[i].Name < t.Candidates[j].Name
		})
		if len(t.Candidates) > 0 && t.Candidates[0].Holds > 0 {
			t.Largest, t.Domain = t.Candidates[0].Holds, t.Candidates[0].Name
		}
		if len(t.Candidates) > candidatesShown {
			t.More = len(t.Candidates) - candidatesShown
			t.Candidates = t.Candidates[:candidatesShown]
		}
		r.Tiers = append(r.Tiers, t)
	}
	return r
}
