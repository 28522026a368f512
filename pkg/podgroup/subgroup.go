package podgroup

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// SubGroupPolicyAnnotation on a PodGroup splits its members into sub-groups (partitions), in
// the shape of Volcano's subGroupPolicy: a JSON list of policies.
const SubGroupPolicyAnnotation = "hypernode.dev/subgroup-policy"

// SubGroupPolicy is one policy of the annotation.
type SubGroupPolicy struct {
	// Name names the policy; a sub-group's id is <name>-<values of matchLabelKeys>.
	Name string `json:"name"`
	// SubGroupSize is how many members make one complete sub-group (all or nothing).
	SubGroupSize int32 `json:"subGroupSize"`
	// MinSubGroups is how many complete sub-groups of this policy the job needs.
	MinSubGroups int32 `json:"minSubGroups,omitempty"`
	// LabelSelector selects the members this policy applies to (all members when unset).
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// MatchLabelKeys are the pod labels whose values identify a member's sub-group.
	MatchLabelKeys []string `json:"matchLabelKeys,omitempty"`
	// PartitionSize derives the sub-group from the member's rank (Job completion index or
	// hypernode.dev/rank) divided by it, for jobs that only know indexes.
	PartitionSize *int32 `json:"partitionSize,omitempty"`
	// NetworkTopology is the sub-group's own constraint, inside the job's domain.
	NetworkTopology *NetworkTopology `json:"networkTopology,omitempty"`

	selector labels.Selector
}

// SubGroup identifies a member's sub-group: its policy and id ("" for the job's default group).
type SubGroup struct {
	Policy string
	ID     string
	// Index orders sub-groups: the first matchLabelKeys value (or the partition number) when
	// it is a number, else -1.
	Index int
}

// ParseSubGroupPolicies reads the sub-group policies of a PodGroup. job is the PodGroup's own
// constraint (nil: none): a sub-group may not allow a higher tier than the job. It returns nil
// without the annotation and an error naming the annotation and the problem for bad input.
func ParseSubGroupPolicies(annotations map[string]string, job *NetworkTopology) ([]SubGroupPolicy, error) {
	raw, ok := annotations[SubGroupPolicyAnnotation]
	if !ok {
		return nil, nil
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("annotation %s: %s", SubGroupPolicyAnnotation, fmt.Sprintf(format, args...))
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	var policies []SubGroupPolicy
	if err := dec.Decode(&policies); err != nil {
		return nil, fail("is not a valid policy list: %v", err)
	}
	if len(policies) == 0 {
		return nil, fail("lists no policy")
	}
	seen := map[string]bool{}
	for i := range policies {
		p := &policies[i]
		switch {
		case p.Name == "":
			return nil, fail("policy %d has no name", i)
		case seen[p.Name]:
			return nil, fail("policy name %q is used twice", p.Name)
		case p.SubGroupSize < 1:
			return nil, fail("policy %q: subGroupSize must be at least 1, got %d", p.Name, p.SubGroupSize)
		case p.MinSubGroups < 0:
			return nil, fail("policy %q: minSubGroups must not be negative, got %d", p.Name, p.MinSubGroups)
		case p.PartitionSize != nil && *p.PartitionSize < 1:
			return nil, fail("policy %q: partitionSize must be at least 1, got %d", p.Name, *p.PartitionSize)
		case p.PartitionSize != nil && len(p.MatchLabelKeys) > 0:
			return nil, fail("policy %q: set only one of partitionSize and matchLabelKeys", p.Name)
		case p.PartitionSize == nil && len(p.MatchLabelKeys) == 0:
			return nil, fail("policy %q: set matchLabelKeys or partitionSize to say which members form a sub-group", p.Name)
		}
		seen[p.Name] = true
		p.selector = labels.Everything()
		if p.LabelSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(p.LabelSelector)
			if err != nil {
				return nil, fail("policy %q: labelSelector: %v", p.Name, err)
			}
			p.selector = sel
		}
		if p.NetworkTopology != nil {
			nt, err := validateTopology(*p.NetworkTopology)
			if err != nil {
				return nil, fail("policy %q: networkTopology: %v", p.Name, err)
			}
			p.NetworkTopology = nt
			if job != nil && job.HighestTierAllowed != nil && nt.HighestTierAllowed != nil && *nt.HighestTierAllowed > *job.HighestTierAllowed {
				return nil, fail("policy %q: highestTierAllowed %d is above the job's %d", p.Name, *nt.HighestTierAllowed, *job.HighestTierAllowed)
			}
		}
	}
	return policies, nil
}

// SubGroupOf returns the sub-group of a member: the first policy whose selector matches and
// whose keys (or rank) the member has. ok is false for the job's default group.
func SubGroupOf(policies []SubGroupPolicy, pod *v1.Pod) (SubGroup, bool) {
	for _, p := range policies {
		if !p.selector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		if p.PartitionSize != nil {
			rank, ok := Rank(pod)
			if !ok {
				continue
			}
			n := rank / int(*p.PartitionSize)
			return SubGroup{Policy: p.Name, ID: fmt.Sprintf("%s-%d", p.Name, n), Index: n}, true
		}
		values := make([]string, 0, len(p.MatchLabelKeys))
		complete := true
		for _, k := range p.MatchLabelKeys {
			v, ok := pod.Labels[k]
			if !ok {
				complete = false
				break
			}
			values = append(values, v)
		}
		if !complete {
			continue
		}
		index := -1
		if n, err := strconv.Atoi(values[0]); err == nil {
			index = n
		}
		return SubGroup{Policy: p.Name, ID: p.Name + "-" + strings.Join(values, "-"), Index: index}, true
	}
	return SubGroup{}, false
}

// SortSubGroups orders sub-groups by index ascending, then by id: the order in which they are
// planned (docs/design.md, "Sub-groups").
func SortSubGroups(groups []SubGroup) {
	sort.Slice(groups, func(i, j int) bool {
		if groups[i].Index != groups[j].Index {
			return groups[i].Index < groups[j].Index
		}
		return groups[i].ID < groups[j].ID
	})
}

// SubGroupMembershipProblem says why a member whose labels match a policy's selector is in no
// sub-group: it lacks a label of the policy's matchLabelKeys, or the rank its partitionSize
// needs. "" when the member is in a sub-group or no policy selects it. Such a member is
// reported, never silently put in the job's default group.
func SubGroupMembershipProblem(policies []SubGroupPolicy, pod *v1.Pod) string {
	if _, ok := SubGroupOf(policies, pod); ok {
		return ""
	}
	for _, p := range policies {
		if !p.selector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		if p.PartitionSize != nil {
			return fmt.Sprintf("sub-group policy %q needs its rank (label batch.kubernetes.io/job-completion-index or annotation %s), which it does not have", p.Name, RankAnnotation)
		}
		var missing []string
		for _, k := range p.MatchLabelKeys {
			if _, ok := pod.Labels[k]; !ok {
				missing = append(missing, k)
			}
		}
		return fmt.Sprintf("sub-group policy %q needs its label(s) %s, which it does not have", p.Name, strings.Join(missing, ", "))
	}
	return ""
}
