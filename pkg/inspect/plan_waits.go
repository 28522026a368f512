package inspect

import (
	"fmt"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// occupant is a running gang or pod, with its pods by node.
type occupant struct {
	report OccupantReport
	byNode map[string][]*v1.Pod
}

// waitsFor finds, among the allowed domains, the one where the fewest running gangs and pods
// would have to finish for the job to fit (by room: the greedy count, those freeing the most
// first, is an upper bound of the fewest), and names them.
func (c *Cluster) waitsFor(s *SearchReport, gang podgroup.Gang) *WaitsForReport {
	in := s.in
	own := gang.Key.Namespace + "/" + gang.Key.Name
	occupants := map[string]*occupant{}
	onNode := map[string][]*occupant{}
	for _, n := range c.Nodes {
		for _, p := range c.nodes[n.Name].pods {
			key, kind := podGroupOf(p), "PodGroup"
			if key == own {
				continue
			}
			if key == "" {
				key, kind = p.Namespace+"/"+p.Name, "Pod"
			}
			o := occupants[kind+"/"+key]
			if o == nil {
				o = &occupant{report: OccupantReport{Kind: kind, Name: key}, byNode: map[string][]*v1.Pod{}}
				occupants[kind+"/"+key] = o
			}
			if len(o.byNode[n.Name]) == 0 {
				onNode[n.Name] = append(onNode[n.Name], o)
			}
			o.byNode[n.Name] = append(o.byNode[n.Name], p)
			if p.Spec.Priority != nil && (o.report.Pods == 0 || *p.Spec.Priority > o.report.Priority) {
				o.report.Priority = *p.Spec.Priority
			}
			since := p.CreationTimestamp.Time
			if p.Status.StartTime != nil {
				since = p.Status.StartTime.Time
			}
			if o.report.Pods == 0 || since.Before(o.report.Since) {
				o.report.Since = since
			}
			o.report.Pods++
		}
	}
	holdsNow := make(map[string]int, len(c.Nodes))
	for _, n := range c.Nodes {
		holdsNow[n.Name], _ = c.nodeCapacity(n.Name, in)
	}

	var best *WaitsForReport
	for _, t := range s.Tiers {
		if !t.Allowed {
			continue
		}
		names := c.snap.Candidates(t.Tier)
		var nodes func(string) []string = c.snap.Nodes
		if t.Tier == c.snap.RootTier() {
			names = []string{hypernode.VirtualRootName}
			nodes = func(string) []string { return sortedNames(c.nodes) }
		}
		for _, name := range names {
			w := c.waitIn(name, nodes(name), in, holdsNow, onNode)
			if w == nil {
				continue
			}
			w.Tier = t.Tier
			w.TierName = t.TierName
			if best == nil || len(w.Occupants) < len(best.Occupants) {
				best = w
			}
		}
	}
	if best == nil {
		return &WaitsForReport{Needs: in.demand, Reason: "no allowed domain would hold the job even if everything running in it finished"}
	}
	for i := range best.Occupants {
		best.Occupants[i].Age = duration.HumanDuration(c.Now.Sub(best.Occupants[i].Since))
	}
	return best
}

// waitIn is what would have to finish in one domain (its nodes) for the job to fit there;
// nil when it would not fit even empty.
func (c *Cluster) waitIn(name string, nodes []string, in searchInput, holdsNow map[string]int, onNode map[string][]*occupant) *WaitsForReport {
	w := &WaitsForReport{Domain: name, Needs: in.demand}
	present := map[*occupant]bool{}
	var order []*occupant
	inDomain := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		inDomain[n] = true
		w.Holds += holdsNow[n]
		for _, o := range onNode[n] {
			if !present[o] {
				present[o] = true
				order = append(order, o)
			}
		}
	}
	w.Holds, w.Running = min(w.Holds, in.demand), len(order)
	// Each occupant's room alone, then the greedy count in that order.
	frees := make(map[*occupant]int, len(order))
	for _, o := range order {
		for n, pods := range o.byNode {
			if inDomain[n] {
				frees[o] += c.holdsWithout(n, in, pods) - holdsNow[n]
			}
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if frees[a] != frees[b] {
			return frees[a] > frees[b]
		}
		if !a.report.Since.Equal(b.report.Since) {
			return a.report.Since.Before(b.report.Since)
		}
		return a.report.Kind+a.report.Name < b.report.Kind+b.report.Name
	})
	// Taken in that order until the job fits (occupants that free nothing alone may free room
	// together: pods sharing a node), then those whose end turns out not to be needed dropped.
	gone := map[string][]*v1.Pod{}
	total := w.Holds
	var chosen []*occupant
	for _, o := range order {
		if total >= in.demand {
			break
		}
		total += c.shift(o, in, inDomain, gone, true)
		chosen = append(chosen, o)
	}
	if total < in.demand {
		return nil
	}
	for i := len(chosen) - 1; i >= 0; i-- {
		if lost := c.shift(chosen[i], in, inDomain, gone, false); total+lost >= in.demand {
			total += lost
			chosen = append(chosen[:i], chosen[i+1:]...)
		} else {
			c.shift(chosen[i], in, inDomain, gone, true)
		}
	}
	for _, o := range chosen {
		r := o.report
		r.Frees = frees[o]
		w.Occupants = append(w.Occupants, r)
	}
	return w
}

// shift takes occupant o's pods in the domain out of (leave) or back into the nodes' room
// (gone holds the pods taken out, by node) and returns how many members the domain's holds
// change by.
func (c *Cluster) shift(o *occupant, in searchInput, inDomain map[string]bool, gone map[string][]*v1.Pod, leave bool) int {
	delta := 0
	for n, pods := range o.byNode {
		if !inDomain[n] {
			continue
		}
		before := c.holdsWithout(n, in, gone[n])
		if leave {
			gone[n] = append(gone[n], pods...)
		} else {
			gone[n] = slices.DeleteFunc(gone[n], func(p *v1.Pod) bool { return slices.Contains(pods, p) })
		}
		delta += c.holdsWithout(n, in, gone[n]) - before
	}
	return delta
}

// holdsWithout is how many members a node holds once pods have left.
func (c *Cluster) holdsWithout(node string, in searchInput, pods []*v1.Pod) int {
	freed := v1.ResourceList{}
	for _, p := range pods {
		addList(freed, podRequests(p))
	}
	holds, _ := c.nodeCapacityFreed(node, in, freed)
	return holds
}

// describeOccupant is "PodGroup team-a/llm (4 pods, priority 100, running 2h)".
func describeOccupant(o OccupantReport) string {
	return fmt.Sprintf("%s %s (%d %s, priority %d, running %s)", o.Kind, o.Name, o.Pods, plural(o.Pods, "pod", "pods"), o.Priority, o.Age)
}
