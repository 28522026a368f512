package networktopology

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
)

// deviceFiguresShown is how many domains of each tier a refusal names with their free devices.
const deviceFiguresShown = 3

// deviceFigures says, for a gang whose members claim devices, how many devices of each
// class a member takes, how many the gang needs, and how many are free in the domains of
// each allowed tier that have the most ("" when the members claim none): members are counted
// by the allocator, but an admin reads devices.
func (p *NetworkTopologyAware) deviceFigures(tree *hypernode.Snapshot, pod *v1.Pod, need, maxTier int) string {
	d := p.deviceDemand(pod)
	if len(d.ByClass) == 0 || p.inventory == nil {
		return ""
	}
	var parts []string
	for _, class := range slices.Sorted(func(yield func(string) bool) {
		for c := range d.ByClass {
			if !yield(c) {
				return
			}
		}
	}) {
		perMember := d.ByClass[class]
		free := func(domain string) int64 {
			var n int64
			for _, node := range tree.Nodes(domain) {
				if c, ok := p.inventory.Counts(node)[class]; ok {
					n += c.Total - c.Used
				}
			}
			return n
		}
		var tiers []string
		for _, tier := range tree.Tiers() {
			if tier > maxTier {
				break
			}
			type domainFree struct {
				name string
				free int64
			}
			var domains []domainFree
			for _, name := range tree.Candidates(tier) {
				domains = append(domains, domainFree{name, free(name)})
			}
			slices.SortFunc(domains, func(a, b domainFree) int {
				return cmp.Or(cmp.Compare(b.free, a.free), cmp.Compare(a.name, b.name))
			})
			var shown []string
			for _, df := range domains[:min(len(domains), deviceFiguresShown)] {
				shown = append(shown, fmt.Sprintf("%s %d free", df.name, df.free))
			}
			if len(shown) > 0 {
				tiers = append(tiers, fmt.Sprintf("tier %d: %s", tier, strings.Join(shown, ", ")))
			}
		}
		parts = append(parts, fmt.Sprintf("%s devices: each member claims %d, %d members need %d; %s",
			class, perMember, need, perMember*int64(need), strings.Join(tiers, "; ")))
	}
	return strings.Join(parts, "; ")
}
