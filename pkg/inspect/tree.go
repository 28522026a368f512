package inspect

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/status"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// TreeReport is the HyperNode tree with capacity and occupants of one resource.
type TreeReport struct {
	// Resource is the resource whose allocatable and free amounts the report shows.
	Resource string `json:"resource"`
	// Root is the virtual root: the whole cluster, above every top-level HyperNode.
	Root HyperNodeReport `json:"root"`
	// NodesInNoHyperNode are the nodes that no HyperNode selects.
	NodesInNoHyperNode []string `json:"nodesInNoHyperNode,omitempty"`
	// NodesInExcludedHyperNodes are the nodes that only excluded leaves select, with those
	// leaves: topology placement cannot use them.
	NodesInExcludedHyperNodes []NodeLeaves `json:"nodesInExcludedHyperNodes,omitempty"`
	Warnings                  []string     `json:"warnings,omitempty"`
}

// DeviceCount is a DeviceClass's devices below a HyperNode.
type DeviceCount struct {
	Class string `json:"class"`
	Free  int64  `json:"free"`
	Total int64  `json:"total"`
}

// NodeLeaves is a node and the leaves that select it.
type NodeLeaves struct {
	Node   string   `json:"node"`
	Leaves []string `json:"leaves"`
}

// HyperNodeReport is one HyperNode of the tree.
type HyperNodeReport struct {
	Name     string `json:"name"`
	Tier     int    `json:"tier"`
	TierName string `json:"tierName,omitempty"`
	// Virtual is true for the virtual root.
	Virtual bool `json:"virtual,omitempty"`
	Leaf    bool `json:"leaf,omitempty"`
	// Nodes counts the nodes below; UsableNodes those that take new pods (ready, not
	// cordoned). A usable HyperNode counts the nodes placement can use (excluded
	// descendants not included); an excluded one counts what it selects.
	Nodes       int `json:"nodes"`
	UsableNodes int `json:"usableNodes"`
	// Allocatable sums the nodes' allocatable; Free sums, over usable nodes, allocatable
	// minus the requests of the non-terminal pods bound there. On a node that does not list
	// the resource, its DRA devices of the classes counting as it stand for it: all of them,
	// and those no allocated claim holds.
	Allocatable resource.Quantity `json:"allocatable"`
	Free        resource.Quantity `json:"free"`
	// PodGroups have bound pods on nodes below, with their counts.
	PodGroups []PodGroupCount `json:"podGroups,omitempty"`
	// Devices are the DRA devices of the nodes below per DeviceClass: all of them, and the
	// free ones (on usable nodes, held by no allocated claim).
	Devices []DeviceCount `json:"devices,omitempty"`
	// Holds are the holds of waiting gangs on this HyperNode (on the root: those on nodes of
	// the whole cluster).
	Holds []HoldReport `json:"holds,omitempty"`
	// Excluded: topology placement does not use this HyperNode; ExcludedBy names the invalid
	// HyperNode (itself or an ancestor) that excludes it.
	Excluded   bool            `json:"excluded,omitempty"`
	ExcludedBy string          `json:"excludedBy,omitempty"`
	Problems   []ProblemReport `json:"problems,omitempty"`
	// Source is the discovery source that owns the HyperNode (its label
	// hypernode.dev/network-topology-source); empty for a hand-made one and the virtual root.
	Source string `json:"source,omitempty"`
	// Valid is false when the HyperNode has problems of its own: the Valid condition that
	// hypernode-controller writes, computed here by the same validator (nil for the root).
	Valid *bool `json:"valid,omitempty"`
	// Status is what hypernode-controller last wrote into the HyperNode's status (nil when
	// it has written nothing, e.g. it does not run).
	Status *StatusReport `json:"status,omitempty"`
	// NodeNames are the nodes of a leaf.
	NodeNames []string          `json:"nodeNames,omitempty"`
	Children  []HyperNodeReport `json:"children,omitempty"`
}

// StatusReport is a HyperNode's status as hypernode-controller wrote it.
type StatusReport struct {
	NodeCount int64 `json:"nodeCount"`
	// Valid and Reason are the status and reason of the Valid condition ("" without one).
	Valid  string `json:"valid,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// PodGroupCount is a PodGroup (namespace/name) and how many of its pods are bound below.
type PodGroupCount struct {
	PodGroup string `json:"podGroup"`
	Pods     int    `json:"pods"`
}

// ProblemReport is one validation problem of a HyperNode (pkg/hypernode).
type ProblemReport struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Excludes is true when the problem takes the HyperNode and its subtree out of placement.
	Excludes bool `json:"excludes"`
}

// Tree reports the HyperNode tree. Excluded HyperNodes are shown where their spec puts them
// (under the one HyperNode that lists them, else at the top), so that a broken subtree is
// seen in place with its reason.
func (c *Cluster) Tree(res v1.ResourceName) TreeReport {
	if res == "" {
		res = c.DefaultResource()
	}
	children := c.displayChildren()
	holds := map[string][]HoldReport{}
	for _, h := range c.holds() {
		domain := h.Domain
		if domain == "" {
			domain = hypernode.VirtualRootName
		}
		holds[domain] = append(holds[domain], h)
	}
	objects := make(map[string]*topologyv1alpha1.HyperNode, len(c.HyperNodes))
	for _, hn := range c.HyperNodes {
		objects[hn.Name] = hn
	}
	visited := sets.New[string]()
	var build func(name string) HyperNodeReport
	build = func(name string) HyperNodeReport {
		visited.Insert(name)
		info, _ := c.snap.HyperNode(name)
		r := HyperNodeReport{Name: name, Tier: info.Tier, TierName: info.TierName, Leaf: info.Leaf,
			Excluded: info.Excluded, ExcludedBy: info.ExcludedBy, Valid: ptr.To(len(info.Problems) == 0)}
		if obj := objects[name]; obj != nil {
			r.Source = obj.Labels[source.Label]
			r.Status = statusReport(obj.Status)
		}
		for _, p := range info.Problems {
			r.Problems = append(r.Problems, ProblemReport{Reason: p.Reason, Message: p.Message, Excludes: p.Excludes})
		}
		for _, child := range children[name] {
			if !visited.Has(child) {
				r.Children = append(r.Children, build(child))
			}
		}
		var nodes []string
		switch {
		case info.Leaf && !info.Excluded:
			nodes = info.Nodes
		case info.Leaf:
			nodes = c.tree.SelectedNodes(name)
		case !info.Excluded:
			nodes = c.snap.Nodes(name)
		default:
			nodes = reportNodes(r.Children)
		}
		if info.Leaf {
			r.NodeNames = nodes
		}
		c.fillCapacity(&r, nodes, res)
		r.Holds = holds[name]
		return r
	}

	root := HyperNodeReport{Name: hypernode.VirtualRootName, Tier: c.snap.RootTier(), Virtual: true}
	for _, top := range children[hypernode.VirtualRootName] {
		root.Children = append(root.Children, build(top))
	}
	// HyperNodes on a membership cycle are reachable from no top: show them at the top.
	var rest []string
	c.snap.RangeHyperNodes(func(info *hypernode.HyperNodeInfo) bool {
		rest = append(rest, info.Name)
		return true
	})
	sort.Strings(rest)
	for _, name := range rest {
		if !visited.Has(name) {
			root.Children = append(root.Children, build(name))
		}
	}
	allNodes := make([]string, 0, len(c.Nodes))
	for _, n := range c.Nodes {
		allNodes = append(allNodes, n.Name)
	}
	sort.Strings(allNodes)
	c.fillCapacity(&root, allNodes, res)
	root.Holds = holds[hypernode.VirtualRootName]

	report := TreeReport{Resource: string(res), Root: root, Warnings: c.warningsFor(res)}
	selectedBy := map[string][]string{}
	c.snap.RangeHyperNodes(func(info *hypernode.HyperNodeInfo) bool {
		if info.Leaf && info.Excluded {
			for _, n := range c.tree.SelectedNodes(info.Name) {
				selectedBy[n] = append(selectedBy[n], info.Name)
			}
		}
		return true
	})
	for _, n := range allNodes {
		if _, ok := c.snap.LeafOf(n); ok {
			continue
		}
		if leaves := selectedBy[n]; len(leaves) > 0 {
			sort.Strings(leaves)
			report.NodesInExcludedHyperNodes = append(report.NodesInExcludedHyperNodes, NodeLeaves{Node: n, Leaves: leaves})
			continue
		}
		report.NodesInNoHyperNode = append(report.NodesInNoHyperNode, n)
	}
	return report
}

// holds returns the holds the PodGroups record, by PodGroup name; unreadable records are left
// out (Explain reports them).
func (c *Cluster) holds() []HoldReport {
	var out []HoldReport
	for _, pg := range c.PodGroups {
		if h := c.holdOf(pg.Namespace+"/"+pg.Name, pg.Annotations); h != nil {
			out = append(out, *h)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PodGroup < out[j].PodGroup })
	return out
}

// holdOf reads a PodGroup's hold record (nil without a usable one).
func (c *Cluster) holdOf(key string, annotations map[string]string) *HoldReport {
	r, err := podgroup.ParseHoldRecord(annotations)
	if err != nil || r == nil {
		return nil
	}
	return &HoldReport{PodGroup: key, Domain: r.Domain, Tier: r.Tier, Nodes: r.Nodes, Priority: r.Priority, Since: r.Since.UTC(),
		Age: duration.HumanDuration(c.Now.Sub(r.Since))}
}

// statusReport renders what hypernode-controller wrote (nil when it wrote nothing).
func statusReport(st topologyv1alpha1.HyperNodeStatus) *StatusReport {
	cond := meta.FindStatusCondition(st.Conditions, status.ConditionValid)
	if cond == nil && st.NodeCount == 0 {
		return nil
	}
	r := &StatusReport{NodeCount: st.NodeCount}
	if cond != nil {
		r.Valid, r.Reason = string(cond.Status), cond.Reason
	}
	return r
}

// displayChildren maps each HyperNode (and the virtual root) to the HyperNodes shown below it:
// its usable children, and the excluded HyperNodes that it alone lists as members.
func (c *Cluster) displayChildren() map[string][]string {
	out := map[string][]string{}
	c.snap.RangeHyperNodes(func(info *hypernode.HyperNodeInfo) bool {
		parent := info.Parent
		if info.Excluded {
			parent = hypernode.VirtualRootName
			if claimers := c.claimers[info.Name]; len(claimers) == 1 {
				if _, ok := c.snap.HyperNode(claimers[0]); ok {
					parent = claimers[0]
				}
			}
		}
		out[parent] = append(out[parent], info.Name)
		return true
	})
	for _, names := range out {
		sort.Strings(names)
	}
	return out
}

// reportNodes collects the leaf nodes of reports, sorted and without duplicates.
func reportNodes(reports []HyperNodeReport) []string {
	set := sets.New[string]()
	var walk func([]HyperNodeReport)
	walk = func(rs []HyperNodeReport) {
		for _, r := range rs {
			set.Insert(r.NodeNames...)
			walk(r.Children)
		}
	}
	walk(reports)
	return sets.List(set)
}

// fillCapacity sets the node counts, capacity and occupants of a report from its nodes.
func (c *Cluster) fillCapacity(r *HyperNodeReport, nodes []string, res v1.ResourceName) {
	r.Allocatable = *resource.NewQuantity(0, resource.DecimalSI)
	r.Free = *resource.NewQuantity(0, resource.DecimalSI)
	groups := map[string]int{}
	devices := map[string]DeviceCount{}
	for _, name := range nodes {
		n := c.nodes[name]
		if n == nil {
			continue
		}
		for class, count := range c.devices.Counts(name) {
			d := devices[class]
			d.Total += count.Total
			if n.unusable == "" {
				d.Free += count.Total - count.Used
			}
			devices[class] = d
		}
		r.Nodes++
		r.Allocatable.Add(n.node.Status.Allocatable[res])
		used, total := c.deviceAmount(name, res)
		r.Allocatable.Add(*resource.NewQuantity(total, resource.DecimalSI))
		if n.unusable == "" {
			r.UsableNodes++
			if total > 0 {
				// DRA devices stand for res here: free are those no claim holds.
				r.Free.Add(*resource.NewQuantity(total-used, resource.DecimalSI))
			} else {
				r.Free.Add(n.free(res))
			}
		}
		for _, p := range n.pods {
			if pg := podGroupOf(p); pg != "" {
				groups[pg]++
			}
		}
	}
	for _, pg := range sortedNames(groups) {
		r.PodGroups = append(r.PodGroups, PodGroupCount{PodGroup: pg, Pods: groups[pg]})
	}
	for _, class := range sortedNames(devices) {
		d := devices[class]
		d.Class = class
		r.Devices = append(r.Devices, d)
	}
}
