package nodelabels

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const (
	tier1 = "hypernode.dev/tier-1"
	tier2 = "hypernode.dev/tier-2"
	tier3 = "hypernode.dev/tier-3"
)

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name    string
		current map[string]string
		record  string
		want    map[string]string
		change  Change
	}{
		{
			name:    "first publish",
			current: map[string]string{"kubernetes.io/hostname": "n0"},
			want:    map[string]string{tier1: "leaf-a", tier2: "spine-0"},
			change:  Change{Set: map[string]string{tier1: "leaf-a", tier2: "spine-0"}, Record: tier1 + "," + tier2, RecordChanged: true},
		},
		{
			name:    "already right",
			current: map[string]string{tier1: "leaf-a", tier2: "spine-0"},
			record:  tier1 + "," + tier2,
			want:    map[string]string{tier1: "leaf-a", tier2: "spine-0"},
			change:  Change{Record: tier1 + "," + tier2},
		},
		{
			name:    "moved to another leaf and spine",
			current: map[string]string{tier1: "leaf-a", tier2: "spine-0", tier3: "core"},
			record:  tier1 + "," + tier2 + "," + tier3,
			want:    map[string]string{tier1: "leaf-x", tier2: "spine-1", tier3: "core"},
			change:  Change{Set: map[string]string{tier1: "leaf-x", tier2: "spine-1"}, Record: tier1 + "," + tier2 + "," + tier3},
		},
		{
			name:    "a tier it is no longer under",
			current: map[string]string{tier1: "leaf-a", tier2: "spine-0"},
			record:  tier1 + "," + tier2,
			want:    map[string]string{tier1: "leaf-a"},
			change:  Change{Remove: []string{tier2}, Record: tier1, RecordChanged: true},
		},
		{
			name:    "out of every leaf",
			current: map[string]string{tier1: "leaf-a", tier2: "spine-0", "zone": "z1"},
			record:  tier1 + "," + tier2,
			change:  Change{Remove: []string{tier1, tier2}, RecordChanged: true},
		},
		{
			name:    "a label someone else wrote is neither overwritten nor removed",
			current: map[string]string{tier1: "theirs", tier3: "theirs-too"},
			want:    map[string]string{tier1: "leaf-a", tier2: "spine-0"},
			change:  Change{Set: map[string]string{tier2: "spine-0"}, Record: tier2, RecordChanged: true, NotOwned: []string{tier1, tier3}},
		},
		{
			name:    "a label of ours removed by someone is written again",
			current: map[string]string{tier2: "spine-0"},
			record:  tier1 + "," + tier2,
			want:    map[string]string{tier1: "leaf-a", tier2: "spine-0"},
			change:  Change{Set: map[string]string{tier1: "leaf-a"}, Record: tier1 + "," + tier2},
		},
		{
			name:    "a record entry that is not a tier label key is dropped, never acted on",
			current: map[string]string{"zone": "z1", tier1: "leaf-a"},
			record:  "zone, " + tier1,
			want:    map[string]string{tier1: "leaf-a"},
			change:  Change{Record: tier1, RecordChanged: true},
		},
		{
			name:    "record listing a label that is gone",
			current: map[string]string{},
			record:  tier1,
			change:  Change{RecordChanged: true},
		},
		{
			name:    "off: nothing was ours",
			current: map[string]string{tier1: "theirs"},
			change:  Change{NotOwned: []string{tier1}},
		},
		{
			name:    "tiers in numeric order in the record",
			current: map[string]string{},
			want:    map[string]string{"hypernode.dev/tier-10": "big", "hypernode.dev/tier-9": "mid"},
			change: Change{Set: map[string]string{"hypernode.dev/tier-10": "big", "hypernode.dev/tier-9": "mid"},
				Record: "hypernode.dev/tier-9,hypernode.dev/tier-10", RecordChanged: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Plan(tc.current, tc.record, tc.want)
			if diff := cmp.Diff(tc.change, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Plan (-want +got):\n%s", diff)
			}
			if got.Empty() != (len(tc.change.Set) == 0 && len(tc.change.Remove) == 0 && !tc.change.RecordChanged) {
				t.Errorf("Empty() = %v", got.Empty())
			}
		})
	}
}

func TestMergePatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change Change
		rv     string
		want   string
	}{
		{
			name:   "set, remove, record",
			change: Change{Set: map[string]string{tier1: "leaf-a"}, Remove: []string{tier2}, Record: tier1, RecordChanged: true},
			rv:     "42",
			want:   `{"metadata":{"annotations":{"hypernode.dev/tier-labels":"hypernode.dev/tier-1"},"labels":{"hypernode.dev/tier-1":"leaf-a","hypernode.dev/tier-2":null},"resourceVersion":"42"}}`,
		},
		{
			name:   "everything removed: the record too",
			change: Change{Remove: []string{tier1}, RecordChanged: true},
			want:   `{"metadata":{"annotations":{"hypernode.dev/tier-labels":null},"labels":{"hypernode.dev/tier-1":null}}}`,
		},
		{
			name:   "labels only",
			change: Change{Set: map[string]string{tier1: "leaf-a"}, Record: tier1},
			rv:     "7",
			want:   `{"metadata":{"labels":{"hypernode.dev/tier-1":"leaf-a"},"resourceVersion":"7"}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.change.MergePatch(tc.rv)
			if err != nil {
				t.Fatal(err)
			}
			var gotObj, wantObj any
			if err := json.Unmarshal(got, &gotObj); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.want), &wantObj); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantObj, gotObj); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
}
