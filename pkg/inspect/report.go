package inspect

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/placement"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// Gang states of an Explanation.
const (
	StatusPlaced          = "Placed"          // every member is bound
	StatusPartiallyPlaced = "PartiallyPlaced" // some members are bound, some pending
	StatusPending         = "Pending"         // no member is bound
	StatusNoMembers       = "NoMembers"       // the PodGroup has no live member pod
)

// How many candidates per tier, pods per condition message and Events an explanation keeps.
const (
	candidatesShown = 3
	podsNamed       = 3
	eventsShown     = 10
)

// Explanation says what a gang needs and where it is or why it is not placed.
type Explanation struct {
	PodGroup string `json:"podGroup"`
	// API is the pod group's API when it is Kubernetes' own (NativeAPI); empty for a
	// scheduler-plugins PodGroup.
	API string `json:"api,omitempty"`
	// Resource is the resource of the capacity figures (the gang's own request of it, and
	// of cpu and memory, is in Request).
	Resource string `json:"resource"`
	Status   string `json:"status"`
	// Phase is the PodGroup's status.phase, as its controller last wrote it.
	Phase     string       `json:"phase,omitempty"`
	MinMember int32        `json:"minMember"`
	Members   MemberCounts `json:"members"`
	// Request is what one member requests, taken from RequestFrom (the first pending member
	// by rank, else the first member): the shape the scheduler plans the gang with.
	Request     []ResourceAmount `json:"request,omitempty"`
	RequestFrom string           `json:"requestFrom,omitempty"`
	// Shapes lists the pending members by shape when they differ (a launcher and its
	// workers): the scheduler then plans every shape, not RequestFrom's alone.
	Shapes          []ShapeReport     `json:"shapes,omitempty"`
	NetworkTopology *ConstraintReport `json:"networkTopology,omitempty"`
	SubGroups       *SubGroupsReport  `json:"subGroups,omitempty"`
	// Placement is where the bound members are (nil when none is).
	Placement *PlacementReport `json:"placement,omitempty"`
	// Search is the analysis of where the pending members could go (nil when none is pending).
	Search *SearchReport `json:"search,omitempty"`
	// Hold is the domain the scheduler holds for the gang (nil when none), from the
	// PodGroup's record; HoldError says why the record or the hold-after annotation is
	// unusable.
	Hold      *HoldReport     `json:"hold,omitempty"`
	HoldError string          `json:"holdError,omitempty"`
	Scheduler SchedulerReport `json:"scheduler"`
	Warnings  []string        `json:"warnings,omitempty"`
}

// HoldReport is a domain the scheduler holds for a waiting gang, as the PodGroup records it:
// pods after the gang in queue order do not take the room it needs there.
type HoldReport struct {
	PodGroup string `json:"podGroup"`
	// Domain is the HyperNode held, at Tier ("" for nodes of the whole cluster).
	Domain string   `json:"domain,omitempty"`
	Tier   int      `json:"tier,omitempty"`
	Nodes  []string `json:"nodes"`
	// Priority is the gang's priority the hold keeps lower (and equal, younger) pods below.
	Priority int32     `json:"priority"`
	Since    time.Time `json:"since"`
	Age      string    `json:"age"`
}

// ShapeReport is one shape of a gang's pending members.
type ShapeReport struct {
	// Name is the shape's requests, e.g. "cpu=1,nvidia.com/gpu=8"; Example one member of it.
	Name    string `json:"name"`
	Pods    int    `json:"pods"`
	Example string `json:"example"`
}

// MemberCounts counts the member pods of a gang.
type MemberCounts struct {
	// Seen are the live members (not finished, not being deleted); Bound and Pending split them.
	Seen    int `json:"seen"`
	Bound   int `json:"bound"`
	Pending int `json:"pending"`
	// Finished members (Succeeded or Failed) and Terminating ones are not in Seen.
	Finished    int `json:"finished,omitempty"`
	Terminating int `json:"terminating,omitempty"`
}

// ResourceAmount is an amount of one resource.
type ResourceAmount struct {
	Resource string            `json:"resource"`
	Amount   resource.Quantity `json:"amount"`
}

// ConstraintReport is the gang's network-topology annotation, parsed as the scheduler does.
type ConstraintReport struct {
	Annotation string `json:"annotation"`
	// TopologyKey is a native pod group's schedulingConstraints topology key when the
	// constraint comes from it (a tier label: hard at that tier); Annotation is then empty.
	TopologyKey string                    `json:"topologyKey,omitempty"`
	Parsed      *podgroup.NetworkTopology `json:"parsed,omitempty"`
	// Default: the PodGroup says nothing of topology and the constraint is the scheduler's
	// default (--default-network-topology); Annotation is then empty.
	Default bool `json:"default,omitempty"`
	// Description is the scheduler's wording, e.g. "hard topology (tier<=2)".
	Description string `json:"description,omitempty"`
	// MaxTier is the highest tier the gang may span, resolved against the tree.
	MaxTier int    `json:"maxTier,omitempty"`
	Error   string `json:"error,omitempty"`
}

// SubGroupsReport is the gang's sub-group policy annotation and its sub-groups.
type SubGroupsReport struct {
	Annotation string                 `json:"annotation"`
	Error      string                 `json:"error,omitempty"`
	Policies   []SubGroupPolicyReport `json:"policies,omitempty"`
	Groups     []SubGroupReport       `json:"groups,omitempty"`
	// Ungrouped counts the live members in no sub-group (the job's default group).
	Ungrouped int `json:"ungrouped"`
}

// SubGroupPolicyReport is one parsed policy.
type SubGroupPolicyReport struct {
	Name         string `json:"name"`
	SubGroupSize int32  `json:"subGroupSize"`
	MinSubGroups int32  `json:"minSubGroups"`
	// Constraint is the policy's own constraint ("" when it has none and follows the job's).
	Constraint string `json:"constraint,omitempty"`
}

// SubGroupReport is one sub-group and its live members.
type SubGroupReport struct {
	ID      string `json:"id"`
	Policy  string `json:"policy"`
	Size    int32  `json:"size"`
	Members int    `json:"members"`
	Bound   int    `json:"bound"`
	Pending int    `json:"pending"`
}

// PlacementReport is where the bound members are.
type PlacementReport struct {
	// Domain is the lowest HyperNode holding every bound member (the virtual root when they
	// span the cluster or sit on nodes in no usable HyperNode), Tier and TierName its tier.
	Domain   string       `json:"domain"`
	Tier     int          `json:"tier"`
	TierName string       `json:"tierName,omitempty"`
	Pods     int          `json:"pods"`
	Nodes    int          `json:"nodes"`
	Tree     PlacedDomain `json:"tree"`
}

// PlacedDomain is a HyperNode of a placement with the bound members below it.
type PlacedDomain struct {
	Name     string         `json:"name"`
	Tier     int            `json:"tier,omitempty"`
	TierName string         `json:"tierName,omitempty"`
	Children []PlacedDomain `json:"children,omitempty"`
	Nodes    []PlacedNode   `json:"nodes,omitempty"`
}

// PlacedNode is a node and the gang's pods bound to it.
type PlacedNode struct {
	Node string   `json:"node"`
	Pods []string `json:"pods"`
}

// SearchReport is where the pending members could go now.
type SearchReport struct {
	// Demand is the number of pending members to place together.
	Demand int `json:"demand"`
	// MaxTier is the highest tier the gang may span (the whole cluster's tier when it has no
	// tier of its own); Soft is true when it is a preference.
	MaxTier int  `json:"maxTier"`
	Soft    bool `json:"soft,omitempty"`
	// PlacedIn is the lowest HyperNode of the bound members, which every candidate must
	// contain ("" when none is bound).
	PlacedIn string       `json:"placedIn,omitempty"`
	Tiers    []TierReport `json:"tiers"`
	// NotCounted are requested resources that only DRA provides: capacity leaves them out
	// (the scheduler's DRA simulation decides where they fit).
	NotCounted []string `json:"notCounted,omitempty"`
	// UnusableNodes are the nodes that can take no member, with the reason.
	UnusableNodes []NodeReason `json:"unusableNodes,omitempty"`
	// Verdict is the planner's answer on this data: where it would place the members, or
	// its refusal in the scheduler's words.
	Verdict string `json:"verdict"`
	// Fits is true when the planner finds a place on this data.
	Fits bool `json:"fits"`
	// Deferred counts the pending members that place leaves out to wait for room, because
	// the job can run without them (an elastic gang, sub-groups beyond minSubGroups).
	Deferred int `json:"deferred,omitempty"`

	// plan is the planner's plan (nil when it places nothing), capacity the members each
	// HyperNode holds and in the input they were counted from: what plan reports from.
	plan     *placement.Plan
	capacity map[string]int
	in       searchInput
	// heldBack: the scheduler holds the members back before it plans.
	heldBack bool
}

// TierReport is the best candidates of one tier.
type TierReport struct {
	Tier     int    `json:"tier"`
	TierName string `json:"tierName,omitempty"`
	// Allowed is false for the tier shown above the constraint's, for context.
	Allowed    bool              `json:"allowed"`
	Candidates []CandidateReport `json:"candidates"`
	// More counts the candidates not listed.
	More int `json:"more,omitempty"`
}

// CandidateReport is one HyperNode and how many pending members it can hold.
type CandidateReport struct {
	Name  string `json:"name"`
	Holds int    `json:"holds"`
	Needs int    `json:"needs"`
	Fits  bool   `json:"fits"`
	// Reason says, in words, why it fails (or that it fits).
	Reason string `json:"reason"`
}

// NodeReason is a node and why it takes no member.
type NodeReason struct {
	Node   string `json:"node"`
	Reason string `json:"reason"`
}

// SchedulerReport is what the scheduler itself said last.
type SchedulerReport struct {
	// Conditions are the pending members' PodScheduled=False conditions, one per distinct
	// reason and message.
	Conditions []ConditionReport `json:"conditions,omitempty"`
	// Events are the latest Events on the PodGroup and its members, newest first, except
	// the members' Scheduled Events (the placement shows the same).
	Events []EventReport `json:"events,omitempty"`
}

// ConditionReport is a PodScheduled condition shared by some members.
type ConditionReport struct {
	Pods    []string `json:"pods"`
	Reason  string   `json:"reason"`
	Message string   `json:"message"`
}

// EventReport is one Event.
type EventReport struct {
	// Object is Kind/name of the object the Event is about.
	Object   string    `json:"object"`
	Type     string    `json:"type"`
	Reason   string    `json:"reason"`
	Message  string    `json:"message"`
	Count    int32     `json:"count,omitempty"`
	LastSeen time.Time `json:"lastSeen"`
	// Age is LastSeen relative to the time the cluster was read, e.g. "5m".
	Age string `json:"age"`
}
