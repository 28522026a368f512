package networktopology

import (
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// labelPlacements serves a native pod group whose topology key is not a tier label: since a
// profile runs one PlacementGenerate plugin, this one must honour any key, as upstream's
// TopologyPlacementGenerator does (one placement per value of the label, the value of the
// placed members only). It prunes the domains whose capacity bound (free resources, no plugin
// run) cannot hold the pending members and generates the tightest first: labelPlacements of
// them on a first attempt, retryPlacements after a failed one.
func (p *NetworkTopologyAware) labelPlacements(n podgroup.Native, key string, pending, placed []*v1.Pod, parent *fwk.Placement, retry bool) ([]*fwk.Placement, error) {
	required := ""
	for _, pod := range placed {
		ni, err := p.handle.SnapshotSharedLister().NodeInfos().Get(pod.Spec.NodeName)
		if err != nil {
			return nil, fmt.Errorf("%s: the node of member %s: %w", n, pod.Name, err)
		}
		value, ok := ni.Node().Labels[key]
		switch {
		case !ok:
			return nil, fmt.Errorf("%s: member %s runs on node %s, which has no label %s", n, pod.Name, pod.Spec.NodeName, key)
		case required != "" && value != required:
			return nil, fmt.Errorf("%s: its members run in two domains of %s (%s and %s)", n, key, required, value)
		}
		required = value
	}
	domains := map[string][]fwk.NodeInfo{}
	for _, ni := range parent.Nodes {
		if value, ok := ni.Node().Labels[key]; ok && (required == "" || value == required) {
			domains[value] = append(domains[value], ni)
		}
	}
	members := make([]podgroup.Member, len(pending))
	for i, pod := range pending {
		members[i] = podgroup.Member{Pod: pod}
	}
	shapes := podgroup.ShapesOf(members)
	bounds := map[string]int{}
	var fitting []string
	for value, nodes := range domains {
		if b := p.boundOf(shapes, nodes); b >= len(pending) {
			bounds[value] = b
			fitting = append(fitting, value)
		}
	}
	if len(fitting) == 0 {
		return nil, &placement.Unsatisfiable{Message: fmt.Sprintf("%s: no domain of %s (%d with free nodes) can hold its %d pending pods", n, key, len(domains), len(pending))}
	}
	sort.Slice(fitting, func(i, j int) bool {
		a, b := fitting[i], fitting[j]
		return bounds[a] < bounds[b] || bounds[a] == bounds[b] && a < b
	})
	limit := labelPlacements
	if retry {
		limit = retryPlacements
	}
	out := make([]*fwk.Placement, 0, min(limit, len(fitting)))
	for _, value := range fitting[:min(limit, len(fitting))] {
		out = append(out, &fwk.Placement{Name: key + "=" + value, Nodes: domains[value]})
	}
	return out, nil
}

// boundOf is how many of the pending pods (of these shapes) the nodes can hold at most: per
// shape, the sum of its capacity bounds; the smallest share of any shape.
func (p *NetworkTopologyAware) boundOf(shapes []podgroup.Shape, nodes []fwk.NodeInfo) int {
	total := 0
	for _, s := range shapes {
		sum := 0
		for _, node := range p.capacityBounds(s.Rep, nodes, len(s.Members)) {
			sum += node.Capacity
		}
		if sum < len(s.Members) {
			return sum
		}
		total += len(s.Members)
	}
	return total
}
