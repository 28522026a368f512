package podgroup

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// NetworkTopologyAnnotation on a PodGroup holds the job's network topology constraint, in the
// shape of Volcano's networkTopology: {"mode":"hard"|"soft","highestTierAllowed":N} or
// {"mode":...,"highestTierName":"spine"}.
const NetworkTopologyAnnotation = "hypernode.dev/network-topology"

// RankAnnotation gives a member its rank when it has no Job completion index.
const RankAnnotation = "hypernode.dev/rank"

// TopologyMode is hard (never cross the allowed tier) or soft (prefer small domains, still run).
type TopologyMode string

const (
	ModeHard TopologyMode = "hard"
	ModeSoft TopologyMode = "soft"
)

// NetworkTopology is a parsed, validated constraint. The tier name is resolved against the
// HyperNode tree when the gang is planned.
type NetworkTopology struct {
	Mode               TopologyMode `json:"mode,omitempty"`
	HighestTierAllowed *int         `json:"highestTierAllowed,omitempty"`
	HighestTierName    string       `json:"highestTierName,omitempty"`
}

// ParseNetworkTopology reads the constraint of a PodGroup. It returns nil without the
// annotation, and an error that names the annotation and the problem for bad input: a
// constraint is never silently dropped.
func ParseNetworkTopology(annotations map[string]string) (*NetworkTopology, error) {
	raw, ok := annotations[NetworkTopologyAnnotation]
	if !ok {
		return nil, nil
	}
	nt, err := ParseTopology(raw)
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", NetworkTopologyAnnotation, err)
	}
	return nt, nil
}

// ParseTopology reads a constraint in the annotation's JSON shape, strictly.
func ParseTopology(raw string) (*NetworkTopology, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	nt := &NetworkTopology{}
	if err := dec.Decode(nt); err != nil {
		return nil, fmt.Errorf("is not a valid constraint: %v", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("is not a valid constraint: trailing data after the JSON object")
	}
	return validateTopology(*nt)
}

// validateTopology defaults the mode and checks a constraint's fields.
func validateTopology(nt NetworkTopology) (*NetworkTopology, error) {
	switch nt.Mode {
	case "":
		nt.Mode = ModeHard
	case ModeHard, ModeSoft:
	default:
		return nil, fmt.Errorf("mode %q is not supported: use %q or %q", nt.Mode, ModeHard, ModeSoft)
	}
	if nt.HighestTierAllowed != nil && nt.HighestTierName != "" {
		return nil, fmt.Errorf("set only one of highestTierAllowed and highestTierName")
	}
	if nt.HighestTierAllowed != nil && *nt.HighestTierAllowed < 1 {
		return nil, fmt.Errorf("highestTierAllowed must be at least 1, got %d", *nt.HighestTierAllowed)
	}
	if nt.Mode == ModeHard && nt.HighestTierAllowed == nil && nt.HighestTierName == "" {
		return nil, fmt.Errorf("mode hard needs highestTierAllowed or highestTierName")
	}
	return &nt, nil
}

// String renders the constraint for messages, e.g. "hard topology (tier<=2)".
func (nt *NetworkTopology) String() string {
	switch {
	case nt.HighestTierAllowed != nil:
		return fmt.Sprintf("%s topology (tier<=%d)", nt.Mode, *nt.HighestTierAllowed)
	case nt.HighestTierName != "":
		return fmt.Sprintf("%s topology (tier<=%s)", nt.Mode, nt.HighestTierName)
	}
	return fmt.Sprintf("%s topology", nt.Mode)
}

// Rank returns a member's rank: the Job completion index, else the hypernode.dev/rank
// annotation; ok is false when neither is a number.
func Rank(pod *v1.Pod) (int, bool) {
	for _, v := range []string{
		pod.Labels["batch.kubernetes.io/job-completion-index"],
		pod.Annotations["batch.kubernetes.io/job-completion-index"],
		pod.Annotations[RankAnnotation],
	} {
		if v == "" {
			continue
		}
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			return n, true
		}
	}
	return 0, false
}

// PlacedByTopology reports whether the gang has a network topology constraint, of the job or
// of a sub-group policy, valid or not: NetworkTopologyAware then plans it (or refuses it) as
// a whole. A gang without one is placed member by member.
func (i Info) PlacedByTopology() bool {
	if i.Topology != nil || i.TopologyErr != nil {
		return true
	}
	for _, sp := range i.SubGroupPolicies {
		if sp.NetworkTopology != nil {
			return true
		}
	}
	return false
}
