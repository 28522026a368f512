package source

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestName(t *testing.T) {
	long := strings.Repeat("switch", 10) // 60 characters, a valid DNS label
	for _, tc := range []struct {
		name       string
		prefix     string
		components []string
		// want is the exact name; wantBase, when set, is the name without its hash suffix.
		want, wantBase string
	}{
		{name: "valid components are joined", prefix: "fabric", components: []string{"core-0", "spine-1", "leaf-3"}, want: "fabric.core-0.spine-1.leaf-3"},
		{name: "one component", prefix: "gke", components: []string{"block-7"}, want: "gke.block-7"},
		{name: "upper case is hashed", prefix: "fabric", components: []string{"Spine1", "Leaf3"}, wantBase: "fabric.leaf3"},
		{name: "a dot in a value is hashed", prefix: "nvlink", components: []string{"9f1c.17"}, wantBase: "nvlink.9f1c-17"},
		{name: "an empty value is hashed", prefix: "fabric", components: []string{"spine-1", ""}, wantBase: "fabric.x"},
		{name: "too long is hashed and cut", prefix: "fabric", components: []string{"core", long}, wantBase: "fabric." + long[:45]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Name(tc.prefix, tc.components...)
			if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 || len(got) > MaxNameLength {
				t.Fatalf("Name(%q, %q) = %q is not a valid name of at most %d characters: %v", tc.prefix, tc.components, got, MaxNameLength, errs)
			}
			if tc.want != "" {
				if got != tc.want {
					t.Errorf("Name(%q, %q) = %q, want %q", tc.prefix, tc.components, got, tc.want)
				}
				return
			}
			cut := len(got) - hashLength - 1
			if cut < 0 || got[cut] != '-' || strings.Trim(got[cut+1:], "0123456789abcdef") != "" {
				t.Fatalf("Name(%q, %q) = %q has no hash suffix", tc.prefix, tc.components, got)
			}
			if diff := cmp.Diff(tc.wantBase, got[:cut]); diff != "" {
				t.Errorf("Name(%q, %q) = %q (-want,+got base):\n%s", tc.prefix, tc.components, got, diff)
			}
		})
	}
}

// TestNameKeysFullPath: the same switch under two spines is two HyperNodes, and the name is
// a function of the path alone.
func TestNameKeysFullPath(t *testing.T) {
	pairs := [][2][]string{
		{{"spine-1", "leaf-3"}, {"spine-2", "leaf-3"}},
		{{"Spine1", "Leaf3"}, {"Spine2", "Leaf3"}},
		{{"a.b", "c"}, {"a", "b.c"}},
		{{"a", ""}, {"a"}},
		{{"x", "Y"}, {"x", "y"}},
	}
	for _, p := range pairs {
		a, b := Name("t", p[0]...), Name("t", p[1]...)
		if a == b {
			t.Errorf("paths %q and %q both map to %q", p[0], p[1], a)
		}
		if again := Name("t", p[0]...); again != a {
			t.Errorf("Name is not deterministic: %q then %q", a, again)
		}
	}
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"Leaf_03":                 "leaf-03",
		"--a..b--":                "a-b",
		"":                        "x",
		"ÄÖ":                      "x",
		"9f1c2e4a.17":             "9f1c2e4a-17",
		strings.Repeat("a", 70):   strings.Repeat("a", 63),
		"MF0;sw-ib-01:MQM8700/U1": "mf0-sw-ib-01-mqm8700-u1",
	} {
		if got := Sanitize(in); got != want {
			t.Errorf("Sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}
