package hypernode

import (
	"fmt"
	"sort"
	"strings"
)

// Reasons of topology problems. They are the Event reasons on the HyperNodes involved.
const (
	// ReasonInvalidMember: a member's selector is malformed (several or no selectors, a
	// regular expression or label selector that does not compile, a selector kind that its
	// member type does not allow).
	ReasonInvalidMember = "InvalidMember"
	// ReasonMixedMembers: a HyperNode has both Node and HyperNode members.
	ReasonMixedMembers = "MixedMemberTypes"
	// ReasonCycle: HyperNodes contain each other.
	ReasonCycle = "Cycle"
	// ReasonMultipleParents: a HyperNode is a member of more than one HyperNode.
	ReasonMultipleParents = "MultipleParents"
	// ReasonTierOrder: a parent's tier is not greater than a child's.
	ReasonTierOrder = "TierOrder"
	// ReasonNodeInMultipleLeaves: a node is selected by more than one leaf HyperNode.
	ReasonNodeInMultipleLeaves = "NodeInMultipleLeaves"
	// ReasonMissingMember: a member HyperNode does not exist (yet). Informational: the parent
	// works with the members it has, since discovery creates objects in any order.
	ReasonMissingMember = "MissingMember"
	// ReasonAmbiguousTierName: one tierName is used by HyperNodes of different tiers, so jobs
	// cannot name that tier. Nothing is excluded from placement.
	ReasonAmbiguousTierName = "AmbiguousTierName"
)

// Problem is one defect of the HyperNode tree, as seen from one HyperNode involved in it.
type Problem struct {
	// Reason is one of the Reason* constants.
	Reason string
	// Message says, in words for a cluster admin, what is wrong and what the scheduler does
	// about it.
	Message string
	// Excludes is true when the problem takes this HyperNode and its subtree out of
	// topology placement.
	Excludes bool
}

func newProblem(reason, format string, args ...any) Problem {
	return Problem{Reason: reason, Message: fmt.Sprintf(format, args...), Excludes: true}
}

func (p Problem) String() string { return p.Reason + ": " + p.Message }

// excludedSuffix is appended to the message of an excluding problem.
const excludedSuffix = "; it and everything below it are excluded from topology placement"

// DescribeProblems joins a HyperNode's problems into one message, in the words of the
// scheduler's Events on it (the HyperNode controller writes it into the Valid condition).
func DescribeProblems(name string, problems []Problem) string {
	return describeProblems(name, problems)
}

// describeProblems joins problems into one message for an Event or a status condition.
func describeProblems(name string, problems []Problem) string {
	parts := make([]string, 0, len(problems))
	for _, p := range problems {
		msg := p.Message
		if p.Excludes {
			msg += excludedSuffix
		}
		parts = append(parts, msg)
	}
	return fmt.Sprintf("HyperNode %s: %s", name, strings.Join(parts, "; "))
}

// listNames renders at most max names, sorted, with a count of the rest.
func listNames(names []string, max int) string {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	if len(sorted) <= max {
		return strings.Join(sorted, ", ")
	}
	return fmt.Sprintf("%s (+%d more)", strings.Join(sorted[:max], ", "), len(sorted)-max)
}

func sortProblems(problems []Problem) {
	sort.SliceStable(problems, func(i, j int) bool {
		if problems[i].Reason != problems[j].Reason {
			return problems[i].Reason < problems[j].Reason
		}
		return problems[i].Message < problems[j].Message
	})
}

// ReasonAncestorExcluded is the exclusion reason of a HyperNode that is valid itself but lies
// below an excluded one (only in ExcludedByReason: it has no Event of its own).
const ReasonAncestorExcluded = "AncestorExcluded"

// ExcludedByReason counts the HyperNodes that placement does not use, by the reason of their
// first excluding problem, or ReasonAncestorExcluded. Every reason that can exclude is in the
// result, zero or not. It costs O(HyperNodes): it is meant for a metrics scrape.
func (s *Snapshot) ExcludedByReason() map[string]int {
	out := map[string]int{}
	for _, r := range []string{ReasonInvalidMember, ReasonMixedMembers, ReasonCycle, ReasonMultipleParents,
		ReasonTierOrder, ReasonNodeInMultipleLeaves, ReasonAncestorExcluded} {
		out[r] = 0
	}
	s.infos.Range(func(name string, info *HyperNodeInfo) bool {
		if !info.Excluded {
			return true
		}
		reason := ReasonAncestorExcluded
		for _, p := range info.Problems {
			if p.Excludes && info.ExcludedBy == name {
				reason = p.Reason
				break
			}
		}
		out[reason]++
		return true
	})
	return out
}
