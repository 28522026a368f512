package podgroup

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// HoldAfterAnnotation on a PodGroup overrides when its gang, unable to be placed, holds a
// network domain for itself (GangArgs.hold.waitSeconds): a duration such as "90s" or "5m"
// ("0s": at once), or "never".
const HoldAfterAnnotation = "hypernode.dev/hold-after"

// HoldAnnotation on a PodGroup is the scheduler's record of the domain it holds for the gang
// (HoldRecord, JSON): a new leader or a restarted scheduler continues the same hold from it.
// Only the scheduler writes it.
const HoldAnnotation = "hypernode.dev/hold"

// HoldAfterNever is the HoldAfterAnnotation value that turns holds off for the gang.
const HoldAfterNever = "never"

// HoldAfter is a PodGroup's parsed HoldAfterAnnotation.
type HoldAfter struct {
	// Set says the annotation is present; Never that it turns holds off; otherwise Wait is
	// how old the PodGroup must be before its gang holds.
	Set   bool
	Never bool
	Wait  time.Duration
}

// ParseHoldAfter reads a PodGroup's HoldAfterAnnotation. Bad input is an error that names the
// field, never a silent default.
func ParseHoldAfter(annotations map[string]string) (HoldAfter, error) {
	raw, ok := annotations[HoldAfterAnnotation]
	if !ok {
		return HoldAfter{}, nil
	}
	path := field.NewPath("metadata", "annotations").Key(HoldAfterAnnotation)
	if strings.TrimSpace(raw) == HoldAfterNever {
		return HoldAfter{Set: true, Never: true}, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(raw))
	if err != nil || d < 0 {
		return HoldAfter{}, field.Invalid(path, raw, `must be a duration of 0s or more, such as "90s" or "5m", or "never"`)
	}
	return HoldAfter{Set: true, Wait: d}, nil
}

// HoldRecord is what HoldAnnotation records of a hold: enough for a new scheduler process to
// go on holding the same nodes, with the same precedence, since the same time.
type HoldRecord struct {
	// Domain is the HyperNode held ("" for a gang without a topology constraint, which holds
	// a set of nodes of the cluster), at Tier (0 without a HyperNode).
	Domain string `json:"domain,omitempty"`
	Tier   int    `json:"tier,omitempty"`
	// Nodes are the nodes whose room the gang needs.
	Nodes []string `json:"nodes"`
	// Priority is the gang's priority when the hold began: the pods that come after the gang
	// in queue order are those of lower priority, or of equal priority and younger.
	Priority int32 `json:"priority"`
	// Since is when the hold began.
	Since time.Time `json:"since"`
}

// ParseHoldRecord reads a PodGroup's HoldAnnotation (nil without one).
func ParseHoldRecord(annotations map[string]string) (*HoldRecord, error) {
	raw, ok := annotations[HoldAnnotation]
	if !ok {
		return nil, nil
	}
	r := &HoldRecord{}
	if err := json.Unmarshal([]byte(raw), r); err != nil {
		return nil, fmt.Errorf("annotation %s: %v", HoldAnnotation, err)
	}
	if len(r.Nodes) == 0 || r.Since.IsZero() {
		return nil, fmt.Errorf("annotation %s: a hold names its nodes and when it began", HoldAnnotation)
	}
	return r, nil
}

// Encode is the record as HoldAnnotation's value.
func (r *HoldRecord) Encode() string {
	out, _ := json.Marshal(r) // a struct of strings, numbers and a time: cannot fail
	return string(out)
}
