package inspect

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
)

// WritePlan renders a plan for an 80-column terminal.
func WritePlan(w io.Writer, r PlanReport) error {
	p := newPrinter(w)
	verdict := "would NOT start now"
	if r.Placed {
		verdict = "would start now"
	}
	p.wrap("", "  ", fmt.Sprintf("%s %s: %s (%s)", r.Kind, r.Job, verdict, NothingChanged))
	for _, warning := range r.Warnings {
		p.wrap("  warning: ", "    ", warning)
	}
	group, min := "PodGroup", "minMember"
	if r.Native {
		group, min = "Native pod group", "minCount"
	}
	p.wrap("  ", "    ", fmt.Sprintf("%s %s (%s), %s %d; %d %s at once, priority %d",
		group, r.PodGroup, podGroupSource(r.PodGroupFrom), min, r.MinMember, r.Members, plural(r.Members, "pod", "pods"), r.Priority))
	writeGang(p, Explanation{Request: r.Request, RequestFrom: r.RequestFrom, Shapes: r.Shapes,
		NetworkTopology: r.NetworkTopology, SubGroups: r.SubGroups})

	if pl := r.Placement; pl != nil {
		p.line("")
		p.wrap("", "  ", fmt.Sprintf("Placement: %s, %s; %d %s (the fewest that could hold them: %d)",
			domainLabel(pl.Domain), tierLabel(pl.Tier, pl.TierName), pl.Leaves, plural(pl.Leaves, "leaf", "leaves"), pl.MinLeaves))
		if pl.Deferred > 0 {
			p.wrap("  ", "    ", fmt.Sprintf("%d %s wait for room (the job runs without them)", pl.Deferred, plural(pl.Deferred, "member", "members")))
		}
		var leaf string
		var pods []string
		flush := func() {
			if len(pods) > 0 {
				p.wrap("  "+leaf+": ", "    ", strings.Join(pods, ", "))
			}
			pods = nil
		}
		for _, m := range pl.Members {
			if m.Leaf != leaf {
				flush()
				leaf = m.Leaf
			}
			name := m.Pod
			if m.Rank != nil {
				name += " (rank " + strconv.Itoa(*m.Rank) + ")"
			}
			if m.Node != "" {
				name += " -> " + m.Node
			}
			pods = append(pods, name)
		}
		flush()
	}
	if r.Search != nil && !r.Placed {
		p.line("")
		writeSearch(p, r.Search)
		p.wrap("  ", "    ", "(the scheduler also runs its other filters and keeps room promised to gangs before this one)")
	}
	if wf := r.WaitsFor; wf != nil {
		p.line("")
		if wf.Domain == "" {
			p.wrap("What it waits for: ", "  ", wf.Reason)
		} else {
			p.wrap("", "  ", fmt.Sprintf("What it waits for: in %s (%s), which holds %d of the %d pods now, %d of the %d gangs and pods running there would have to finish:",
				domainLabel(wf.Domain), tierLabel(wf.Tier, wf.TierName), wf.Holds, wf.Needs, len(wf.Occupants), wf.Running))
			for _, o := range wf.Occupants {
				p.wrap("  ", "    ", fmt.Sprintf("%s; frees room for %d", describeOccupant(o), o.Frees))
			}
		}
	}
	if pr := r.Preemption; pr != nil {
		p.line("")
		writePreemption(p, pr)
	}
	return p.flush()
}

// writePreemption says what gang preemption would evict.
func writePreemption(p *printer, pr *PreemptionReport) {
	head := fmt.Sprintf("What gang preemption would evict at priority %d (GangPreemption on a copy of the cluster, %s):", pr.Priority, pr.Config)
	if !pr.Helps {
		p.wrap("", "  ", head)
		p.wrap("  nothing: ", "    ", pr.Refusal)
		return
	}
	p.wrap("", "  ", head)
	where := fmt.Sprintf("in %s, %s", pr.Domain, tierLabel(pr.Tier, pr.TierName))
	if pr.Tier == 0 {
		where = "in the whole cluster"
	}
	p.wrap("  ", "    ", fmt.Sprintf("%s: %d %s", where, len(pr.Victims), plural(len(pr.Victims), "pod", "pods")))
	for _, v := range pr.Victims {
		what := fmt.Sprintf("priority %d", v.Priority)
		if v.Gang != "" {
			what += ", gang " + v.Gang
		}
		if v.PDBViolated {
			what += ", its PodDisruptionBudget does not allow it now"
		}
		p.wrap("    ", "      ", fmt.Sprintf("%s on %s (%s, running %s)", v.Pod, v.Node, what, v.Age))
	}
	p.wrap("  chosen: ", "    ", pr.Why)
	for _, nc := range pr.NotChosen {
		p.wrap("  not chosen: ", "    ", nc)
	}
}

// podGroupSource says where a plan's PodGroup comes from.
func podGroupSource(from string) string {
	switch from {
	case "file":
		return "from the file"
	case "cluster":
		return "as it exists in the cluster"
	case "controller":
		return "as the job's controller will create it"
	}
	return from
}

// WriteCapacity renders a capacity report for an 80-column terminal.
func WriteCapacity(w io.Writer, r CapacityReport) error {
	p := newPrinter(w)
	var parts []string
	for _, ra := range r.Request {
		parts = append(parts, ra.Resource+" "+ra.Amount.String())
	}
	shape := strings.Join(parts, ", ")
	if r.Shape != "" {
		shape += " (as " + r.Shape + ")"
	}
	p.wrap("Largest gang that could start now in one domain, pods of ", "  ", shape+":")
	for _, warning := range r.Warnings {
		p.wrap("  warning: ", "    ", warning)
	}
	for _, t := range r.Tiers {
		label := tierLabel(t.Tier, t.TierName)
		if len(t.Candidates) > 0 && t.Candidates[0].Name == hypernode.VirtualRootName {
			label = fmt.Sprintf("tier %d (the whole cluster)", t.Tier)
		}
		if t.Domain == "" {
			p.wrap("  ", "    ", label+": 0 pods")
			continue
		}
		var others []string
		for _, c := range t.Candidates[1:] {
			others = append(others, fmt.Sprintf("%s %d", c.Name, c.Holds))
		}
		line := fmt.Sprintf("%s: %d %s in %s", label, t.Largest, plural(t.Largest, "pod", "pods"), t.Domain)
		if len(others) > 0 {
			more := ""
			if t.More > 0 {
				more = fmt.Sprintf(", +%d more", t.More)
			}
			line += fmt.Sprintf(" (next: %s%s)", strings.Join(others, ", "), more)
		}
		p.wrap("  ", "    ", line)
	}
	if r.UnusableNodes > 0 {
		p.wrap("  ", "    ", fmt.Sprintf("%d %s take no pod of this shape (taints, node selection, not ready or cordoned)", r.UnusableNodes, plural(r.UnusableNodes, "node", "nodes")))
	}
	if len(r.NotCounted) > 0 {
		p.wrap("  not counted: ", "    ", strings.Join(r.NotCounted, ", ")+" (provided through DRA: only the scheduler's simulation knows where it fits)")
	}
	return p.flush()
}
