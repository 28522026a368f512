package hypernode

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/labels"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

func TestSeed001Tree(t *testing.T) {
	s := Build(nodes("node", 8), seed001()).Snapshot()
	wantCandidates := map[int][]string{1: {"s0", "s1", "s2", "s3"}, 2: {"s4", "s5"}, 3: {"s6"}}
	if diff := cmp.Diff(wantCandidates, viewOf(s).Candidates); diff != "" {
		t.Errorf("candidates (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1, 2, 3}, s.Tiers()); diff != "" {
		t.Errorf("tiers (-want,+got):\n%s", diff)
	}
	if got := s.RootTier(); got != 4 {
		t.Errorf("root tier = %d, want 4", got)
	}
	root := s.Root()
	if diff := cmp.Diff(&HyperNodeInfo{Name: VirtualRootName, Tier: 4, Children: []string{"s6"}, NodeCount: 8}, root); diff != "" {
		t.Errorf("root (-want,+got):\n%s", diff)
	}
	s4, _ := s.HyperNode("s4")
	if diff := cmp.Diff(&HyperNodeInfo{Name: "s4", Tier: 2, Parent: "s6", Children: []string{"s0", "s1"}, NodeCount: 4, TotalNodeCount: 4, Depth: 2}, s4); diff != "" {
		t.Errorf("s4 (-want,+got):\n%s", diff)
	}
	s2, _ := s.HyperNode("s2")
	if diff := cmp.Diff(&HyperNodeInfo{Name: "s2", Tier: 1, Leaf: true, Parent: "s5", Nodes: []string{"node-4", "node-5"}, NodeCount: 2, TotalNodeCount: 2, Depth: 3}, s2); diff != "" {
		t.Errorf("s2 (-want,+got):\n%s", diff)
	}
	for node, leaf := range map[string]string{"node-0": "s0", "node-3": "s1", "node-4": "s2", "node-7": "s3"} {
		if got, ok := s.LeafOf(node); !ok || got != leaf {
			t.Errorf("LeafOf(%s) = %q, %v; want %q", node, got, ok, leaf)
		}
	}
	lcas := []struct{ a, b, want string }{
		{"s0", "s0", "s0"}, {"s0", "s1", "s4"}, {"s0", "s2", "s6"}, {"s1", "s4", "s4"},
		{"s3", "s6", "s6"}, {"s2", VirtualRootName, VirtualRootName},
	}
	for _, c := range lcas {
		if got, ok := s.LCA(c.a, c.b); !ok || got != c.want {
			t.Errorf("LCA(%s, %s) = %q, %v; want %q", c.a, c.b, got, ok, c.want)
		}
	}
	if diff := cmp.Diff([]string{"s4", "s6", VirtualRootName}, s.Ancestors("s0")); diff != "" {
		t.Errorf("ancestors of s0 (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"s0", "s1", "s2", "s3"}, s.Leaves(VirtualRootName)); diff != "" {
		t.Errorf("leaves (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"node-4", "node-5", "node-6", "node-7"}, s.Nodes("s5")); diff != "" {
		t.Errorf("nodes of s5 (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string][]Problem{}, s.Problems()); diff != "" {
		t.Errorf("problems (-want,+got):\n%s", diff)
	}
}

// TestSeed000Tree is the spine/tor/rack tree of seed 000, written with regex and label
// selectors and tier names.
func TestSeed000Tree(t *testing.T) {
	n := nodes("node", 8)
	for i, rack := range []string{"rack-2", "rack-2", "rack-3", "rack-3"} {
		n[[]string{"node-4", "node-5", "node-6", "node-7"}[i]] = labels.Set{"example.com/rack": rack}
	}
	hyperNodes := []*topologyv1alpha1.HyperNode{
		hntesting.MakeHyperNode("rack-0").Tier(1).TierName("rack").NodeRegex("^node-[01]$").Obj(),
		hntesting.MakeHyperNode("rack-1").Tier(1).TierName("rack").NodeRegex("^node-[23]$").Obj(),
		hntesting.MakeHyperNode("rack-2").Tier(1).TierName("rack").NodeLabels(map[string]string{"example.com/rack": "rack-2"}).Obj(),
		hntesting.MakeHyperNode("rack-3").Tier(1).TierName("rack").NodeLabels(map[string]string{"example.com/rack": "rack-3"}).Obj(),
		hntesting.MakeHyperNode("tor-0").Tier(2).TierName("tor").Children("rack-0", "rack-1").Obj(),
		hntesting.MakeHyperNode("tor-1").Tier(2).TierName("tor").Children("rack-2", "rack-3").Obj(),
		hntesting.MakeHyperNode("spine-0").Tier(3).TierName("spine").Children("tor-0", "tor-1").Obj(),
	}
	s := Build(n, hyperNodes).Snapshot()
	want := map[string][]string{"rack-0": {"node-0", "node-1"}, "rack-1": {"node-2", "node-3"}, "rack-2": {"node-4", "node-5"}, "rack-3": {"node-6", "node-7"}}
	for leaf, nodes := range want {
		info, _ := s.HyperNode(leaf)
		if diff := cmp.Diff(nodes, info.Nodes); diff != "" {
			t.Errorf("nodes of %s (-want,+got):\n%s", leaf, diff)
		}
	}
	for name, tier := range map[string]int{"rack": 1, "tor": 2, "spine": 3} {
		if got, err := s.TierByName(name); err != nil || got != tier {
			t.Errorf("TierByName(%s) = %d, %v; want %d", name, got, err, tier)
		}
	}
	if _, err := s.TierByName("core"); err == nil || err.Error() != `no HyperNode has tierName "core" (known tierNames: rack, spine, tor)` {
		t.Errorf("TierByName(core) error = %v", err)
	}
	if got, _ := s.LCA("rack-1", "rack-2"); got != "spine-0" {
		t.Errorf("LCA(rack-1, rack-2) = %s, want spine-0", got)
	}
	spine, _ := s.HyperNode("spine-0")
	if spine.NodeCount != 8 || spine.Parent != VirtualRootName {
		t.Errorf("spine-0 = %+v", spine)
	}
}

// TestMixedDepthTree has an NVLink tier under one ToR only: tor-a holds nodes directly at
// tier 2 while tor-b holds two tier-1 NVLink domains.
func TestMixedDepthTree(t *testing.T) {
	n := nodes("a", 4)
	for k, v := range nodes("b", 4) {
		n[k] = v
	}
	s := Build(n, []*topologyv1alpha1.HyperNode{
		hntesting.MakeHyperNode("tor-a").Tier(2).TierName("tor").NodeRegex("^a-").Obj(),
		hntesting.MakeHyperNode("nvl-0").Tier(1).TierName("nvlink").Nodes("b-0", "b-1").Obj(),
		hntesting.MakeHyperNode("nvl-1").Tier(1).TierName("nvlink").Nodes("b-2", "b-3").Obj(),
		hntesting.MakeHyperNode("tor-b").Tier(2).TierName("tor").Children("nvl-0", "nvl-1").Obj(),
		hntesting.MakeHyperNode("spine").Tier(3).TierName("spine").Children("tor-a", "tor-b").Obj(),
	}).Snapshot()
	if diff := cmp.Diff(map[int][]string{1: {"nvl-0", "nvl-1"}, 2: {"tor-a", "tor-b"}, 3: {"spine"}}, viewOf(s).Candidates); diff != "" {
		t.Errorf("candidates (-want,+got):\n%s", diff)
	}
	for _, c := range []struct{ a, b, want string }{{"tor-a", "nvl-0", "spine"}, {"nvl-0", "nvl-1", "tor-b"}, {"nvl-1", "tor-b", "tor-b"}} {
		if got, _ := s.LCA(c.a, c.b); got != c.want {
			t.Errorf("LCA(%s, %s) = %s, want %s", c.a, c.b, got, c.want)
		}
	}
	if leaf, _ := s.LeafOf("a-2"); leaf != "tor-a" {
		t.Errorf("LeafOf(a-2) = %s, want tor-a", leaf)
	}
	if leaf, _ := s.LeafOf("b-3"); leaf != "nvl-1" {
		t.Errorf("LeafOf(b-3) = %s, want nvl-1", leaf)
	}
	if diff := cmp.Diff([]string{"tor-a", "nvl-0", "nvl-1"}, s.Leaves(VirtualRootName)); diff != "" {
		t.Errorf("leaves in tree order (-want,+got):\n%s", diff)
	}
	torA, _ := s.HyperNode("tor-a")
	nvl0, _ := s.HyperNode("nvl-0")
	if torA.Depth != 2 || nvl0.Depth != 3 {
		t.Errorf("depths: tor-a %d (want 2), nvl-0 %d (want 3)", torA.Depth, nvl0.Depth)
	}
}

func TestNoHyperNodes(t *testing.T) {
	s := Build(nodes("node", 3), nil).Snapshot()
	if s.RootTier() != 1 || s.NodeCount() != 3 || len(s.Tiers()) != 0 || len(s.Candidates(1)) != 0 {
		t.Errorf("root tier %d, node count %d, tiers %v", s.RootTier(), s.NodeCount(), s.Tiers())
	}
	if _, ok := s.LeafOf("node-0"); ok {
		t.Error("a node has a leaf without HyperNodes")
	}
}

func TestSelectorSemantics(t *testing.T) {
	n := map[string]labels.Set{
		"node-1": {}, "node-10": {}, "xnode-1": {}, "node-2": {"rack": "r1"}, "other": {"rack": "r1", "zone": "z"},
	}
	s := Build(n, []*topologyv1alpha1.HyperNode{
		// Volcano's regex semantics are unanchored: "node-1" matches inside longer names.
		hntesting.MakeHyperNode("unanchored").Tier(1).NodeRegex("node-1").Obj(),
		hntesting.MakeHyperNode("labels").Tier(1).NodeLabels(map[string]string{"rack": "r1"}).Obj(),
		// An empty label selector matches nothing rather than everything.
		hntesting.MakeHyperNode("empty-labels").Tier(1).NodeLabels(nil).Obj(),
	}).Snapshot()
	got := map[string][]string{}
	for _, name := range []string{"unanchored", "labels", "empty-labels"} {
		info, _ := s.HyperNode(name)
		got[name] = info.Nodes
	}
	want := map[string][]string{
		"unanchored":   {"node-1", "node-10", "xnode-1"},
		"labels":       {"node-2", "other"},
		"empty-labels": nil,
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("selected nodes (-want,+got):\n%s", diff)
	}
	// ... and says so on the HyperNode, without excluding it.
	wantProblems := map[string][]Problem{"empty-labels": {{Reason: ReasonInvalidMember, Message: "member 0: labelMatch is empty and selects no node"}}}
	if diff := cmp.Diff(wantProblems, s.Problems()); diff != "" {
		t.Errorf("problems (-want,+got):\n%s", diff)
	}
	if info, _ := s.HyperNode("empty-labels"); info.Excluded {
		t.Error("the HyperNode with an empty labelMatch is excluded")
	}
}

// TestValidation adds one defect to the seed 001 tree (plus, where needed, objects of its
// own) and checks the exact problems, what is excluded, and that the rest keeps working.
func TestValidation(t *testing.T) {
	replace := func(hns []*topologyv1alpha1.HyperNode, repl ...*topologyv1alpha1.HyperNode) []*topologyv1alpha1.HyperNode {
		out := []*topologyv1alpha1.HyperNode{}
		byName := map[string]*topologyv1alpha1.HyperNode{}
		for _, r := range repl {
			byName[r.Name] = r
		}
		for _, h := range hns {
			if r, ok := byName[h.Name]; ok {
				out = append(out, r)
				delete(byName, h.Name)
				continue
			}
			out = append(out, h)
		}
		for _, r := range repl {
			if _, ok := byName[r.Name]; ok {
				out = append(out, r)
			}
		}
		return out
	}
	excl := func(reason, msg string) Problem { return Problem{Reason: reason, Message: msg, Excludes: true} }
	info := func(reason, msg string) Problem { return Problem{Reason: reason, Message: msg} }
	tests := []struct {
		name       string
		hyperNodes []*topologyv1alpha1.HyperNode
		nodes      map[string]labels.Set
		// wantProblems lists every HyperNode with problems.
		wantProblems map[string][]Problem
		// wantExcluded maps each excluded HyperNode to the invalid HyperNode that excludes it.
		wantExcluded   map[string]string
		wantCandidates map[int][]string
		wantNodeCounts map[string]int
	}{
		{
			name: "cycle in a separate subtree",
			hyperNodes: append(seed001(),
				hntesting.MakeHyperNode("x0").Tier(1).Nodes("node-8").Obj(),
				hntesting.MakeHyperNode("x1").Tier(2).Children("x0", "x2").Obj(),
				hntesting.MakeHyperNode("x2").Tier(3).Children("x1").Obj(),
			),
			wantProblems: map[string][]Problem{
				"x1": {
					excl(ReasonCycle, "it is on a membership cycle of HyperNodes x1, x2"),
					excl(ReasonTierOrder, "its tier 2 is not greater than the tier 3 of its member x2"),
				},
				"x2": {
					excl(ReasonCycle, "it is on a membership cycle of HyperNodes x1, x2"),
					info(ReasonTierOrder, "its parent x1 has tier 2, not greater than its own tier 3; x1 and everything below it are excluded"),
				},
			},
			wantExcluded:   map[string]string{"x0": "x1", "x1": "x1", "x2": "x2"},
			wantCandidates: map[int][]string{1: {"s0", "s1", "s2", "s3"}, 2: {"s4", "s5"}, 3: {"s6"}},
			wantNodeCounts: map[string]int{"s6": 8},
		},
		{
			// Volcano's API allows a HyperNode without members: it holds no node and is no
			// problem.
			name:           "a HyperNode without members",
			hyperNodes:     append(seed001(), hntesting.MakeHyperNode("empty").Tier(1).Obj()),
			wantProblems:   map[string][]Problem{},
			wantCandidates: map[int][]string{1: {"empty", "s0", "s1", "s2", "s3"}, 2: {"s4", "s5"}, 3: {"s6"}},
			wantNodeCounts: map[string]int{"empty": 0, "s6": 8},
		},
		{
			name:       "a HyperNode claimed by two parents",
			hyperNodes: append(seed001(), hntesting.MakeHyperNode("s7").Tier(2).Children("s3").Obj()),
			wantProblems: map[string][]Problem{
				"s3": {excl(ReasonMultipleParents, "it is a member of 2 HyperNodes (s5, s7); a HyperNode can have only one parent")},
				"s5": {info(ReasonMultipleParents, "its member s3 is also a member of s7; s3 is excluded until it has one parent")},
				"s7": {info(ReasonMultipleParents, "its member s3 is also a member of s5; s3 is excluded until it has one parent")},
			},
			wantExcluded:   map[string]string{"s3": "s3"},
			wantCandidates: map[int][]string{1: {"s0", "s1", "s2"}, 2: {"s4", "s5", "s7"}, 3: {"s6"}},
			wantNodeCounts: map[string]int{"s5": 2, "s6": 6, "s7": 0},
		},
		{
			name:       "mixed member types",
			hyperNodes: replace(seed001(), hntesting.MakeHyperNode("s3").Tier(1).Nodes("node-6", "node-7").Children("s9").Obj()),
			wantProblems: map[string][]Problem{
				"s3": {
					info(ReasonMissingMember, "member HyperNode(s) s9 do not exist; placement uses the members that exist"),
					excl(ReasonMixedMembers, "it has both Node and HyperNode members; a HyperNode holds either nodes (a leaf) or HyperNodes (a parent)"),
				},
			},
			wantExcluded:   map[string]string{"s3": "s3"},
			wantCandidates: map[int][]string{1: {"s0", "s1", "s2"}, 2: {"s4", "s5"}, 3: {"s6"}},
			wantNodeCounts: map[string]int{"s5": 2, "s6": 6},
		},
		{
			name: "regexMatch on a HyperNode member",
			hyperNodes: replace(seed001(), func() *topologyv1alpha1.HyperNode {
				m := hntesting.RegexNodeMember("^s[23]$")
				m.Type = topologyv1alpha1.MemberTypeHyperNode
				return hntesting.MakeHyperNode("s5").Tier(2).Members(m).Obj()
			}()),
			wantProblems: map[string][]Problem{
				"s5": {excl(ReasonInvalidMember, "member 0 is of type HyperNode but uses regexMatch; HyperNode members must use exactMatch")},
			},
			wantExcluded: map[string]string{"s5": "s5"},
			// s2 and s3 lose their parent: they stay usable as top-level leaves.
			wantCandidates: map[int][]string{1: {"s0", "s1", "s2", "s3"}, 2: {"s4"}, 3: {"s6"}},
			wantNodeCounts: map[string]int{"s6": 4},
		},
		{
			name: "labelMatch on a HyperNode member",
			hyperNodes: replace(seed001(), func() *topologyv1alpha1.HyperNode {
				m := hntesting.LabelNodeMember(map[string]string{"spine": "s5"})
				m.Type = topologyv1alpha1.MemberTypeHyperNode
				return hntesting.MakeHyperNode("s5").Tier(2).Members(m).Obj()
			}()),
			wantProblems: map[string][]Problem{
				"s5": {excl(ReasonInvalidMember, "member 0 is of type HyperNode but uses labelMatch; HyperNode members must use exactMatch")},
			},
			wantExcluded:   map[string]string{"s5": "s5"},
			wantCandidates: map[int][]string{1: {"s0", "s1", "s2", "s3"}, 2: {"s4"}, 3: {"s6"}},
			wantNodeCounts: map[string]int{"s6": 4},
		},
		{
			name:       "a HyperNode that contains itself",
			hyperNodes: append(seed001(), hntesting.MakeHyperNode("loop").Tier(2).Children("loop").Obj()),
			wantProblems: map[string][]Problem{
				"loop": {
					excl(ReasonCycle, "it is on a membership cycle of HyperNodes loop"),
					info(ReasonTierOrder, "its parent loop has tier 2, not greater than its own tier 2; loop and everything below it are excluded"),
					excl(ReasonTierOrder, "its tier 2 is not greater than the tier 2 of its member loop"),
				},
			},
			wantExcluded:   map[string]string{"loop": "loop"},
			wantCandidates: map[int][]string{1: {"s0", "s1", "s2", "s3"}, 2: {"s4", "s5"}, 3: {"s6"}},
			wantNodeCounts: map[string]int{"s6": 8},
		},
		{
			name:       "parent tier not greater than a child's",
			hyperNodes: replace(seed001(), hntesting.MakeHyperNode("s5").Tier(1).Children("s2", "s3").Obj()),
			wantProblems: map[string][]Problem{
				"s5": {
					excl(ReasonTierOrder, "its tier 1 is not greater than the tier 1 of its member s2"),
					excl(ReasonTierOrder, "its tier 1 is not greater than the tier 1 of its member s3"),
				},
				"s2": {info(ReasonTierOrder, "its parent s5 has tier 1, not greater than its own tier 1; s5 and everything below it are excluded")},
				"s3": {info(ReasonTierOrder, "its parent s5 has tier 1, not greater than its own tier 1; s5 and everything below it are excluded")},
			},
			wantExcluded:   map[string]string{"s5": "s5", "s2": "s5", "s3": "s5"},
			wantCandidates: map[int][]string{1: {"s0", "s1"}, 2: {"s4"}, 3: {"s6"}},
			wantNodeCounts: map[string]int{"s6": 4},
		},
		{
			name:       "a node selected by two leaves",
			hyperNodes: replace(seed001(), hntesting.MakeHyperNode("s3").Tier(1).NodeRegex("^node-[5-7]$").Obj()),
			wantProblems: map[string][]Problem{
				"s2": {excl(ReasonNodeInMultipleLeaves, "1 of its nodes (node-5) are also selected by s3; a node can belong to one leaf only")},
				"s3": {excl(ReasonNodeInMultipleLeaves, "1 of its nodes (node-5) are also selected by s2; a node can belong to one leaf only")},
			},
			wantExcluded:   map[string]string{"s2": "s2", "s3": "s3"},
			wantCandidates: map[int][]string{1: {"s0", "s1"}, 2: {"s4", "s5"}, 3: {"s6"}},
			wantNodeCounts: map[string]int{"s5": 0, "s6": 4},
		},
		{
			name:       "a regular expression that does not compile",
			hyperNodes: replace(seed001(), hntesting.MakeHyperNode("s3").Tier(1).NodeRegex("node-[6-7").Obj()),
			wantProblems: map[string][]Problem{
				"s3": {excl(ReasonInvalidMember, "member 0: regexMatch pattern \"node-[6-7\" does not compile: error parsing regexp: missing closing ]: `[6-7`")},
			},
			wantExcluded:   map[string]string{"s3": "s3"},
			wantCandidates: map[int][]string{1: {"s0", "s1", "s2"}, 2: {"s4", "s5"}, 3: {"s6"}},
			wantNodeCounts: map[string]int{"s5": 2, "s6": 6},
		},
		{
			name: "a tierName used by two tiers",
			hyperNodes: replace(seed001(),
				hntesting.MakeHyperNode("s0").Tier(1).TierName("leaf").Nodes("node-0", "node-1").Obj(),
				hntesting.MakeHyperNode("s4").Tier(2).TierName("leaf").Children("s0", "s1").Obj(),
			),
			wantProblems: map[string][]Problem{
				"s0": {info(ReasonAmbiguousTierName, `its tierName "leaf" is also used by HyperNodes of tiers [1 2]; jobs cannot name that tier until every HyperNode of one tierName has the same tier`)},
				"s4": {info(ReasonAmbiguousTierName, `its tierName "leaf" is also used by HyperNodes of tiers [1 2]; jobs cannot name that tier until every HyperNode of one tierName has the same tier`)},
			},
			wantExcluded:   map[string]string{},
			wantCandidates: map[int][]string{1: {"s0", "s1", "s2", "s3"}, 2: {"s4", "s5"}, 3: {"s6"}},
			wantNodeCounts: map[string]int{"s6": 8},
		},
		{
			name:       "a member HyperNode that does not exist yet",
			hyperNodes: replace(seed001(), hntesting.MakeHyperNode("s6").Tier(3).Children("s4", "s5", "s9").Obj()),
			wantProblems: map[string][]Problem{
				"s6": {info(ReasonMissingMember, "member HyperNode(s) s9 do not exist; placement uses the members that exist")},
			},
			wantExcluded:   map[string]string{},
			wantCandidates: map[int][]string{1: {"s0", "s1", "s2", "s3"}, 2: {"s4", "s5"}, 3: {"s6"}},
			wantNodeCounts: map[string]int{"s6": 8},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.nodes
			if n == nil {
				n = nodes("node", 9)
			}
			s := Build(n, tc.hyperNodes).Snapshot()
			if diff := cmp.Diff(tc.wantProblems, s.Problems()); diff != "" {
				t.Errorf("problems (-want,+got):\n%s", diff)
			}
			gotExcluded := map[string]string{}
			s.RangeHyperNodes(func(i *HyperNodeInfo) bool {
				if i.Excluded {
					gotExcluded[i.Name] = i.ExcludedBy
				}
				return true
			})
			if diff := cmp.Diff(tc.wantExcluded, gotExcluded, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("excluded (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCandidates, viewOf(s).Candidates); diff != "" {
				t.Errorf("candidates (-want,+got):\n%s", diff)
			}
			for name, want := range tc.wantNodeCounts {
				if i, _ := s.HyperNode(name); i.NodeCount != want {
					t.Errorf("NodeCount(%s) = %d, want %d", name, i.NodeCount, want)
				}
			}
			// Excluded leaves give their nodes no leaf; everyone else's nodes keep theirs.
			for _, leaf := range []string{"s0", "s1", "s2", "s3"} {
				i, ok := s.HyperNode(leaf)
				if !ok {
					continue
				}
				for _, node := range i.Nodes {
					got, has := s.LeafOf(node)
					if i.Excluded && has && got == leaf {
						t.Errorf("node %s maps to excluded leaf %s", node, leaf)
					}
					if !i.Excluded && got != leaf {
						t.Errorf("LeafOf(%s) = %q, want %q", node, got, leaf)
					}
				}
			}
		})
	}
}

// TestFixRestoresSubtree breaks a subtree with a cycle and then fixes the object: the
// problems are reported and cleared, and the subtree comes back without a rebuild.
func TestFixRestoresSubtree(t *testing.T) {
	tree := Build(nodes("node", 8), seed001())
	changes := tree.SetHyperNode(hntesting.MakeHyperNode("s4").Tier(2).Children("s0", "s1", "s6").Obj())
	gotChanged := map[string][]string{}
	for _, c := range changes {
		for _, p := range c.Problems {
			gotChanged[c.HyperNode.Name] = append(gotChanged[c.HyperNode.Name], p.Reason)
		}
	}
	wantChanged := map[string][]string{"s4": {ReasonCycle, ReasonTierOrder}, "s6": {ReasonCycle, ReasonTierOrder}}
	if diff := cmp.Diff(wantChanged, gotChanged); diff != "" {
		t.Errorf("problem changes (-want,+got):\n%s", diff)
	}
	s := tree.Snapshot()
	if got := s.Candidates(1); len(got) != 0 {
		t.Errorf("tier 1 candidates under a cyclic root = %v, want none", got)
	}
	if _, ok := s.LeafOf("node-0"); ok {
		t.Error("node-0 still has a leaf under the cycle")
	}

	changes = tree.SetHyperNode(hntesting.MakeHyperNode("s4").Tier(2).Children("s0", "s1").Obj())
	cleared := map[string]int{}
	for _, c := range changes {
		cleared[c.HyperNode.Name] = len(c.Problems)
	}
	if diff := cmp.Diff(map[string]int{"s4": 0, "s6": 0}, cleared); diff != "" {
		t.Errorf("cleared problems (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(viewOf(Build(nodes("node", 8), seed001()).Snapshot()), viewOf(tree.Snapshot()), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("fixed tree differs from a fresh build (-want,+got):\n%s", diff)
	}
}

func TestSnapshotsAreImmutable(t *testing.T) {
	tree := Build(nodes("node", 8), seed001())
	before := tree.Snapshot()
	beforeView := viewOf(before)
	tree.DeleteNode("node-0")
	tree.SetHyperNode(hntesting.MakeHyperNode("s3").Tier(1).Nodes("node-6").Obj())
	tree.DeleteHyperNode("s5")
	if diff := cmp.Diff(beforeView, viewOf(before)); diff != "" {
		t.Errorf("an old snapshot changed (-before,+after):\n%s", diff)
	}
	if tree.Snapshot().Generation() <= before.Generation() {
		t.Error("generation did not increase")
	}
	// A status-only update publishes nothing.
	gen := tree.Snapshot().Generation()
	updated := hntesting.MakeHyperNode("s3").Tier(1).Nodes("node-6").Obj()
	updated.Status.NodeCount = 1
	if changes := tree.SetHyperNode(updated); changes != nil || tree.Snapshot().Generation() != gen {
		t.Errorf("a status update changed the tree: %v, generation %d -> %d", changes, gen, tree.Snapshot().Generation())
	}
}
