package ufm

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
)

// maxTiers bounds the tiers built above the leaves (real fabrics have three or four).
const maxTiers = 8

// Fabric is what the source keeps of a UFM answer: which leaf switches each host is cabled
// to, and which switches are cabled to each other.
type Fabric struct {
	// HostLeaves maps each host (a port's system_name) to its leaf switches, sorted.
	HostLeaves map[string][]string
	// Links maps each switch to the switches it is cabled to.
	Links map[string]sets.Set[string]
	// Ports counts the records of the answer, HostPorts those of hosts; Unlinked counts the
	// host ports without a peer switch (down, or cabled to another host).
	Ports, HostPorts, Unlinked int
}

// isHostPort reports whether a port record belongs to a host: UFM describes host ports as
// "Computer IB Port" (the test Volcano uses).
func isHostPort(p Port) bool { return strings.Contains(p.Description, "Computer") }

// NewFabric reads the host and switch links out of port records. An answer without a single
// host port is empty: it describes no topology, so it must not replace a good one.
func NewFabric(ports []Port) (*Fabric, error) {
	f := &Fabric{HostLeaves: map[string][]string{}, Links: map[string]sets.Set[string]{}, Ports: len(ports)}
	// Host names, compared ignoring case: a switch port toward a host is not a switch link,
	// however the two records spell the host.
	hosts := sets.New[string]()
	for _, p := range ports {
		if isHostPort(p) && p.SystemName != "" {
			hosts.Insert(strings.ToLower(p.SystemName))
		}
	}
	isHost := func(name string) bool { return hosts.Has(strings.ToLower(name)) }
	leaves := map[string]sets.Set[string]{}
	for _, p := range ports {
		switch {
		case isHostPort(p):
			f.HostPorts++
			if p.SystemName == "" || p.PeerNodeName == "" || isHost(p.PeerNodeName) {
				f.Unlinked++
				continue
			}
			if leaves[p.SystemName] == nil {
				leaves[p.SystemName] = sets.New[string]()
			}
			leaves[p.SystemName].Insert(p.PeerNodeName)
		case p.SystemName != "" && p.PeerNodeName != "" && p.SystemName != p.PeerNodeName &&
			!isHost(p.SystemName) && !isHost(p.PeerNodeName):
			// A switch-to-switch link (both ends report it; a set keeps one).
			f.link(p.SystemName, p.PeerNodeName)
			f.link(p.PeerNodeName, p.SystemName)
		}
	}
	for h, l := range leaves {
		f.HostLeaves[h] = sets.List(l)
	}
	if len(f.HostLeaves) == 0 {
		return nil, source.Errorf(ReasonEmpty, "the answer has %d ports but no host port linked to a switch (a port whose description contains \"Computer\")", len(ports))
	}
	return f, nil
}

func (f *Fabric) link(a, b string) {
	if f.Links[a] == nil {
		f.Links[a] = sets.New[string]()
	}
	f.Links[a].Insert(b)
}

// group is a set of hosts under a set of switches: a leaf group, then the groups above it.
type group struct {
	// hn is its HyperNode ("" when no node of the cluster is below it).
	hn string
	// frontier are its switches at the highest level reached so far.
	frontier []string
}

// tierName names the tiers built from UFM.
func tierName(tier int) string {
	switch tier {
	case 1:
		return "leaf"
	case 2:
		return "spine"
	case 3:
		return "core"
	}
	return fmt.Sprintf("tier-%d", tier)
}

// HyperNodes builds the HyperNodes of the fabric for the hosts that nodeOf maps to a node.
//
// Tier 1: hosts that share leaf switches form one leaf HyperNode (a host cabled to 8 rails
// joins its 8 leaf switches into one group). Above, level by level, the switch-to-switch links
// decide: groups whose switches reach a common switch of the next level form one HyperNode of
// the next tier (leaf groups under the same spines, then spine groups under the same cores).
// A group that shares its next level with no other group keeps going up alone, without a
// HyperNode of its own, so there are no one-child parents; a group whose switches reach no
// new switch is a top. An answer without switch-to-switch ports gets one tier-2 HyperNode
// over every leaf group, as Volcano builds it.
func (f *Fabric) HyperNodes(nodeOf func(host string) (string, bool)) []*topologyv1alpha1.HyperNode {
	// Leaf groups: connected components of leaf switches joined by the hosts they share.
	uf := newUnionFind()
	for _, leaves := range f.HostLeaves {
		for _, l := range leaves {
			uf.union(leaves[0], l)
		}
	}
	members := map[string]sets.Set[string]{} // component root -> leaf switches
	hosts := map[string][]string{}           // component root -> hosts
	for _, h := range sortedKeys(f.HostLeaves) {
		root := uf.find(f.HostLeaves[h][0])
		if members[root] == nil {
			members[root] = sets.New[string]()
		}
		members[root].Insert(f.HostLeaves[h]...)
		hosts[root] = append(hosts[root], h)
	}
	var out []*topologyv1alpha1.HyperNode
	var groups []*group
	consumed := sets.New[string]()
	for _, root := range sortedByMin(members) {
		leaves := sets.List(members[root])
		consumed.Insert(leaves...)
		g := &group{frontier: leaves}
		nodes := sets.New[string]()
		for _, h := range hosts[root] {
			if n, ok := nodeOf(h); ok {
				nodes.Insert(n)
			}
		}
		if nodes.Len() > 0 {
			hn := newHyperNode(1, leaves)
			for _, n := range sets.List(nodes) {
				hn.Spec.Members = append(hn.Spec.Members, member(topologyv1alpha1.MemberTypeNode, n))
			}
			out = append(out, hn)
			g.hn = hn.Name
		}
		groups = append(groups, g)
	}

	if len(f.Links) == 0 {
		// No switch-to-switch ports in the answer: one fabric above the leaf groups, as
		// Volcano builds it.
		var children []string
		for _, g := range groups {
			if g.hn != "" {
				children = append(children, g.hn)
			}
		}
		if len(children) > 1 {
			hn := newHyperNode(2, []string{"all"})
			hn.Annotations[source.PathAnnotation] = "ufm: every leaf group (the answer has no switch-to-switch ports)"
			for _, c := range children {
				hn.Spec.Members = append(hn.Spec.Members, member(topologyv1alpha1.MemberTypeHyperNode, c))
			}
			out = append(out, hn)
		}
		groups = nil
	}
	for tier := 2; tier <= maxTiers+1 && len(groups) > 0; tier++ {
		ups := make([]sets.Set[string], len(groups))
		owner := map[string]int{}
		guf := newUnionFind()
		found := false
		for i, g := range groups {
			ups[i] = sets.New[string]()
			guf.find(fmt.Sprint(i))
			for _, s := range g.frontier {
				for n := range f.Links[s] {
					if consumed.Has(n) {
						continue
					}
					found = true
					ups[i].Insert(n)
					if o, ok := owner[n]; ok {
						guf.union(fmt.Sprint(o), fmt.Sprint(i))
					} else {
						owner[n] = i
					}
				}
			}
		}
		if !found {
			break
		}
		for s := range owner {
			consumed.Insert(s)
		}
		components := map[string][]int{}
		for i := range groups {
			root := guf.find(fmt.Sprint(i))
			components[root] = append(components[root], i)
		}
		var roots []string
		for r := range components {
			roots = append(roots, r)
		}
		sort.Slice(roots, func(a, b int) bool { return components[roots[a]][0] < components[roots[b]][0] })
		var next []*group
		for _, r := range roots {
			comp := components[r]
			if len(comp) == 1 {
				g := groups[comp[0]]
				g.frontier = sets.List(ups[comp[0]])
				next = append(next, g)
				continue
			}
			switches := sets.New[string]()
			var children []string
			for _, i := range comp {
				switches = switches.Union(ups[i])
				if groups[i].hn != "" {
					children = append(children, groups[i].hn)
				}
			}
			g := &group{frontier: sets.List(switches)}
			if len(children) > 0 {
				hn := newHyperNode(tier, g.frontier)
				sort.Strings(children)
				for _, c := range children {
					hn.Spec.Members = append(hn.Spec.Members, member(topologyv1alpha1.MemberTypeHyperNode, c))
				}
				out = append(out, hn)
				g.hn = hn.Name
			}
			next = append(next, g)
		}
		groups = next
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// newHyperNode returns a HyperNode of a tier named after the first of its switches (sorted):
// groups of one tier never share a switch, so the name is unique, and it stays the same
// while that switch is in the group.
func newHyperNode(tier int, switches []string) *topologyv1alpha1.HyperNode {
	shown := switches
	more := ""
	if len(shown) > 8 {
		shown, more = shown[:8], fmt.Sprintf(" (+%d more)", len(switches)-8)
	}
	return &topologyv1alpha1.HyperNode{
		ObjectMeta: metav1.ObjectMeta{
			Name:        source.Name("ufm-"+tierName(tier), switches[0]),
			Annotations: map[string]string{source.PathAnnotation: "ufm " + tierName(tier) + " switches: " + strings.Join(shown, ",") + more},
		},
		Spec: topologyv1alpha1.HyperNodeSpec{Tier: tier, TierName: tierName(tier)},
	}
}

func member(t topologyv1alpha1.MemberType, name string) topologyv1alpha1.MemberSpec {
	return topologyv1alpha1.MemberSpec{Type: t, Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: name}}}
}

type unionFind struct{ parent map[string]string }

func newUnionFind() *unionFind { return &unionFind{parent: map[string]string{}} }

func (u *unionFind) find(x string) string {
	p, ok := u.parent[x]
	if !ok {
		u.parent[x] = x
		return x
	}
	if p == x {
		return x
	}
	root := u.find(p)
	u.parent[x] = root
	return root
}

func (u *unionFind) union(a, b string) {
	ra, rb := u.find(a), u.find(b)
	if ra != rb {
		// The smaller name is the root: deterministic, whatever the order of the unions.
		if rb < ra {
			ra, rb = rb, ra
		}
		u.parent[rb] = ra
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// sortedByMin orders component roots by their smallest member.
func sortedByMin(m map[string]sets.Set[string]) []string {
	roots := sortedKeys(m)
	mins := map[string]string{}
	for _, r := range roots {
		mins[r] = slices.Min(sets.List(m[r]))
	}
	sort.Slice(roots, func(i, j int) bool { return mins[roots[i]] < mins[roots[j]] })
	return roots
}
