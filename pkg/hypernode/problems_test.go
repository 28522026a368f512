package hypernode

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

// TestExcludedByReason: an invalid HyperNode counts under its own problem's reason, the
// HyperNodes below it as AncestorExcluded; problems that exclude nothing are not counted.
func TestExcludedByReason(t *testing.T) {
	hyperNodes := seed001()
	for i, hn := range hyperNodes {
		if hn.Name == "s4" {
			// Its tier is not above its children's.
			hyperNodes[i] = hntesting.MakeHyperNode("s4").Tier(1).Children("s0", "s1").Obj()
		}
	}
	hyperNodes = append(hyperNodes,
		hntesting.MakeHyperNode("bad-regex").Tier(1).NodeRegex("node-[").Obj(),
		// An ambiguous tierName is reported but excludes nothing.
		hntesting.MakeHyperNode("named-a").Tier(1).TierName("rack").Nodes("ghost-0").Obj(),
		hntesting.MakeHyperNode("named-b").Tier(2).TierName("rack").Children("named-a").Obj())
	got := Build(nodes("node", 8), hyperNodes).Snapshot().ExcludedByReason()
	want := map[string]int{ReasonInvalidMember: 1, ReasonTierOrder: 1, ReasonAncestorExcluded: 2,
		ReasonMixedMembers: 0, ReasonCycle: 0, ReasonMultipleParents: 0, ReasonNodeInMultipleLeaves: 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("excluded HyperNodes by reason (-want +got):\n%s", diff)
	}
}
