package hypernode

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

func TestTierLabelKey(t *testing.T) {
	for _, tc := range []struct {
		key    string
		tier   int
		parsed bool
	}{
		{key: "hypernode.dev/tier-1", tier: 1, parsed: true},
		{key: "hypernode.dev/tier-0", tier: 0, parsed: true},
		{key: "hypernode.dev/tier-12", tier: 12, parsed: true},
		{key: "hypernode.dev/tier-01"},
		{key: "hypernode.dev/tier--1"},
		{key: "hypernode.dev/tier-+1"},
		{key: "hypernode.dev/tier-"},
		{key: "hypernode.dev/tier-1a"},
		{key: "hypernode.dev/tier-99999999999999999999"},
		{key: "hypernode.dev/tier-labels"},
		{key: "example.com/tier-1"},
		{key: "tier-1"},
	} {
		tier, ok := ParseTierLabelKey(tc.key)
		if ok != tc.parsed || tier != tc.tier {
			t.Errorf("ParseTierLabelKey(%q) = %d, %v; want %d, %v", tc.key, tier, ok, tc.tier, tc.parsed)
		}
		if tc.parsed {
			if got := TierLabelKey(tc.tier); got != tc.key {
				t.Errorf("TierLabelKey(%d) = %q, want %q", tc.tier, got, tc.key)
			}
			if errs := validation.IsQualifiedName(tc.key); len(errs) > 0 {
				t.Errorf("%q is not a valid label key: %v", tc.key, errs)
			}
		}
	}
}

func TestTierLabelValue(t *testing.T) {
	name63 := strings.Repeat("a", 62) + "b"
	name64 := strings.Repeat("a", 63) + "b"
	// A name of 253 characters, with dots, whose 52nd and 51st characters are '.' and '-':
	// both are trimmed from the cut.
	name253 := strings.Repeat("x", 50) + "-." + strings.Repeat("y", 201)
	for _, tc := range []struct {
		name, hyperNode, want string
	}{
		{name: "short", hyperNode: "leaf-1", want: "leaf-1"},
		{name: "with dots", hyperNode: "topograph.core-0.spine-1.leaf-5", want: "topograph.core-0.spine-1.leaf-5"},
		{name: "exactly 63 characters", hyperNode: name63, want: name63},
		{name: "64 characters", hyperNode: name64, want: strings.Repeat("a", 52) + "-" + "97aa7c540d"},
		{name: "253 characters, the cut ends in -.", hyperNode: name253, want: strings.Repeat("x", 50) + "-" + "c83b4e07ab"},
		{name: "long, with dots", hyperNode: "topograph." + strings.Repeat("core-0.", 10),
			want: "topograph.core-0.core-0.core-0.core-0.core-0.core-0" + "-" + "e5a86bd899"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := TierLabelValue(tc.hyperNode)
			if got != tc.want {
				t.Errorf("TierLabelValue(%q) = %q, want %q", tc.hyperNode, got, tc.want)
			}
			if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
				t.Errorf("%q is not a valid label value: %v", got, errs)
			}
		})
	}
	// Names that share their first 52 characters map to different values.
	a, b := TierLabelValue(name64), TierLabelValue(strings.Repeat("a", 63)+"c")
	if a == b {
		t.Errorf("two long names map to the same value %q", a)
	}
}

func TestTierLabels(t *testing.T) {
	nodes := map[string]labels.Set{"n0": {}, "n1": {}, "n2": {}, "n3": {}, "n4": {}, "n5": {}, "n6": {"rack": "r6"}}
	long := "spine." + strings.Repeat("s", 60)
	hns := []*topologyv1alpha1.HyperNode{
		hntesting.MakeHyperNode("leaf-a").Tier(1).Nodes("n0", "n1").Obj(),
		hntesting.MakeHyperNode("leaf-b").Tier(1).NodeRegex("^n2$").Obj(),
		hntesting.MakeHyperNode("leaf-rack").Tier(1).NodeLabels(map[string]string{"rack": "r6"}).Obj(),
		hntesting.MakeHyperNode(long).Tier(2).Children("leaf-a", "leaf-b").Obj(),
		hntesting.MakeHyperNode("core").Tier(3).Children(long).Obj(),
		// A leaf of tier 2 directly under the core: no tier-1 label.
		hntesting.MakeHyperNode("big-leaf").Tier(2).Nodes("n3").Obj(),
		hntesting.MakeHyperNode("core-b").Tier(3).Children("big-leaf").Obj(),
		// An invalid leaf (a regex that does not compile) and one under an invalid parent.
		hntesting.MakeHyperNode("bad-leaf").Tier(1).Nodes("n4").NodeRegex("([").Obj(),
		hntesting.MakeHyperNode("ok-leaf").Tier(1).Nodes("n5").Obj(),
		hntesting.MakeHyperNode("bad-parent").Tier(1).Children("ok-leaf").Obj(),
	}
	snap := Build(nodes, hns).Snapshot()
	got := map[string]map[string]string{}
	for n := range nodes {
		got[n] = snap.TierLabels(n)
	}
	want := map[string]map[string]string{
		"n0": {"hypernode.dev/tier-1": "leaf-a", "hypernode.dev/tier-2": TierLabelValue(long), "hypernode.dev/tier-3": "core"},
		"n1": {"hypernode.dev/tier-1": "leaf-a", "hypernode.dev/tier-2": TierLabelValue(long), "hypernode.dev/tier-3": "core"},
		"n2": {"hypernode.dev/tier-1": "leaf-b", "hypernode.dev/tier-2": TierLabelValue(long), "hypernode.dev/tier-3": "core"},
		"n3": {"hypernode.dev/tier-2": "big-leaf", "hypernode.dev/tier-3": "core-b"},
		"n4": nil,
		"n5": nil,
		"n6": {"hypernode.dev/tier-1": "leaf-rack"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tier labels (-want +got):\n%s", diff)
	}
	if v := TierLabelValue(long); v == long || len(v) > 63 {
		t.Errorf("the long spine name maps to %q", v)
	}
}

// TestIsLabelValue: the fast check agrees with the API's validation.
func TestIsLabelValue(t *testing.T) {
	for _, s := range []string{"", "a", "A-b_c.d", "-a", "a-", "a.", "_a", "a b", "a/b", "é", strings.Repeat("a", 63), strings.Repeat("a", 64), "0", "a..b"} {
		if got, want := isLabelValue(s), len(validation.IsValidLabelValue(s)) == 0; got != want {
			t.Errorf("isLabelValue(%q) = %v, the API says %v", s, got, want)
		}
	}
}
