package nodelabels

import (
	"encoding/json"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
)

// Change is what one node needs so that its tier labels are the wanted ones, without
// touching a label the controller did not write.
type Change struct {
	// Set are the labels to write: wanted ones that are absent or have another value.
	Set map[string]string
	// Remove are labels the controller wrote that no longer apply, sorted.
	Remove []string
	// Record is the new value of hypernode.TierLabelsAnnotation ("" removes it), and
	// RecordChanged whether it differs from the node's.
	Record        string
	RecordChanged bool
	// NotOwned are the tier labels on the node that the controller did not write (they are
	// not in the record), sorted: left as they are, and not published over.
	NotOwned []string
}

// Empty reports whether the node is already right.
func (c Change) Empty() bool {
	return len(c.Set) == 0 && len(c.Remove) == 0 && !c.RecordChanged
}

// Plan compares a node's labels and ownership record (the value of
// hypernode.TierLabelsAnnotation) with the tier labels it should have (nil: none, which is
// also how publishing off removes every label the controller wrote).
func Plan(current map[string]string, record string, want map[string]string) Change {
	owned := ParseRecord(record)
	var c Change
	for key := range current {
		if _, ok := hypernode.ParseTierLabelKey(key); ok && !owned.Has(key) {
			c.NotOwned = append(c.NotOwned, key)
		}
	}
	slices.Sort(c.NotOwned)
	keep := sets.New[string]()
	for key, value := range want {
		if slices.Contains(c.NotOwned, key) {
			continue
		}
		keep.Insert(key)
		if v, ok := current[key]; !ok || v != value {
			if c.Set == nil {
				c.Set = map[string]string{}
			}
			c.Set[key] = value
		}
	}
	for key := range owned {
		if _, present := current[key]; present && !keep.Has(key) {
			c.Remove = append(c.Remove, key)
		}
	}
	slices.Sort(c.Remove)
	c.Record = FormatRecord(keep)
	c.RecordChanged = c.Record != record
	return c
}

// ParseRecord returns the tier label keys an ownership record lists. Entries that are not
// tier label keys are ignored: the record cannot make the controller touch other labels.
func ParseRecord(record string) sets.Set[string] {
	out := sets.New[string]()
	for key := range strings.SplitSeq(record, ",") {
		key = strings.TrimSpace(key)
		if _, ok := hypernode.ParseTierLabelKey(key); ok {
			out.Insert(key)
		}
	}
	return out
}

// FormatRecord renders tier label keys as an ownership record, in tier order:
// "hypernode.dev/tier-1,hypernode.dev/tier-2".
func FormatRecord(keys sets.Set[string]) string {
	sorted := sets.List(keys)
	slices.SortFunc(sorted, func(a, b string) int {
		ta, _ := hypernode.ParseTierLabelKey(a)
		tb, _ := hypernode.ParseTierLabelKey(b)
		return ta - tb
	})
	return strings.Join(sorted, ",")
}

// MergePatch renders the change as a JSON merge patch of the node's labels and record, with
// resourceVersion as a precondition when it is not empty: the change was computed from that
// version, and a label someone else wrote since must not be overwritten.
func (c Change) MergePatch(resourceVersion string) ([]byte, error) {
	meta := map[string]any{}
	if resourceVersion != "" {
		meta["resourceVersion"] = resourceVersion
	}
	if len(c.Set)+len(c.Remove) > 0 {
		labels := map[string]any{}
		for k, v := range c.Set {
			labels[k] = v
		}
		for _, k := range c.Remove {
			labels[k] = nil
		}
		meta["labels"] = labels
	}
	if c.RecordChanged {
		var record any
		if c.Record != "" {
			record = c.Record
		}
		meta["annotations"] = map[string]any{hypernode.TierLabelsAnnotation: record}
	}
	return json.Marshal(map[string]any{"metadata": meta})
}
