package bench

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// GangCompare puts one gang's placement next to the best one exhaustive search finds for the
// same cluster state (lowest tier, then fewest leaves, within the gang's constraint).
type GangCompare struct {
	Name      string `json:"name"`
	Admitted  bool   `json:"admitted"`
	Tier      int    `json:"tier,omitempty"`
	Leaves    int    `json:"leaves,omitempty"`
	OptTier   int    `json:"optTier"` // 0: no placement exists
	OptLeaves int    `json:"optLeaves,omitempty"`
	Matched   bool   `json:"matched"`
}

// ExhaustiveReplay is one scheduler's replay of the small instance, compared with search.
type ExhaustiveReplay struct {
	Kind                         Kind          `json:"kind"`
	AdmittedBeforeFirstRejection int           `json:"admittedBeforeFirstRejection"`
	Gangs                        []GangCompare `json:"gangs"`
	GangsMatched                 int           `json:"gangsMatched"`
}

// ExhaustiveResult is scenario 3's small instance.
type ExhaustiveResult struct {
	Topology Topology `json:"topology"`
	Jobs     []Job    `json:"jobs"`
	// The most jobs any sequence of placements (each within its constraint, knowing the
	// whole arrival sequence in advance) admits before the first refusal.
	OptimalAdmittedBeforeFirstRejection int                `json:"optimalAdmittedBeforeFirstRejection"`
	SearchStates                        int                `json:"searchStates"`
	Replays                             []ExhaustiveReplay `json:"replays"`
}

// smallJobs arrive one after another and never complete, on 16 nodes (4 leaves of 4 nodes,
// 2 spines): 22.5 nodes' worth of GPUs, so the sequence must hit a refusal, and the order of
// 4- and 8-GPU pods makes fragmentation matter.
func smallJobs() []Job {
	spec := []struct {
		pods, gpus, tier int
		mode             string
	}{
		{3, 8, 1, "hard"}, {3, 4, 1, "hard"}, {5, 8, 2, "hard"}, {2, 8, 1, "hard"},
		{3, 4, 1, "hard"}, {2, 8, 2, "soft"}, {3, 8, 1, "hard"}, {4, 8, 2, "hard"},
	}
	jobs := make([]Job, len(spec))
	for i, s := range spec {
		jobs[i] = Job{Name: fmt.Sprintf("s%02d", i), Class: "small-instance", Arrival: float64(i + 1), Pods: s.pods, GPUs: s.gpus, Mode: s.mode, Tier: s.tier}
	}
	return jobs
}

// enumerate calls f with the pod count per node of every placement of the job on the free
// GPUs in used, up to symmetry: nodes of one leaf with the same free GPUs are interchangeable,
// so their counts are taken non-increasing. f returns false to stop.
func enumerate(tp Topology, used []int, job Job, f func(counts []int) bool) {
	order := make([]int, tp.Nodes)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		na, nb := order[a], order[b]
		if tp.leafOf(na) != tp.leafOf(nb) {
			return tp.leafOf(na) < tp.leafOf(nb)
		}
		return used[na] < used[nb]
	})
	caps := make([]int, len(order))
	suffix := make([]int, len(order)+1)
	for i := len(order) - 1; i >= 0; i-- {
		caps[i] = (nodeGPUs - used[order[i]]) / job.GPUs
		suffix[i] = suffix[i+1] + caps[i]
	}
	counts := make([]int, tp.Nodes)
	stop := false
	var rec func(pos, left int)
	rec = func(pos, left int) {
		if stop {
			return
		}
		if left == 0 {
			stop = !f(counts)
			return
		}
		if pos == len(order) || suffix[pos] < left {
			return
		}
		n := order[pos]
		hi := min(caps[pos], left)
		if pos > 0 {
			prev := order[pos-1]
			if tp.leafOf(prev) == tp.leafOf(n) && used[prev] == used[n] {
				hi = min(hi, counts[prev])
			}
		}
		for c := hi; c >= 0; c-- {
			counts[n] = c
			rec(pos+1, left-c)
			counts[n] = 0
		}
	}
	rec(0, job.Pods)
}

func allowed(tp Topology, job Job, nodes []int) bool {
	return job.Mode == "soft" || tp.tierOf(nodes) <= job.Tier
}

func nodesOfCounts(counts []int) []int {
	var nodes []int
	for n, c := range counts {
		for range c {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// bestGang is the placement with the lowest tier, then the fewest leaves, within the job's
// constraint (0, 0: none).
func bestGang(tp Topology, used []int, job Job) (tier, leaves int) {
	enumerate(tp, used, job, func(counts []int) bool {
		nodes := nodesOfCounts(counts)
		if !allowed(tp, job, nodes) {
			return true
		}
		t, l := tp.tierOf(nodes), tp.leafCount(nodes)
		if tier == 0 || t < tier || (t == tier && l < leaves) {
			tier, leaves = t, l
		}
		return true
	})
	return tier, leaves
}

// canonical encodes a state up to the tree's symmetries (nodes within a leaf, leaves within a
// spine, spines; the small instance's tree is uniform).
func canonical(tp Topology, used []int) string {
	spines := make([][]string, tp.spines())
	for l := range tp.leaves() {
		var vals []int
		for n := l * tp.LeafSize; n < min((l+1)*tp.LeafSize, tp.Nodes); n++ {
			vals = append(vals, used[n])
		}
		sort.Ints(vals)
		spines[tp.spineOf(l)] = append(spines[tp.spineOf(l)], fmt.Sprint(vals))
	}
	var parts []string
	for _, s := range spines {
		sort.Strings(s)
		parts = append(parts, strings.Join(s, "|"))
	}
	sort.Strings(parts)
	return strings.Join(parts, "/")
}

// bestSequence returns the most jobs that some sequence of placements admits before the first
// refusal, by depth-first search over every placement of every job (up to symmetry) with
// memoisation of the states, and the number of states explored.
func bestSequence(tp Topology, jobs []Job) (int, int) {
	memo := map[string]int{}
	var dfs func(j int, used []int) int
	dfs = func(j int, used []int) int {
		if j == len(jobs) {
			return j
		}
		key := fmt.Sprint(j, ":", canonical(tp, used))
		if v, ok := memo[key]; ok {
			return v
		}
		best := j
		job := jobs[j]
		enumerate(tp, used, job, func(counts []int) bool {
			if !allowed(tp, job, nodesOfCounts(counts)) {
				return true
			}
			next := append([]int(nil), used...)
			for n, c := range counts {
				next[n] += c * job.GPUs
			}
			best = max(best, dfs(j+1, next))
			return best < len(jobs)
		})
		memo[key] = best
		return best
	}
	best := dfs(0, make([]int, tp.Nodes))
	return best, len(memo)
}

// Scenario 3, small instance: our placements next to exhaustive search, per gang and over the
// whole arrival sequence.
func TestExhaustive(t *testing.T) {
	tp := Topology{Name: "ex", Nodes: 16, LeafSize: 4, LeavesPerSpine: 2}
	jobs := smallJobs()
	opt, states := bestSequence(tp, jobs)
	res := &ExhaustiveResult{Topology: tp, Jobs: jobs, OptimalAdmittedBeforeFirstRejection: opt, SearchStates: states}
	c := newClients(t)
	tp.create(t, c)
	for _, k := range []Kind{OursBinPack, OursLeastWaste, Vanilla} {
		r := replay(t, c, tp, jobs, k, "exhaustive")
		er := ExhaustiveReplay{Kind: k, AdmittedBeforeFirstRejection: r.AdmittedBeforeFirstRejection}
		for i, o := range r.Outcomes {
			if r.AdmittedBeforeFirstRejection < i {
				break // after the first refusal the states are no longer comparable
			}
			g := GangCompare{Name: o.Name, Admitted: o.Admitted, Tier: o.Tier, Leaves: o.Leaves}
			g.OptTier, g.OptLeaves = bestGang(tp, o.usedBefore, jobs[i])
			g.Matched = g.Admitted == (g.OptTier > 0) && g.Tier == g.OptTier && g.Leaves == g.OptLeaves
			if g.Matched {
				er.GangsMatched++
			}
			er.Gangs = append(er.Gangs, g)
			if k.ours() && g.Admitted != (g.OptTier > 0) {
				t.Errorf("%s: gang %s admitted=%v, but exhaustive search finds a placement: %v", k, o.Name, g.Admitted, g.OptTier > 0)
			}
			if k.ours() && g.Admitted && g.Tier != g.OptTier {
				t.Errorf("%s: gang %s at tier %d, the lowest possible is %d", k, o.Name, g.Tier, g.OptTier)
			}
		}
		t.Logf("small instance %s: %d jobs before the first refusal (optimum %d), %d/%d gangs match the per-gang optimum",
			k, er.AdmittedBeforeFirstRejection, opt, er.GangsMatched, len(er.Gangs))
		if er.AdmittedBeforeFirstRejection > opt && k.ours() {
			t.Errorf("%s admitted %d jobs before the first refusal, more than the optimum %d: the search is wrong", k, er.AdmittedBeforeFirstRejection, opt)
		}
		res.Replays = append(res.Replays, er)
	}
	results.Exhaustive = res
}

// The search itself, on cases small enough to check by hand: one leaf of two 8-GPU nodes.
func TestSearchByHand(t *testing.T) {
	tp := Topology{Name: "hand", Nodes: 2, LeafSize: 2, LeavesPerSpine: 1}
	jobs := []Job{
		{Name: "a", Pods: 1, GPUs: 8, Mode: "hard", Tier: 1},
		{Name: "b", Pods: 2, GPUs: 4, Mode: "hard", Tier: 1},
		{Name: "c", Pods: 1, GPUs: 8, Mode: "hard", Tier: 1},
	}
	if got, _ := bestSequence(tp, jobs); got != 2 {
		t.Errorf("bestSequence = %d, want 2 (a and b fill both nodes)", got)
	}
	// Two 4-GPU pods that arrive one after another fit the later 8-GPU pod only when they
	// share a node.
	jobs = []Job{
		{Name: "a", Pods: 1, GPUs: 4, Mode: "hard", Tier: 1},
		{Name: "b", Pods: 1, GPUs: 4, Mode: "hard", Tier: 1},
		{Name: "c", Pods: 1, GPUs: 8, Mode: "hard", Tier: 1},
	}
	if got, _ := bestSequence(tp, jobs); got != 3 {
		t.Errorf("bestSequence = %d, want 3", got)
	}
	n := 0
	enumerate(tp, []int{0, 0}, Job{Pods: 2, GPUs: 4}, func([]int) bool { n++; return true })
	// Two interchangeable empty nodes: {2,0} and {1,1} ({0,2} is {2,0}).
	if n != 2 {
		t.Errorf("enumerate found %d placements, want 2", n)
	}
	if tier, leaves := bestGang(tp, []int{4, 0}, Job{Pods: 2, GPUs: 8}); tier != 0 || leaves != 0 {
		t.Errorf("bestGang of 16 GPUs on 12 free = %d, %d, want none", tier, leaves)
	}
}
