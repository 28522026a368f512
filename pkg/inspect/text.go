package inspect

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
)

// Width is the terminal width the human output fits in.
const Width = 80

// textColumns is the first of the tree's columns (VALID, SOURCE) that hold words, not numbers:
// they are aligned left.
const textColumns = 5

// maxTierCell bounds the TIER column of the tree (tier and tierName), so that the name column
// keeps most of the line.
const maxTierCell = 16

// printer writes lines no wider than Width, wrapping long text at spaces (and inside words
// longer than a line, such as long object names).
type printer struct {
	w   *bufio.Writer
	err error
}

func newPrinter(w io.Writer) *printer { return &printer{w: bufio.NewWriter(w)} }

func (p *printer) line(s string) {
	if p.err == nil {
		_, p.err = p.w.WriteString(strings.TrimRight(s, " ") + "\n")
	}
}

// wrap writes text after first; continuation lines start with rest.
func (p *printer) wrap(first, rest, text string) {
	for _, l := range wrapLines(first, rest, text, Width) {
		p.line(l)
	}
}

func (p *printer) flush() error {
	if p.err != nil {
		return p.err
	}
	return p.w.Flush()
}

// wrapLines breaks text into lines of at most width columns: first prefixes the first line,
// rest the others. A prefix that leaves under 20 columns is shortened to leave them.
func wrapLines(first, rest, text string, width int) []string {
	minText := min(20, width/2)
	if width-utf8.RuneCountInString(rest) < minText {
		rest = strings.Repeat(" ", width-minText)
	}
	var out []string
	if width-utf8.RuneCountInString(first) < minText {
		// A deep first prefix: drop its indentation, and if it is still too wide, give it
		// lines of its own.
		first = strings.TrimLeft(first, " ")
		for width-utf8.RuneCountInString(first) < minText {
			runes := []rune(first)
			cut := min(width, len(runes))
			out = append(out, string(runes[:cut]))
			first = rest + string(runes[cut:])
			if cut == len(runes) {
				first = rest
			}
		}
	}
	prefix := first
	cur := prefix
	curLen := utf8.RuneCountInString(cur)
	empty := true // nothing but the prefix on the current line
	flush := func() {
		out = append(out, cur)
		prefix = rest
		cur, curLen, empty = prefix, utf8.RuneCountInString(prefix), true
	}
	for _, word := range strings.Fields(text) {
		wl := utf8.RuneCountInString(word)
		sep := 1
		if empty {
			sep = 0
		}
		if !empty && curLen+sep+wl > width {
			flush()
			sep = 0
		}
		if empty && curLen+wl > width {
			// A word longer than the line: cut it.
			for curLen+utf8.RuneCountInString(word) > width {
				room := max(width-curLen, 1)
				if room > utf8.RuneCountInString(word) {
					break
				}
				runes := []rune(word)
				cur += string(runes[:room])
				word = string(runes[room:])
				flush()
			}
			wl = utf8.RuneCountInString(word)
			if wl == 0 {
				continue
			}
		}
		if sep == 1 {
			cur += " "
		}
		cur += word
		curLen += sep + wl
		empty = false
	}
	if !empty || len(out) == 0 {
		out = append(out, cur)
	}
	return out
}

// pad right-pads s to n columns; padLeft left-pads.
func pad(s string, n int) string {
	return s + strings.Repeat(" ", max(n-utf8.RuneCountInString(s), 0))
}

func padLeft(s string, n int) string {
	return strings.Repeat(" ", max(n-utf8.RuneCountInString(s), 0)) + s
}

// WriteTree renders a TreeReport: one row per HyperNode, indented under its parent, with its
// tier, usable/total nodes, allocatable and free amounts, then the PodGroups on its nodes and
// its problems. The virtual root is shown when there are several top-level HyperNodes or
// nodes outside every HyperNode.
func WriteTree(w io.Writer, r TreeReport) error {
	p := newPrinter(w)
	p.wrap("", "", fmt.Sprintf("Resource %s. NODES: usable/total (usable: ready and not cordoned). FREE: allocatable minus the requests of bound pods, on usable nodes. VALID: no problem of its own. SOURCE: the discovery source that owns it (- if made by hand).", r.Resource))
	for _, warning := range r.Warnings {
		p.wrap("Warning: ", "  ", warning)
	}
	p.line("")

	type row struct {
		report *HyperNodeReport
		depth  int
	}
	var rows []row
	var walk func(h *HyperNodeReport, depth int)
	walk = func(h *HyperNodeReport, depth int) {
		rows = append(rows, row{h, depth})
		for i := range h.Children {
			walk(&h.Children[i], depth+1)
		}
	}
	showRoot := len(r.Root.Children) != 1 || len(r.NodesInNoHyperNode) > 0 || len(r.NodesInExcludedHyperNodes) > 0
	if showRoot {
		walk(&r.Root, 0)
	} else {
		for i := range r.Root.Children {
			walk(&r.Root.Children[i], 0)
		}
	}
	if len(r.Root.Children) == 0 {
		// The root row below is the whole cluster, one domain for every gang.
		p.line("No HyperNodes.")
	}

	header := []string{"HYPERNODE", "TIER", "NODES", "ALLOC", "FREE", "VALID", "SOURCE"}
	cells := make([][]string, len(rows))
	widths := make([]int, len(header))
	for i, h := range header {
		widths[i] = len(h)
	}
	for i, rw := range rows {
		h := rw.report
		tier := strconv.Itoa(h.Tier)
		if h.TierName != "" {
			tier += " " + h.TierName
		}
		if runes := []rune(tier); len(runes) > maxTierCell {
			// The full tierName is in the JSON output and in explain.
			tier = string(runes[:maxTierCell-1]) + "…"
		}
		valid, src := "", ""
		if !h.Virtual {
			valid, src = "yes", "-"
			if h.Valid != nil && !*h.Valid {
				valid = "no"
			}
			if h.Source != "" {
				src = h.Source
			}
		}
		cells[i] = []string{strings.Repeat("  ", rw.depth) + h.Name, tier,
			fmt.Sprintf("%d/%d", h.UsableNodes, h.Nodes), h.Allocatable.String(), h.Free.String(), valid, src}
		for j, cell := range cells[i] {
			widths[j] = max(widths[j], utf8.RuneCountInString(cell))
		}
	}
	// The name column gives way first when the row would be too wide; a longer name then
	// gets a line of its own.
	const mark = "  EXCLUDED"
	others := len(mark)
	for _, wd := range widths[1:] {
		others += wd + 2
	}
	widths[0] = min(widths[0], max(Width-others, 12))
	format := func(c []string, suffix string) string {
		s := pad(c[0], widths[0]) + "  " + pad(c[1], widths[1])
		for j := 2; j < len(c); j++ {
			if j >= textColumns {
				s += "  " + pad(c[j], widths[j])
				continue
			}
			s += "  " + padLeft(c[j], widths[j])
		}
		return s + suffix
	}
	if len(rows) > 0 {
		p.line(format(header, ""))
	}
	for i, rw := range rows {
		h := rw.report
		c := cells[i]
		suffix := ""
		if h.Excluded {
			suffix = mark
		}
		if utf8.RuneCountInString(c[0]) > widths[0] {
			p.wrap(strings.Repeat("  ", rw.depth), strings.Repeat("  ", rw.depth+1), h.Name)
			c = append([]string{""}, c[1:]...)
		}
		p.line(format(c, suffix))
		detail := strings.Repeat("  ", rw.depth+1)
		if len(h.PodGroups) > 0 {
			var parts []string
			for _, pg := range h.PodGroups {
				parts = append(parts, fmt.Sprintf("%s (%d)", pg.PodGroup, pg.Pods))
			}
			p.wrap(detail+"podgroups: ", detail+"  ", listWithMore(parts, 3))
		}
		if len(h.Devices) > 0 {
			var parts []string
			for _, d := range h.Devices {
				parts = append(parts, fmt.Sprintf("%s %d/%d free", d.Class, d.Free, d.Total))
			}
			p.wrap(detail+"devices: ", detail+"  ", strings.Join(parts, ", "))
		}
		for _, hold := range h.Holds {
			p.wrap(detail+"held for: ", detail+"  ", fmt.Sprintf("%s (%d nodes, for %s)", hold.PodGroup, len(hold.Nodes), hold.Age))
		}
		for _, prob := range h.Problems {
			label := "warning"
			if prob.Excludes {
				label = "invalid"
			}
			p.wrap(fmt.Sprintf("%s%s (%s): ", detail, label, prob.Reason), detail+"  ", prob.Message)
		}
		if h.Excluded && h.ExcludedBy != h.Name && h.ExcludedBy != "" {
			p.wrap(detail+"excluded: ", detail+"  ", "below the invalid HyperNode "+h.ExcludedBy)
		}
	}
	if len(r.NodesInNoHyperNode) > 0 {
		p.line("")
		// Capped: a cluster not yet labelled has thousands (the JSON lists them all).
		p.wrap(fmt.Sprintf("Nodes in no HyperNode (%d): ", len(r.NodesInNoHyperNode)), "  ", listWithMore(r.NodesInNoHyperNode, nodesShown))
	}
	if len(r.NodesInExcludedHyperNodes) > 0 {
		p.line("")
		var parts []string
		for _, nl := range r.NodesInExcludedHyperNodes {
			parts = append(parts, fmt.Sprintf("%s (%s)", nl.Node, strings.Join(nl.Leaves, ", ")))
		}
		p.wrap(fmt.Sprintf("Nodes only in excluded HyperNodes (%d): ", len(parts)), "  ", listWithMore(parts, nodesShown))
	}
	return p.flush()
}

// nodesShown bounds the node names a line of the tree lists.
const nodesShown = 20

// listWithMore joins the first n items and counts the rest.
func listWithMore(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s (+%d more)", strings.Join(items[:n], ", "), len(items)-n)
}

// tierLabel renders a tier with its name, e.g. "tier 2 (spine)".
func tierLabel(tier int, name string) string {
	if name != "" {
		return fmt.Sprintf("tier %d (%s)", tier, name)
	}
	return fmt.Sprintf("tier %d", tier)
}

// domainLabel names a HyperNode for people: the virtual root is "the whole cluster".
func domainLabel(name string) string {
	if name == hypernode.VirtualRootName {
		return "the whole cluster " + name
	}
	return name
}

// WriteExplanation renders an Explanation: what the gang needs, where its bound members are,
// where its pending members could go and why the best candidates fail, and what the
// scheduler said.
func WriteExplanation(w io.Writer, e Explanation) error {
	p := newPrinter(w)
	status := e.Status
	if e.Phase != "" {
		status += fmt.Sprintf(" (PodGroup phase %s)", e.Phase)
	}
	kind := "PodGroup"
	if e.API != "" {
		kind = "Pod group (" + e.API + ")"
	}
	p.wrap("", "  ", fmt.Sprintf("%s %s: %s", kind, e.PodGroup, status))
	for _, warning := range e.Warnings {
		p.wrap("  warning: ", "    ", warning)
	}
	m := e.Members
	min := "minMember"
	if e.API != "" {
		min = "minCount"
	}
	members := fmt.Sprintf("%s %d; members: %d live (%d bound, %d pending)", min, e.MinMember, m.Seen, m.Bound, m.Pending)
	if m.Finished > 0 {
		members += fmt.Sprintf(", %d finished", m.Finished)
	}
	if m.Terminating > 0 {
		members += fmt.Sprintf(", %d terminating", m.Terminating)
	}
	p.wrap("  ", "    ", members)
	writeGang(p, e)

	if pl := e.Placement; pl != nil {
		p.line("")
		p.wrap("", "  ", fmt.Sprintf("Bound members: %d %s on %d %s, lowest common HyperNode %s, %s:",
			pl.Pods, plural(pl.Pods, "pod", "pods"), pl.Nodes, plural(pl.Nodes, "node", "nodes"),
			domainLabel(pl.Domain), tierLabel(pl.Tier, pl.TierName)))
		var walk func(d PlacedDomain, depth int)
		walk = func(d PlacedDomain, depth int) {
			indent := strings.Repeat("  ", depth+1)
			label := d.Name
			switch {
			case d.TierName != "":
				label += fmt.Sprintf(" (tier %d, %s)", d.Tier, d.TierName)
			case d.Tier > 0:
				label += fmt.Sprintf(" (tier %d)", d.Tier)
			}
			p.wrap(indent, indent+"  ", label)
			for _, child := range d.Children {
				walk(child, depth+1)
			}
			for _, n := range d.Nodes {
				p.wrap(indent+"  "+n.Node+": ", indent+"    ", strings.Join(n.Pods, ", "))
			}
		}
		walk(pl.Tree, 0)
	}

	if s := e.Search; s != nil {
		p.line("")
		writeSearch(p, s)
		p.wrap("  ", "    ", "(the scheduler also runs its other filters and keeps slots promised to other gangs; its own words follow)")
	}

	if e.Hold != nil || e.HoldError != "" {
		p.line("")
		writeHold(p, e)
	}

	p.line("")
	sch := e.Scheduler
	if len(sch.Conditions) == 0 && len(sch.Events) == 0 {
		p.line("The scheduler has said nothing about this gang yet (no condition, no Event).")
		return p.flush()
	}
	p.line("What the scheduler said:")
	for _, c := range sch.Conditions {
		who := listWithMore(c.Pods, podsNamed)
		p.wrap("  ", "    ", fmt.Sprintf("%s: %s: %s", who, c.Reason, c.Message))
	}
	if len(sch.Events) > 0 {
		p.line("  Events, newest first:")
		for _, ev := range sch.Events {
			count := ""
			if ev.Count > 1 {
				count = fmt.Sprintf(" (x%d)", ev.Count)
			}
			p.wrap("    ", "      ", fmt.Sprintf("%s ago %s %s %s%s:", ev.Age, ev.Type, ev.Reason, ev.Object, count))
			p.wrap("      ", "      ", ev.Message)
		}
	}
	return p.flush()
}

// writeHold says what the scheduler holds for the gang.
func writeHold(p *printer, e Explanation) {
	if e.HoldError != "" {
		p.wrap("Hold: ", "  ", "unusable: "+e.HoldError)
	}
	h := e.Hold
	if h == nil {
		return
	}
	place := fmt.Sprintf("%d nodes of the cluster", len(h.Nodes))
	if h.Domain != "" {
		place = fmt.Sprintf("%s (tier %d)", h.Domain, h.Tier)
	}
	p.wrap("Hold: ", "  ", fmt.Sprintf("the scheduler holds %s for this gang, for %s (since %s): pods after it in queue order (priority below %d, or %d and younger than the PodGroup) do not take the room it needs there",
		place, h.Age, h.Since.Format(time.RFC3339), h.Priority, h.Priority))
	p.wrap("  nodes: ", "    ", listWithMore(h.Nodes, nodesShown))
}

// subGroupConstrained reports whether a sub-group policy carries a constraint of its own.
func subGroupConstrained(sg *SubGroupsReport) bool {
	if sg == nil {
		return false
	}
	for _, p := range sg.Policies {
		if p.Constraint != "" {
			return true
		}
	}
	return false
}

// writeGang writes what the gang's members request and its constraints.
func writeGang(p *printer, e Explanation) {
	if len(e.Shapes) > 0 {
		var parts []string
		for _, sh := range e.Shapes {
			parts = append(parts, fmt.Sprintf("%d x %s (as %s)", sh.Pods, sh.Name, sh.Example))
		}
		p.wrap("  pending pod shapes: ", "    ", strings.Join(parts, ", "))
	} else if len(e.Request) > 0 {
		var parts []string
		for _, ra := range e.Request {
			parts = append(parts, ra.Resource+" "+ra.Amount.String())
		}
		p.wrap("  each pod requests: ", "    ", fmt.Sprintf("%s (as %s)", strings.Join(parts, ", "), e.RequestFrom))
	}
	switch nt := e.NetworkTopology; {
	case nt == nil && subGroupConstrained(e.SubGroups):
		p.wrap("  network topology: ", "    ", "none for the whole job (its sub-groups' constraints are placed by topology, the job anywhere)")
	case nt == nil && e.API != "":
		p.wrap("  network topology: ", "    ", "none (placed by the HyperNode tree as a soft constraint: the lowest tier that holds it, the fewest leaves)")
	case nt == nil:
		p.wrap("  network topology: ", "    ", "none (a plain gang: the scheduler does not place it by topology)")
	case nt.Error != "":
		p.wrap("  network topology: ", "    ", "INVALID, the members stay pending: "+nt.Error)
	case nt.TopologyKey != "":
		p.wrap("  network topology: ", "    ", fmt.Sprintf("%s (schedulingConstraints topology key %s)", nt.Description, nt.TopologyKey))
	default:
		p.wrap("  network topology: ", "    ", nt.Description)
	}
	if sg := e.SubGroups; sg == nil {
		p.line("  sub-groups: none")
	} else if sg.Error != "" {
		p.wrap("  sub-groups: ", "    ", "INVALID, the members stay pending: "+sg.Error)
	} else {
		p.line("  sub-groups:")
		for _, pol := range sg.Policies {
			text := fmt.Sprintf("subGroupSize %d, minSubGroups %d", pol.SubGroupSize, pol.MinSubGroups)
			if pol.Constraint != "" {
				text += ", " + pol.Constraint
			}
			p.wrap(fmt.Sprintf("    policy %s: ", pol.Name), "      ", text)
		}
		for _, g := range sg.Groups {
			p.wrap(fmt.Sprintf("    %s: ", g.ID), "      ", fmt.Sprintf("%d of %d members (%d bound, %d pending)", g.Members, g.Size, g.Bound, g.Pending))
		}
		if sg.Ungrouped > 0 {
			p.wrap("    ", "      ", fmt.Sprintf("%d %s in no sub-group", sg.Ungrouped, plural(sg.Ungrouped, "member", "members")))
		}
	}
}

// writeSearch writes where the pending members could go.
func writeSearch(p *printer, s *SearchReport) {
	mode := "hard"
	if s.Soft {
		mode = "soft"
	}
	p.wrap("", "  ", fmt.Sprintf("Where the %d pending %s could go (%s, up to tier %d; capacity from requests on usable nodes):",
		s.Demand, plural(s.Demand, "pod", "pods"), mode, s.MaxTier))
	if s.PlacedIn != "" {
		p.wrap("  ", "    ", fmt.Sprintf("every candidate must contain the bound members (%s)", domainLabel(s.PlacedIn)))
	}
	for _, t := range s.Tiers {
		label := tierLabel(t.Tier, t.TierName)
		if len(t.Candidates) == 1 && t.Candidates[0].Name == hypernode.VirtualRootName {
			label = fmt.Sprintf("tier %d (the whole cluster)", t.Tier)
		}
		switch {
		case !t.Allowed:
			label += fmt.Sprintf(", above the allowed tier %d, not used:", s.MaxTier)
		case t.Tier > s.MaxTier:
			label += ", above the preferred tier: a soft fallback:"
		default:
			label += ", allowed:"
		}
		p.wrap("  ", "    ", label)
		if len(t.Candidates) == 0 {
			p.line("    no usable HyperNode")
		}
		nameWidth, holdsWidth := 0, 0
		for _, c := range t.Candidates {
			nameWidth = max(nameWidth, utf8.RuneCountInString(c.Name))
			holdsWidth = max(holdsWidth, len(fmt.Sprintf("%d/%d", c.Holds, c.Needs)))
		}
		nameWidth = min(nameWidth, 24)
		for _, c := range t.Candidates {
			holds := fmt.Sprintf("%d/%d", c.Holds, c.Needs)
			first := "    " + pad(c.Name, nameWidth) + "  " + padLeft(holds, holdsWidth) + "  "
			if utf8.RuneCountInString(c.Name) > nameWidth {
				p.wrap("    ", "      ", c.Name)
				first = "    " + pad("", nameWidth) + "  " + padLeft(holds, holdsWidth) + "  "
			}
			p.wrap(first, strings.Repeat(" ", utf8.RuneCountInString(first)), c.Reason)
		}
		if t.More > 0 {
			p.line(fmt.Sprintf("    (+%d more)", t.More))
		}
	}
	if len(s.UnusableNodes) > 0 {
		var parts []string
		for _, n := range s.UnusableNodes {
			parts = append(parts, fmt.Sprintf("%s (%s)", n.Node, n.Reason))
		}
		p.wrap("  nodes that take no member: ", "    ", listWithMore(parts, 5))
	}
	if len(s.NotCounted) > 0 {
		p.wrap("  not counted: ", "    ", strings.Join(s.NotCounted, ", ")+" (provided through DRA: only the scheduler's simulation knows where it fits)")
	}
	p.wrap("  planner on this data: ", "    ", s.Verdict)
}
