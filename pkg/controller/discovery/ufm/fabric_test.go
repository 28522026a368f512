package ufm

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/ufm/ufmtest"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
)

// ports converts mock records to the source's records.
func ports(in []ufmtest.Port) []Port {
	out := make([]Port, len(in))
	for i, p := range in {
		out[i] = Port{Description: p.Description, SystemName: p.SystemName, PeerNodeName: p.PeerNodeName}
	}
	return out
}

// render writes HyperNodes one per line: name, tier, tierName, members.
func render(hns []*topologyv1alpha1.HyperNode) []string {
	var out []string
	for _, hn := range hns {
		var members []string
		for _, m := range hn.Spec.Members {
			members = append(members, m.Selector.ExactMatch.Name)
		}
		out = append(out, fmt.Sprintf("%s %d %s [%s]", hn.Name, hn.Spec.Tier, hn.Spec.TierName, strings.Join(members, " ")))
	}
	return out
}

func identity(h string) (string, bool) { return h, true }

func TestFabricHyperNodes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ports []ufmtest.Port
		want  []string
	}{
		{
			// Volcano's own test data: hosts on 4 and on 3-4 leaves, no switch ports.
			name: "rails without switch ports: leaf groups under one fabric, as Volcano",
			ports: func() []ufmtest.Port {
				var p []ufmtest.Port
				for n := range 4 {
					for l := range 4 {
						p = append(p, ufmtest.HostPort(fmt.Sprintf("node%d", n), fmt.Sprintf("leaf%d", l)))
					}
				}
				for n := 4; n < 8; n++ {
					for l := 4; l < 8; l++ {
						if n == 4 && l == 7 || n == 7 && l == 7 {
							continue
						}
						p = append(p, ufmtest.HostPort(fmt.Sprintf("node%d", n), fmt.Sprintf("leaf%d", l)))
					}
				}
				return p
			}(),
			want: []string{
				"ufm-leaf.leaf0 1 leaf [node0 node1 node2 node3]",
				"ufm-leaf.leaf4 1 leaf [node4 node5 node6 node7]",
				"ufm-spine.all 2 spine [ufm-leaf.leaf0 ufm-leaf.leaf4]",
			},
		},
		{
			name:  "two tiers: leaves under the same spines",
			ports: ufmtest.FatTree(1, 3, 2, 2, 0),
			want: []string{
				"ufm-leaf.leaf-0-0 1 leaf [host-0-0-0 host-0-0-1]",
				"ufm-leaf.leaf-0-1 1 leaf [host-0-1-0 host-0-1-1]",
				"ufm-leaf.leaf-0-2 1 leaf [host-0-2-0 host-0-2-1]",
				"ufm-spine.spine-0-0 2 spine [ufm-leaf.leaf-0-0 ufm-leaf.leaf-0-1 ufm-leaf.leaf-0-2]",
			},
		},
		{
			name:  "three tiers: pods of spines under shared cores",
			ports: ufmtest.FatTree(2, 2, 1, 2, 2),
			want: []string{
				"ufm-core.core-0 3 core [ufm-spine.spine-0-0 ufm-spine.spine-1-0]",
				"ufm-leaf.leaf-0-0 1 leaf [host-0-0-0]",
				"ufm-leaf.leaf-0-1 1 leaf [host-0-1-0]",
				"ufm-leaf.leaf-1-0 1 leaf [host-1-0-0]",
				"ufm-leaf.leaf-1-1 1 leaf [host-1-1-0]",
				"ufm-spine.spine-0-0 2 spine [ufm-leaf.leaf-0-0 ufm-leaf.leaf-0-1]",
				"ufm-spine.spine-1-0 2 spine [ufm-leaf.leaf-1-0 ufm-leaf.leaf-1-1]",
			},
		},
		{
			name:  "separate pods without cores are separate tops",
			ports: ufmtest.FatTree(2, 2, 1, 1, 0),
			want: []string{
				"ufm-leaf.leaf-0-0 1 leaf [host-0-0-0]",
				"ufm-leaf.leaf-0-1 1 leaf [host-0-1-0]",
				"ufm-leaf.leaf-1-0 1 leaf [host-1-0-0]",
				"ufm-leaf.leaf-1-1 1 leaf [host-1-1-0]",
				"ufm-spine.spine-0-0 2 spine [ufm-leaf.leaf-0-0 ufm-leaf.leaf-0-1]",
				"ufm-spine.spine-1-0 2 spine [ufm-leaf.leaf-1-0 ufm-leaf.leaf-1-1]",
			},
		},
		{
			// Two scalable units of 2 hosts on 4 rails; rail r's leaves of both units share
			// rail r's spine.
			name: "rail-optimised: a host on 4 rails joins its 4 leaves into one group",
			ports: func() []ufmtest.Port {
				var p []ufmtest.Port
				for su := range 2 {
					for h := range 2 {
						for r := range 4 {
							p = append(p, ufmtest.HostPort(fmt.Sprintf("gpu-%d-%d", su, h), fmt.Sprintf("su%d-rail%d", su, r)))
						}
					}
					for r := range 4 {
						p = append(p, ufmtest.SwitchPorts(fmt.Sprintf("su%d-rail%d", su, r), fmt.Sprintf("spine-rail%d", r))...)
					}
				}
				return p
			}(),
			want: []string{
				"ufm-leaf.su0-rail0 1 leaf [gpu-0-0 gpu-0-1]",
				"ufm-leaf.su1-rail0 1 leaf [gpu-1-0 gpu-1-1]",
				"ufm-spine.spine-rail0 2 spine [ufm-leaf.su0-rail0 ufm-leaf.su1-rail0]",
			},
		},
		{
			// A leaf cabled only to spines (storage, spare) looks like a core from the hosts'
			// side; it must not add a tier.
			name: "a leaf without hosts adds nothing",
			ports: append(ufmtest.FatTree(1, 2, 1, 2, 0),
				append(ufmtest.SwitchPorts("leaf-spare", "spine-0-0"), ufmtest.SwitchPorts("leaf-spare", "spine-0-1")...)...),
			want: []string{
				"ufm-leaf.leaf-0-0 1 leaf [host-0-0-0]",
				"ufm-leaf.leaf-0-1 1 leaf [host-0-1-0]",
				"ufm-spine.spine-0-0 2 spine [ufm-leaf.leaf-0-0 ufm-leaf.leaf-0-1]",
			},
		},
		{
			// Each leaf has a spine of its own; the cores are shared: the spines decide
			// nothing, so the leaves sit directly under the core (no one-child HyperNodes).
			name: "private spines are skipped",
			ports: func() []ufmtest.Port {
				p := []ufmtest.Port{ufmtest.HostPort("a", "leaf-a"), ufmtest.HostPort("b", "leaf-b")}
				p = append(p, ufmtest.SwitchPorts("leaf-a", "spine-a")...)
				p = append(p, ufmtest.SwitchPorts("leaf-b", "spine-b")...)
				p = append(p, ufmtest.SwitchPorts("spine-a", "core")...)
				p = append(p, ufmtest.SwitchPorts("spine-b", "core")...)
				return p
			}(),
			want: []string{
				"ufm-core.core 3 core [ufm-leaf.leaf-a ufm-leaf.leaf-b]",
				"ufm-leaf.leaf-a 1 leaf [a]",
				"ufm-leaf.leaf-b 1 leaf [b]",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewFabric(ports(tc.ports))
			if err != nil {
				t.Fatal(err)
			}
			hns := f.HyperNodes(identity)
			if diff := cmp.Diff(tc.want, render(hns)); diff != "" {
				t.Errorf("HyperNodes (-want,+got):\n%s", diff)
			}
			assertValidTree(t, f, hns)
		})
	}
}

// assertValidTree checks the HyperNodes with the scheduler's validator: no problem, and every
// host in exactly one leaf.
func assertValidTree(t *testing.T, f *Fabric, hns []*topologyv1alpha1.HyperNode) {
	t.Helper()
	nodes := map[string]labels.Set{}
	for h := range f.HostLeaves {
		nodes[h] = labels.Set{}
	}
	snap := hypernode.Build(nodes, hns).Snapshot()
	for name, problems := range snap.Problems() {
		t.Errorf("HyperNode %s: %v", name, problems)
	}
	for h := range f.HostLeaves {
		if _, ok := snap.LeafOf(h); !ok {
			t.Errorf("host %s is in no leaf", h)
		}
	}
}

// TestSwitchPortTowardAHost: a switch's port toward a host is not a switch link, even when
// the records spell the host differently.
func TestSwitchPortTowardAHost(t *testing.T) {
	f, err := NewFabric(ports([]ufmtest.Port{
		ufmtest.HostPort("GPU-1", "leaf"),
		{Description: "Switch IB Port", SystemName: "leaf", PeerNodeName: "gpu-1"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Links) != 0 {
		t.Errorf("links %v, want none", f.Links)
	}
}

func TestNewFabricEmpty(t *testing.T) {
	for name, p := range map[string][]Port{
		"no ports":                nil,
		"only switch ports":       ports(ufmtest.SwitchPorts("a", "b")),
		"host ports without peer": {{Description: "Computer IB Port", SystemName: "h"}},
	} {
		if _, err := NewFabric(p); err == nil || !strings.Contains(err.Error(), "no host port linked to a switch") {
			t.Errorf("%s: NewFabric error %v, want an empty-answer error", name, err)
		}
	}
}

// TestHostMapping: host names map to node names exactly, else ignoring case; unmatched hosts
// are reported and left out; a node claimed by two hosts is given to the exact one.
func TestHostMapping(t *testing.T) {
	f, err := NewFabric(ports([]ufmtest.Port{
		ufmtest.HostPort("gpu-01", "leaf-a"),
		ufmtest.HostPort("GPU-02", "leaf-a"),
		ufmtest.HostPort("gpu-03", "leaf-a"), // exact
		ufmtest.HostPort("GPU-03", "leaf-b"), // would be gpu-03 too: left out
		ufmtest.HostPort("ghost", "leaf-b"),
		ufmtest.HostPort("Twin", "leaf-b"), // twin and TWIN both exist: ambiguous
	}))
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*v1.Node
	for _, n := range []string{"gpu-01", "gpu-02", "gpu-03", "twin", "TWIN"} {
		nodes = append(nodes, st.MakeNode().Name(n).Obj())
	}
	res, matched, err := (&Source{}).build(f, nodes)
	if diff := cmp.Diff([]string{"gpu-01", "gpu-02", "gpu-03"}, slices.Sorted(slices.Values(matched))); err != nil || diff != "" {
		t.Fatalf("build: %v; nodes matched (-want,+got):\n%s", err, diff)
	}
	if diff := cmp.Diff([]string{"ufm-leaf.leaf-a 1 leaf [gpu-01 gpu-02 gpu-03]"}, render(res.HyperNodes)); diff != "" {
		t.Errorf("HyperNodes (-want,+got):\n%s", diff)
	}
	want := "ufm: 3 of 6 hosts match no Node, exactly or ignoring case (GPU-03, Twin, ghost); they are left out of the HyperNodes"
	if len(res.Warnings) != 1 || res.Warnings[0].Message != want || res.Warnings[0].Reason != ReasonHostsUnmatched {
		t.Errorf("warnings %v, want %q", res.Warnings, want)
	}

	// No host at all matches: an error, never an empty tree.
	_, _, err = (&Source{}).build(f, []*v1.Node{st.MakeNode().Name("other").Obj()})
	if err == nil || !strings.Contains(err.Error(), "none of the 6 hosts UFM reports") {
		t.Errorf("build with no matching node: error %v", err)
	}
}
