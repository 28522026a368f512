package hypernode

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
)

// parsedSpec is a HyperNode's spec, compiled once per object change.
type parsedSpec struct {
	tier     int
	tierName string
	// leaf is true when the HyperNode selects nodes (its members are of type Node).
	leaf bool
	// children are the names of the HyperNode members, in spec order, without duplicates.
	children []string
	// exactNodes are the node names selected by exactMatch.
	exactNodes []string
	// patterns select nodes by name (regexMatch) or by labels (labelMatch).
	patterns []nodePattern
	// problems are defects of this object alone (mixed member types, a selector that does
	// not compile, ...). Any of them makes the HyperNode invalid.
	problems []Problem
}

// nodePattern is a compiled regexMatch or labelMatch member.
type nodePattern struct {
	regex *regexp.Regexp
	// anchoredPrefix, when regex starts with ^ followed by literal text, is that text: only
	// names that start with it can match, which lets the tree index such leaves by prefix.
	anchoredPrefix string
	// requiredText is text every match contains (the literal text a match starts with): a
	// cheap filter, and the key that indexes unanchored patterns.
	requiredText string

	selector labels.Selector
	// indexLabel, when the selector requires one label to equal one value, is that pair;
	// only nodes that carry it can match, which lets the tree index such leaves by label.
	indexLabel *labelPair
}

type labelPair struct{ key, value string }

// matchesName reports whether a regex pattern matches the node name (Volcano's unanchored
// MatchString semantics).
func (p *nodePattern) matchesName(name string) bool {
	if p.regex == nil {
		return false
	}
	if p.anchoredPrefix != "" && !strings.HasPrefix(name, p.anchoredPrefix) {
		return false
	}
	if p.requiredText != "" && !strings.Contains(name, p.requiredText) {
		return false
	}
	return p.regex.MatchString(name)
}

func (p *nodePattern) matches(name string, nodeLabels labels.Set) bool {
	if p.regex != nil {
		return p.matchesName(name)
	}
	return p.selector != nil && p.selector.Matches(nodeLabels)
}

// parseSpec compiles a HyperNode's members. It never fails: defects become problems.
func parseSpec(hn *topologyv1alpha1.HyperNode) *parsedSpec {
	spec := &parsedSpec{tier: hn.Spec.Tier, tierName: hn.Spec.TierName}
	hasNode, hasHyperNode := false, false
	seenChild := map[string]bool{}
	seenNode := map[string]bool{}
	for i, m := range hn.Spec.Members {
		sel := m.Selector
		set := 0
		for _, present := range []bool{sel.ExactMatch != nil, sel.RegexMatch != nil, sel.LabelMatch != nil} {
			if present {
				set++
			}
		}
		if set != 1 {
			spec.problems = append(spec.problems, newProblem(ReasonInvalidMember,
				"member %d must set exactly one of exactMatch, regexMatch or labelMatch (it sets %d)", i, set))
			continue
		}
		switch m.Type {
		case topologyv1alpha1.MemberTypeHyperNode:
			hasHyperNode = true
			if sel.ExactMatch == nil {
				spec.problems = append(spec.problems, newProblem(ReasonInvalidMember,
					"member %d is of type HyperNode but uses %s; HyperNode members must use exactMatch", i, selectorKind(sel)))
				continue
			}
			if name := sel.ExactMatch.Name; !seenChild[name] {
				seenChild[name] = true
				spec.children = append(spec.children, name)
			}
		case topologyv1alpha1.MemberTypeNode:
			hasNode = true
			switch {
			case sel.ExactMatch != nil:
				if name := sel.ExactMatch.Name; !seenNode[name] {
					seenNode[name] = true
					spec.exactNodes = append(spec.exactNodes, name)
				}
			case sel.RegexMatch != nil:
				p, err := compileRegex(sel.RegexMatch.Pattern)
				if err != nil {
					spec.problems = append(spec.problems, newProblem(ReasonInvalidMember,
						"member %d: regexMatch pattern %q does not compile: %v", i, sel.RegexMatch.Pattern, err))
					continue
				}
				spec.patterns = append(spec.patterns, p)
			case sel.LabelMatch != nil:
				p, err := compileLabelSelector(sel.LabelMatch)
				if err != nil {
					spec.problems = append(spec.problems, newProblem(ReasonInvalidMember,
						"member %d: labelMatch is not a valid label selector: %v", i, err))
					continue
				}
				if len(sel.LabelMatch.MatchLabels) == 0 && len(sel.LabelMatch.MatchExpressions) == 0 {
					// Said, not excluded: the HyperNode works with its other members.
					warning := newProblem(ReasonInvalidMember, "member %d: labelMatch is empty and selects no node", i)
					warning.Excludes = false
					spec.problems = append(spec.problems, warning)
				}
				spec.patterns = append(spec.patterns, p)
			}
		default:
			spec.problems = append(spec.problems, newProblem(ReasonInvalidMember,
				"member %d has type %q; the type must be Node or HyperNode", i, m.Type))
		}
	}
	if hasNode && hasHyperNode {
		spec.problems = append(spec.problems, newProblem(ReasonMixedMembers,
			"it has both Node and HyperNode members; a HyperNode holds either nodes (a leaf) or HyperNodes (a parent)"))
	}
	spec.leaf = !hasHyperNode
	if hasHyperNode {
		spec.exactNodes, spec.patterns = nil, nil
	}
	return spec
}

func selectorKind(sel topologyv1alpha1.MemberSelector) string {
	switch {
	case sel.RegexMatch != nil:
		return "regexMatch"
	case sel.LabelMatch != nil:
		return "labelMatch"
	}
	return "exactMatch"
}

func compileRegex(pattern string) (nodePattern, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nodePattern{}, err
	}
	p := nodePattern{regex: re}
	p.requiredText, _ = re.LiteralPrefix()
	if parsed, err := syntax.Parse(pattern, syntax.Perl); err == nil {
		p.anchoredPrefix = literalAfterBeginText(parsed.Simplify())
	}
	return p, nil
}

// literalAfterBeginText returns the case-sensitive literal text that directly follows a
// leading ^ (begin of text), or "" when the pattern is not anchored that way.
func literalAfterBeginText(re *syntax.Regexp) string {
	if re.Op != syntax.OpConcat || len(re.Sub) < 2 || re.Sub[0].Op != syntax.OpBeginText {
		return ""
	}
	var b strings.Builder
	for _, sub := range re.Sub[1:] {
		if sub.Op != syntax.OpLiteral || sub.Flags&syntax.FoldCase != 0 {
			break
		}
		b.WriteString(string(sub.Rune))
	}
	return b.String()
}

func compileLabelSelector(ls *metav1.LabelSelector) (nodePattern, error) {
	// An empty selector matches nothing (as in Volcano): a leaf that forgot its labels must
	// not swallow the whole cluster.
	if len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0 {
		return nodePattern{selector: labels.Nothing()}, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nodePattern{}, err
	}
	p := nodePattern{selector: sel}
	// Index by the first matchLabels pair in key order: every match carries it.
	if len(ls.MatchLabels) > 0 {
		keys := make([]string, 0, len(ls.MatchLabels))
		for k := range ls.MatchLabels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		p.indexLabel = &labelPair{key: keys[0], value: ls.MatchLabels[keys[0]]}
	} else {
		for _, req := range ls.MatchExpressions {
			if req.Operator == metav1.LabelSelectorOpIn && len(req.Values) == 1 {
				p.indexLabel = &labelPair{key: req.Key, value: req.Values[0]}
				break
			}
		}
	}
	return p, nil
}

func (s *parsedSpec) String() string {
	return fmt.Sprintf("tier=%d leaf=%v children=%v exact=%v patterns=%d", s.tier, s.leaf, s.children, s.exactNodes, len(s.patterns))
}
