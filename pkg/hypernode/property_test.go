package hypernode

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

// randomWorld generates node and HyperNode objects from small name spaces, so that random
// specs collide: shared nodes, two parents, cycles, missing members and bad selectors happen
// often.
type randomWorld struct {
	r *rand.Rand
}

func (w randomWorld) nodeName() string { return fmt.Sprintf("n-%d", w.r.IntN(16)) }
func (w randomWorld) hnName() string   { return fmt.Sprintf("h%d", w.r.IntN(10)) }

func (w randomWorld) nodeLabels() labels.Set {
	l := labels.Set{}
	if w.r.IntN(3) > 0 {
		l["rack"] = fmt.Sprintf("r%d", w.r.IntN(4))
	}
	if w.r.IntN(2) == 0 {
		l["zone"] = fmt.Sprintf("z%d", w.r.IntN(2))
	}
	return l
}

func (w randomWorld) nodeMember() topologyv1alpha1.MemberSpec {
	switch w.r.IntN(11) {
	case 9:
		return hntesting.RegexNodeMember("(?i)N-1")
	case 10:
		return hntesting.RegexNodeMember(fmt.Sprintf("n-(%d|1%d)$", w.r.IntN(3), w.r.IntN(6)))
	case 0:
		return hntesting.RegexNodeMember(fmt.Sprintf("^n-%d", w.r.IntN(3)))
	case 1:
		return hntesting.RegexNodeMember(fmt.Sprintf("-%d$", w.r.IntN(6)))
	case 2:
		return hntesting.RegexNodeMember("([")
	case 3:
		return hntesting.LabelNodeMember(map[string]string{"rack": fmt.Sprintf("r%d", w.r.IntN(4))})
	case 4:
		return hntesting.LabelNodeMember(nil)
	case 5:
		m := hntesting.LabelNodeMember(nil)
		m.Selector.LabelMatch.MatchExpressions = append(m.Selector.LabelMatch.MatchExpressions,
			metav1LabelRequirement("zone", fmt.Sprintf("z%d", w.r.IntN(2))))
		return m
	default:
		return hntesting.NodeMember(w.nodeName())
	}
}

func (w randomWorld) hyperNode() *topologyv1alpha1.HyperNode {
	tierNames := []string{"", "", "leaf", "spine", "core"}
	name := w.hnName()
	tier := w.r.IntN(5)
	var members []topologyv1alpha1.MemberSpec
	count := 1 + w.r.IntN(4)
	leaf := w.r.IntN(2) == 0
	for range count {
		if leaf {
			members = append(members, w.nodeMember())
		} else {
			members = append(members, hntesting.ChildMember(w.hnName()))
		}
	}
	switch w.r.IntN(12) {
	case 0: // mixed member types
		members = append(members, hntesting.NodeMember(w.nodeName()), hntesting.ChildMember(w.hnName()))
	case 1: // a regex selector on a HyperNode member
		m := hntesting.RegexNodeMember("^h")
		m.Type = topologyv1alpha1.MemberTypeHyperNode
		members = append(members, m)
	}
	return hntesting.MakeHyperNode(name).Tier(tier).TierName(tierNames[w.r.IntN(len(tierNames))]).Members(members...).Obj()
}

// TestIncrementalEqualsRebuild applies random sequences of node and HyperNode events and
// checks after every event that the incrementally maintained snapshot equals a snapshot built
// from scratch from the same objects, problems included.
func TestIncrementalEqualsRebuild(t *testing.T) {
	const sequences, events = 400, 40
	for seq := range sequences {
		w := randomWorld{r: rand.New(rand.NewPCG(uint64(seq), 7))}
		tree := NewTree()
		currentNodes := map[string]labels.Set{}
		currentHNs := map[string]*topologyv1alpha1.HyperNode{}
		var history []string
		for ev := range events {
			switch w.r.IntN(6) {
			case 0, 1:
				n, l := w.nodeName(), w.nodeLabels()
				currentNodes[n] = l
				tree.SetNode(n, l)
				history = append(history, fmt.Sprintf("SetNode(%s, %v)", n, l))
			case 2:
				n := w.nodeName()
				delete(currentNodes, n)
				tree.DeleteNode(n)
				history = append(history, fmt.Sprintf("DeleteNode(%s)", n))
			case 3, 4:
				h := w.hyperNode()
				currentHNs[h.Name] = h
				tree.SetHyperNode(h)
				history = append(history, fmt.Sprintf("SetHyperNode(%s tier=%d tierName=%q members=%s)", h.Name, h.Spec.Tier, h.Spec.TierName, describeMembers(h)))
			case 5:
				n := w.hnName()
				delete(currentHNs, n)
				tree.DeleteHyperNode(n)
				history = append(history, fmt.Sprintf("DeleteHyperNode(%s)", n))
			}
			var hns []*topologyv1alpha1.HyperNode
			for _, h := range currentHNs {
				hns = append(hns, h)
			}
			want := viewOf(Build(currentNodes, hns).Snapshot())
			got := viewOf(tree.Snapshot())
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("sequence %d, event %d: incremental differs from rebuild (-rebuild,+incremental):\n%s\nevents:\n%s",
					seq, ev, diff, joinLines(history))
			}
			// Build shares the indexes with the incremental path; check what every leaf
			// selects against a brute-force evaluation of its selectors on every node.
			for name, st := range tree.hyperNodes {
				if !st.spec.leaf {
					continue
				}
				if diff := cmp.Diff(sets.List(bruteForceNodes(st.spec, currentNodes)), sets.List(st.nodes)); diff != "" {
					t.Fatalf("sequence %d, event %d: nodes of leaf %s (-brute force,+indexed):\n%s\nevents:\n%s", seq, ev, name, diff, joinLines(history))
				}
			}
		}
	}
}

// bruteForceNodes evaluates a leaf's selectors on every node, without any index or filter.
func bruteForceNodes(spec *parsedSpec, nodes map[string]labels.Set) sets.Set[string] {
	out := sets.New[string]()
	for n, l := range nodes {
		if slices.Contains(spec.exactNodes, n) {
			out.Insert(n)
			continue
		}
		for _, p := range spec.patterns {
			if (p.regex != nil && p.regex.MatchString(n)) || (p.selector != nil && p.selector.Matches(l)) {
				out.Insert(n)
				break
			}
		}
	}
	return out
}

func describeMembers(h *topologyv1alpha1.HyperNode) string {
	out := "["
	for i, m := range h.Spec.Members {
		if i > 0 {
			out += " "
		}
		s := m.Selector
		switch {
		case s.ExactMatch != nil:
			out += fmt.Sprintf("%s:exact=%s", m.Type, s.ExactMatch.Name)
		case s.RegexMatch != nil:
			out += fmt.Sprintf("%s:regex=%s", m.Type, s.RegexMatch.Pattern)
		case s.LabelMatch != nil:
			out += fmt.Sprintf("%s:labels=%v/%v", m.Type, s.LabelMatch.MatchLabels, s.LabelMatch.MatchExpressions)
		}
	}
	return out + "]"
}

func joinLines(lines []string) string {
	out := ""
	for _, l := range lines {
		out += "  " + l + "\n"
	}
	return out
}
