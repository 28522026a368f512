package inspect

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/jobspec"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// NothingChanged is the note every plan carries.
const NothingChanged = "nothing was created or evicted"

// PlanReport says where a job not yet submitted would go now, or what stands in its way.
type PlanReport struct {
	// Kind, Job (namespace/name) and PodGroup are the job as submitted and the PodGroup the
	// scheduler will read, from PodGroupFrom (file, cluster or controller).
	Kind         string `json:"kind"`
	Job          string `json:"job"`
	PodGroup     string `json:"podGroup"`
	PodGroupFrom string `json:"podGroupFrom"`
	// Native: the group is Kubernetes' own pod group (scheduling.k8s.io), analysed as its
	// PodGroup view (minCount as minMember, a tier label key as its constraint).
	Native    bool  `json:"native,omitempty"`
	MinMember int32 `json:"minMember"`
	// Members counts the pods the job's controller creates at once; Priority is theirs.
	Members  int    `json:"members"`
	Priority int32  `json:"priority"`
	Resource string `json:"resource"`
	// Placed is true when the planner places the job now; Placement says where.
	Placed          bool              `json:"placed"`
	Request         []ResourceAmount  `json:"request,omitempty"`
	RequestFrom     string            `json:"requestFrom,omitempty"`
	Shapes          []ShapeReport     `json:"shapes,omitempty"`
	NetworkTopology *ConstraintReport `json:"networkTopology,omitempty"`
	SubGroups       *SubGroupsReport  `json:"subGroups,omitempty"`
	Placement       *PlannedPlacement `json:"placement,omitempty"`
	// Search is every tier's best candidates and what they miss.
	Search *SearchReport `json:"search,omitempty"`
	// WaitsFor is, for a job that does not fit, what would have to finish first.
	WaitsFor *WaitsForReport `json:"waitsFor,omitempty"`
	// Preemption is, for a job that does not fit and has a priority (--priority or its
	// priority class), what gang preemption would evict for it.
	Preemption *PreemptionReport `json:"preemption,omitempty"`
	Warnings   []string          `json:"warnings,omitempty"`
	Note       string            `json:"note"`
}

// PlannedPlacement is where the planner would put the members.
type PlannedPlacement struct {
	Domain   string `json:"domain"`
	Tier     int    `json:"tier"`
	TierName string `json:"tierName,omitempty"`
	// Leaves counts the leaves the members go to; MinLeaves the fewest that could hold them,
	// counted by room alone.
	Leaves    int `json:"leaves"`
	MinLeaves int `json:"minLeaves"`
	// Members are the members placed, in rank order.
	Members []PlannedMember `json:"members"`
	// Deferred counts the members left to wait for room (the job runs without them).
	Deferred int `json:"deferred,omitempty"`
}

// PlannedMember is one member and its leaf (and node, where the planner picks nodes: for
// members of several shapes; otherwise the scheduler's scores pick a node in the leaf).
type PlannedMember struct {
	Pod  string `json:"pod"`
	Rank *int   `json:"rank,omitempty"`
	Leaf string `json:"leaf"`
	Node string `json:"node,omitempty"`
}

// WaitsForReport is the domain where the job would start soonest and what runs there.
type WaitsForReport struct {
	// Domain is the candidate needing the fewest occupants to finish (at Tier), Holds the
	// members it holds now of the Needs.
	Domain   string `json:"domain,omitempty"`
	Tier     int    `json:"tier,omitempty"`
	TierName string `json:"tierName,omitempty"`
	Holds    int    `json:"holds"`
	Needs    int    `json:"needs"`
	// Occupants are the running gangs and pods that would have to finish, those freeing the
	// most room first; Running counts every gang and pod running in the domain.
	Occupants []OccupantReport `json:"occupants,omitempty"`
	Running   int              `json:"running"`
	// Reason says why no domain is named (no allowed domain holds the job even empty).
	Reason string `json:"reason,omitempty"`
}

// OccupantReport is a gang (PodGroup) or a pod running in a domain.
type OccupantReport struct {
	Kind     string    `json:"kind"`
	Name     string    `json:"name"`
	Pods     int       `json:"pods"`
	Priority int32     `json:"priority"`
	Since    time.Time `json:"since"`
	Age      string    `json:"age"`
	// Frees counts the members its end alone makes room for in the domain.
	Frees int `json:"frees"`
}

// PreemptionReport is what GangPreemption would evict for the job, decided by the plugin
// itself on a copy of the cluster; nothing is evicted.
type PreemptionReport struct {
	Priority int32 `json:"priority"`
	// Config is the scheduler configuration the plugin ran with.
	Config string `json:"config"`
	// Helps is true when some domain holds the job once its victims are gone: Domain (at
	// Tier; "the cluster" for a job that may span it), chosen as Why says; NotChosen are
	// the other domains' costs. Otherwise Refusal says why, in the members' words.
	Helps     bool           `json:"helps"`
	Domain    string         `json:"domain,omitempty"`
	Tier      int            `json:"tier,omitempty"`
	TierName  string         `json:"tierName,omitempty"`
	Victims   []VictimReport `json:"victims,omitempty"`
	Why       string         `json:"why,omitempty"`
	NotChosen []string       `json:"notChosen,omitempty"`
	Refusal   string         `json:"refusal,omitempty"`
}

// VictimReport is one pod preemption would evict.
type VictimReport struct {
	Pod      string `json:"pod"`
	Node     string `json:"node"`
	Priority int32  `json:"priority"`
	// Gang is the victim's PodGroup (a gang is evicted whole).
	Gang string `json:"gang,omitempty"`
	// PDBViolated: a PodDisruptionBudget does not allow the eviction now.
	PDBViolated bool   `json:"pdbViolated"`
	Age         string `json:"age"`
}

// PlanOptions are plan's choices.
type PlanOptions struct {
	// Resource is the resource of the capacity figures ("" for the default).
	Resource v1.ResourceName
	// Priority, when set, is the members' priority instead of their priority class's.
	Priority *int32
	// SchedulerName is the scheduler that places gangs: a Job's or a PodGroup's pods that
	// name another are warned of.
	SchedulerName string
}

// Plan says where job would go now, with the scheduler's planner on this read of the cluster.
func (c *Cluster) Plan(job *jobspec.Job, opts PlanOptions) (PlanReport, error) {
	job, priority, err := c.Admit(job, opts.Priority)
	if err != nil {
		return PlanReport{}, err
	}
	members, pg := job.Members, job.PodGroup
	if job.Native && !c.NativeServed {
		return PlanReport{}, fmt.Errorf("%s %s is a native pod group (%s), which this cluster does not serve: turn on the GenericWorkload and TopologyAwareWorkloadScheduling gates "+
			"(docs/user-guide.md, \"Native pod groups\"), or use a PodGroup (scheduling.x-k8s.io/v1alpha1)", job.Kind, job.Name, NativeAPI)
	}
	var live MemberCounts
	groupOf, gate := labelMemberOf, heldBack
	if job.Native {
		groupOf, gate = nativeMemberOf, nativeHeldBack
	}
	existing := c.members(pg.Namespace, pg.Name, groupOf, &live)
	if len(existing) > 0 {
		// Planned alone: the room its earlier pods take is counted as free.
		c = c.without(existing)
	}
	counts := MemberCounts{Seen: len(members)}
	e, gang := c.explainGang(pg, members, counts, opts.Resource, gate)
	r := PlanReport{Kind: job.Kind, Job: job.Namespace + "/" + job.Name, PodGroup: pg.Namespace + "/" + pg.Name,
		PodGroupFrom: job.PodGroupFrom, MinMember: pg.Spec.MinMember, Members: len(members), Priority: priority,
		Resource: e.Resource, Request: e.Request, RequestFrom: e.RequestFrom, Shapes: e.Shapes,
		NetworkTopology: e.NetworkTopology, SubGroups: e.SubGroups, Search: e.Search, Warnings: e.Warnings, Note: NothingChanged}
	// The operators of the other kinds name the scheduler they were configured with.
	r.Native = job.Native
	if opts.SchedulerName != "" && (job.Kind == "Job" || strings.HasPrefix(job.Kind, "PodGroup") || job.Kind == "RayCluster") {
		for _, p := range members {
			if p.Spec.SchedulerName != opts.SchedulerName {
				r.Warnings = append(r.Warnings, fmt.Sprintf("pod %s names schedulerName %q, not %s: that scheduler places it, and the plan says where %s would",
					p.Name, p.Spec.SchedulerName, opts.SchedulerName, opts.SchedulerName))
				break
			}
		}
	}
	if len(existing) > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("PodGroup %s already has %d live pods in the cluster; the plan is for the job alone, as if they were gone", r.PodGroup, len(existing)))
	}
	s := e.Search
	if s == nil {
		return r, nil // an invalid constraint: NetworkTopology or SubGroups says why
	}
	if s.Fits && s.plan != nil {
		r.Placed = true
		r.Placement = c.plannedPlacement(s, gang)
		return r, nil
	}
	switch {
	case s.plan != nil || s.in.shape == nil || s.heldBack:
	case len(e.Shapes) > 1:
		// Room is counted for one shape; members of several would make the figures of one
		// of them look like the job's.
		r.WaitsFor = &WaitsForReport{Needs: s.Demand, Reason: "not counted for members of several pod shapes: the candidates above say what each domain misses"}
	default:
		r.WaitsFor = c.waitsFor(s, gang)
	}
	return r, nil
}

// Admit returns the job with its members' priority set as admission sets it, from their
// priority class (the global default class when they name none), or to override; and the
// highest of them. Members with a priority keep it (Admit of an admitted job is the same).
func (c *Cluster) Admit(job *jobspec.Job, override *int32) (*jobspec.Job, int32, error) {
	out := *job
	out.Members = make([]*v1.Pod, len(job.Members))
	var priority int32
	for i, p := range job.Members {
		p = p.DeepCopy()
		switch {
		case override != nil:
			p.Spec.Priority = override
		case p.Spec.Priority != nil:
		case p.Spec.PriorityClassName != "":
			pc := c.priorityClass(p.Spec.PriorityClassName)
			if pc == nil {
				return nil, 0, fmt.Errorf("pod %s: no PriorityClass with name %s was found (the API server would refuse the pod)", p.Name, p.Spec.PriorityClassName)
			}
			p.Spec.Priority = &pc.Value
		case p.Spec.Priority == nil:
			var value int32
			for _, pc := range c.PriorityClasses {
				if pc.GlobalDefault {
					value = pc.Value
				}
			}
			p.Spec.Priority = &value
		}
		if i == 0 || *p.Spec.Priority > priority {
			priority = *p.Spec.Priority
		}
		out.Members[i] = p
	}
	return &out, priority, nil
}

// plannedPlacement describes the planner's plan of the search.
func (c *Cluster) plannedPlacement(s *SearchReport, gang podgroup.Gang) *PlannedPlacement {
	plan := s.plan
	info, _ := c.snap.HyperNode(plan.Domain)
	out := &PlannedPlacement{Domain: plan.Domain, Tier: plan.Tier, Deferred: s.Deferred}
	if info != nil {
		out.TierName = info.TierName
	}
	for _, pods := range plan.LeafPods {
		if len(pods) > 0 {
			out.Leaves++
		}
	}
	for _, m := range gang.Pending {
		leaf, ok := plan.PodLeaf[m.Pod.Name]
		if !ok {
			continue // deferred
		}
		pm := PlannedMember{Pod: m.Pod.Name, Leaf: leaf, Node: plan.PodNode[m.Pod.Name]}
		if rank, ok := podgroup.Rank(m.Pod); ok {
			pm.Rank = &rank
		}
		out.Members = append(out.Members, pm)
	}
	out.MinLeaves = c.fewestLeaves(plan.Domain, s.capacity, len(out.Members))
	return out
}

// fewestLeaves is the fewest leaves of domain whose room (capacity) adds up to n members.
func (c *Cluster) fewestLeaves(domain string, capacity map[string]int, n int) int {
	leaves := c.snap.Leaves(domain)
	if domain == hypernode.VirtualRootName {
		leaves = append(leaves, placement.LooseLeaf)
	}
	holds := make([]int, 0, len(leaves))
	for _, l := range leaves {
		holds = append(holds, capacity[l])
	}
	sort.Sort(sort.Reverse(sort.IntSlice(holds)))
	sum := 0
	for i, h := range holds {
		if sum += h; sum >= n {
			return i + 1
		}
	}
	return len(holds)
}

// priorityClass is the PriorityClass of the read by name (nil when there is none).
func (c *Cluster) priorityClass(name string) *schedulingv1.PriorityClass {
	for _, pc := range c.PriorityClasses {
		if pc.Name == name {
			return pc
		}
	}
	return nil
}

// TierName is a HyperNode's tier name ("" and false for one the tree does not have).
func (c *Cluster) TierName(name string) (string, bool) {
	info, ok := c.snap.HyperNode(name)
	if !ok {
		return "", false
	}
	return info.TierName, true
}

// without returns a view of the cluster in which pods have left their nodes (their requests
// freed); the other nodes' state is shared.
func (c *Cluster) without(pods []*v1.Pod) *Cluster {
	out := *c
	out.nodes = maps.Clone(c.nodes)
	for _, p := range pods {
		n := out.nodes[p.Spec.NodeName]
		if n == nil || terminal(p) {
			continue
		}
		if n == c.nodes[p.Spec.NodeName] {
			cp := *n
			cp.requested = n.requested.DeepCopy()
			cp.pods = slices.Clone(n.pods)
			n = &cp
			out.nodes[p.Spec.NodeName] = n
		}
		for r, q := range podRequests(p) {
			cur := n.requested[r]
			cur.Sub(q)
			n.requested[r] = cur
		}
		n.pods = slices.DeleteFunc(n.pods, func(o *v1.Pod) bool { return o.UID == p.UID })
	}
	return &out
}
