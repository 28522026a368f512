package hypernode

import (
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/util/sets"
)

// closure returns dirty plus every ancestor of a dirty HyperNode in the raw membership graph
// (through every claim, valid or not). That is every HyperNode whose problems, children or
// node count can change: the events put the changed HyperNode's old and new children in
// dirty themselves, every member of a cycle through a dirty HyperNode is its ancestor, and
// descendants whose exclusion or depth changes are added by refresh as it finds them.
func (t *Tree) closure(dirty sets.Set[string]) sets.Set[string] {
	out := sets.New[string]()
	var up func(string)
	up = func(n string) {
		for p := range t.claims[n] {
			if !out.Has(p) {
				out.Insert(p)
				up(p)
			}
		}
	}
	for n := range dirty {
		out.Insert(n)
	}
	for n := range dirty {
		up(n)
	}
	return out
}

// cycles returns the HyperNodes of the given set that lie on a membership cycle, with the
// cycle they are on (Tarjan's strongly connected components over the members' edges).
func (t *Tree) cycles(within sets.Set[string]) map[string][]string {
	index := map[string]int{}
	low := map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	next := 0
	out := map[string][]string{}
	var strong func(string)
	strong = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range t.hyperNodes[v].spec.children {
			if _, ok := t.hyperNodes[w]; !ok || !within.Has(w) {
				continue
			}
			if _, seen := index[w]; !seen {
				strong(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var component []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			component = append(component, w)
			if w == v {
				break
			}
		}
		selfLoop := len(component) == 1 && slices.Contains(t.hyperNodes[v].spec.children, v)
		if len(component) > 1 || selfLoop {
			sort.Strings(component)
			for _, w := range component {
				out[w] = component
			}
		}
	}
	for _, v := range sortedKeys(within) {
		if _, seen := index[v]; !seen {
			strong(v)
		}
	}
	return out
}

// ownProblems lists the problems a HyperNode is involved in.
func (t *Tree) ownProblems(name string, onCycle []string) []Problem {
	st := t.hyperNodes[name]
	spec := st.spec
	problems := append([]Problem(nil), spec.problems...)
	if len(onCycle) > 0 {
		problems = append(problems, newProblem(ReasonCycle,
			"it is on a membership cycle of HyperNodes %s", listNames(onCycle, 8)))
	}
	if claimers := t.claims[name]; claimers.Len() > 1 {
		problems = append(problems, newProblem(ReasonMultipleParents,
			"it is a member of %d HyperNodes (%s); a HyperNode can have only one parent", claimers.Len(), listNames(claimers.UnsortedList(), 8)))
	}
	// As a parent: claims shared with others, children of a tier not below ours, missing members.
	var missing []string
	for _, c := range spec.children {
		cst, ok := t.hyperNodes[c]
		if !ok {
			missing = append(missing, c)
			continue
		}
		if claimers := t.claims[c]; claimers.Len() > 1 {
			others := claimers.Clone()
			others.Delete(name)
			p := newProblem(ReasonMultipleParents,
				"its member %s is also a member of %s; %s is excluded until it has one parent", c, listNames(others.UnsortedList(), 8), c)
			p.Excludes = false
			problems = append(problems, p)
		}
		if cst.spec.tier >= spec.tier {
			problems = append(problems, newProblem(ReasonTierOrder,
				"its tier %d is not greater than the tier %d of its member %s", spec.tier, cst.spec.tier, c))
		}
	}
	if len(missing) > 0 {
		p := newProblem(ReasonMissingMember,
			"member HyperNode(s) %s do not exist; placement uses the members that exist", listNames(missing, 8))
		p.Excludes = false
		problems = append(problems, p)
	}
	// As a child: a parent whose tier is not greater than ours.
	for p := range t.claims[name] {
		if pst := t.hyperNodes[p]; pst.spec.tier <= spec.tier {
			prob := newProblem(ReasonTierOrder,
				"its parent %s has tier %d, not greater than its own tier %d; %s and everything below it are excluded", p, pst.spec.tier, spec.tier, p)
			prob.Excludes = false
			problems = append(problems, prob)
		}
	}
	// As a leaf: nodes that other leaves select too.
	if spec.leaf {
		var shared []string
		others := sets.New[string]()
		for n := range st.nodes {
			if leaves := t.nodeLeaves[n]; leaves.Len() > 1 {
				shared = append(shared, n)
				for l := range leaves {
					if l != name {
						others.Insert(l)
					}
				}
			}
		}
		if len(shared) > 0 {
			problems = append(problems, newProblem(ReasonNodeInMultipleLeaves,
				"%d of its nodes (%s) are also selected by %s; a node can belong to one leaf only",
				len(shared), listNames(shared, 5), listNames(others.UnsortedList(), 5)))
		}
	}
	if spec.tierName != "" {
		if tiers := t.tierNameTiers[spec.tierName]; len(tiers) > 1 {
			p := newProblem(ReasonAmbiguousTierName,
				"its tierName %q is also used by HyperNodes of tiers %v; jobs cannot name that tier until every HyperNode of one tierName has the same tier",
				spec.tierName, sortedTiers(tiers))
			p.Excludes = false
			problems = append(problems, p)
		}
	}
	sortProblems(problems)
	return problems
}

func sortedTiers(m map[int]int) []int {
	out := make([]int, 0, len(m))
	for tier := range m {
		out = append(out, tier)
	}
	sort.Ints(out)
	return out
}
