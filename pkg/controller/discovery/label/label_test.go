package label

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
)

// fakeNodes lists fixed nodes.
type fakeNodes []*v1.Node

func (f fakeNodes) List(labels.Selector) ([]*v1.Node, error) { return f, nil }

// node builds a node with labels given as key=value pairs.
func node(name string, pairs ...string) *v1.Node {
	w := st.MakeNode().Name(name)
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		w = w.Label(k, v)
	}
	return w.Obj()
}

// newSource builds the label source from a YAML config.
func newSource(t *testing.T, yamlConfig string, nodes ...*v1.Node) *Source {
	t.Helper()
	parsed, err := config.Parse("networkTopologyDiscovery:\n- source: label\n  enabled: true\n  config:\n"+indent(yamlConfig, "    "), "hypernode-system")
	if err != nil {
		t.Fatal(err)
	}
	e := parsed.Entries[0]
	if len(e.Errs) > 0 {
		t.Fatal(e.Errs.ToAggregate())
	}
	s, errs := New(e, source.Env{Nodes: nil})
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	src := s.(*Source)
	src.nodes = fakeNodes(nodes)
	return src
}

func indent(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(strings.Trim(s, "\n"), "\n") {
		out = append(out, prefix+l)
	}
	return strings.Join(out, "\n") + "\n"
}

// render writes HyperNodes one per line: name, tier, tierName, and the members (a leaf's
// selector, a parent's children).
func render(hns []*topologyv1alpha1.HyperNode) []string {
	var out []string
	for _, hn := range hns {
		var members []string
		for _, m := range hn.Spec.Members {
			switch s := m.Selector; {
			case s.ExactMatch != nil:
				members = append(members, s.ExactMatch.Name)
			case s.LabelMatch != nil:
				sel, _ := metav1LabelSelectorString(s.LabelMatch)
				members = append(members, "{"+sel+"}")
			}
		}
		out = append(out, fmt.Sprintf("%s %d %q [%s]", hn.Name, hn.Spec.Tier, hn.Spec.TierName, strings.Join(members, " ")))
	}
	return out
}

func discover(t *testing.T, s *Source) *source.Result {
	t.Helper()
	res, err := s.Discover(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestVolcanoNetworkTopologyTypes: Volcano's own configuration, unchanged, builds the tree its
// documentation describes (s0..s3 under s4 and s5), tier 1 at the lowest label, the label key
// as tierName, kubernetes.io/hostname the node level.
func TestVolcanoNetworkTopologyTypes(t *testing.T) {
	var nodes []*v1.Node
	for i := range 8 {
		nodes = append(nodes, node(fmt.Sprintf("node%d", i), fmt.Sprintf("volcano.sh/tor-1=s%d", i/2), fmt.Sprintf("volcano.sh/tor-2=s%d", 4+i/4)))
	}
	s := newSource(t, `
networkTopologyTypes:
  topologyA2:
  - nodeLabel: volcano.sh/tor-2
  - nodeLabel: volcano.sh/tor-1
  - nodeLabel: kubernetes.io/hostname
`, nodes...)
	res := discover(t, s)
	want := []string{
		`topologya2.s4 2 "volcano.sh/tor-2" [topologya2.s4.s0 topologya2.s4.s1]`,
		`topologya2.s4.s0 1 "volcano.sh/tor-1" [{volcano.sh/tor-1=s0,volcano.sh/tor-2=s4}]`,
		`topologya2.s4.s1 1 "volcano.sh/tor-1" [{volcano.sh/tor-1=s1,volcano.sh/tor-2=s4}]`,
		`topologya2.s5 2 "volcano.sh/tor-2" [topologya2.s5.s2 topologya2.s5.s3]`,
		`topologya2.s5.s2 1 "volcano.sh/tor-1" [{volcano.sh/tor-1=s2,volcano.sh/tor-2=s5}]`,
		`topologya2.s5.s3 1 "volcano.sh/tor-1" [{volcano.sh/tor-1=s3,volcano.sh/tor-2=s5}]`,
	}
	if diff := cmp.Diff(want, render(res.HyperNodes)); diff != "" {
		t.Errorf("HyperNodes (-want,+got):\n%s", diff)
	}
	leaves := assertValidTree(t, nodes, res.HyperNodes)
	if diff := cmp.Diff(map[string]string{
		"node0": "topologya2.s4.s0", "node1": "topologya2.s4.s0", "node2": "topologya2.s4.s1", "node3": "topologya2.s4.s1",
		"node4": "topologya2.s5.s2", "node5": "topologya2.s5.s2", "node6": "topologya2.s5.s3", "node7": "topologya2.s5.s3",
	}, leaves); diff != "" {
		t.Errorf("leaf of each node (-want,+got):\n%s", diff)
	}
	if len(res.Warnings) > 0 {
		t.Errorf("warnings %v, want none", res.Warnings)
	}
}

// TestMissingLevels: a node without an inner level's label is attached to the next level it
// carries and reported; nodes next to HyperNodes get a HyperNode of their own.
func TestMissingLevels(t *testing.T) {
	nodes := []*v1.Node{
		node("full-0", "ex.com/spine=s1", "ex.com/leaf=l1", "ex.com/nvl=d1"),
		node("full-1", "ex.com/spine=s1", "ex.com/leaf=l1", "ex.com/nvl=d1"),
		node("no-nvl", "ex.com/spine=s1", "ex.com/leaf=l1"), // next to d1 under l1
		node("no-leaf", "ex.com/spine=s1", "ex.com/nvl=d9"), // skips the leaf level
		node("no-spine", "ex.com/leaf=l7"),                  // a top-level leaf
		node("only-spine", "ex.com/spine=s2"),               // a spine that is a leaf
		node("unlabelled", "other=x"),                       // not in this topology
	}
	s := newSource(t, `
networkTopologyTypes:
  f:
  - nodeLabel: ex.com/spine
    tierName: spine
  - nodeLabel: ex.com/leaf
    tierName: leaf
  - nodeLabel: ex.com/nvl
    tierName: nvlink
  - nodeLabel: kubernetes.io/hostname
`, nodes...)
	res := discover(t, s)
	wrapper := source.Name("f", "s1", "l1\x00no-nvlink")
	if !strings.HasPrefix(wrapper, "f.l1-no-nvlink-") {
		t.Errorf("the HyperNode of the nodes of l1 without nvlink is named %s, want f.l1-no-nvlink-<hash>", wrapper)
	}
	// Paths that skip a level keep names by values while no other path has the same.
	skipsLeaf, noSpine := "f.s1.d9", "f.l7"
	want := []string{
		noSpine + ` 2 "leaf" [{ex.com/leaf=l7,!ex.com/nvl,!ex.com/spine}]`,
		`f.s1 3 "spine" [` + skipsLeaf + ` f.s1.l1]`,
		skipsLeaf + ` 1 "nvlink" [{!ex.com/leaf,ex.com/nvl=d9,ex.com/spine=s1}]`,
		`f.s1.l1 2 "leaf" [` + wrapper + ` f.s1.l1.d1]`,
		`f.s1.l1.d1 1 "nvlink" [{ex.com/leaf=l1,ex.com/nvl=d1,ex.com/spine=s1}]`,
		`f.s2 3 "spine" [{!ex.com/leaf,!ex.com/nvl,ex.com/spine=s2}]`,
		wrapper + ` 1 "" [{ex.com/leaf=l1,!ex.com/nvl,ex.com/spine=s1}]`,
	}
	got := render(res.HyperNodes)
	sort.Strings(got)
	sort.Strings(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("HyperNodes (-want,+got):\n%s", diff)
	}
	leaves := assertValidTree(t, nodes, res.HyperNodes)
	if diff := cmp.Diff(map[string]string{
		"full-0": "f.s1.l1.d1", "full-1": "f.s1.l1.d1", "no-nvl": wrapper, "no-leaf": skipsLeaf,
		"no-spine": noSpine, "only-spine": "f.s2",
	}, leaves); diff != "" {
		t.Errorf("leaf of each node (-want,+got):\n%s", diff)
	}
	wantWarnings := []source.Warning{
		{Reason: ReasonMissingLabel, Message: "type f: 1 node(s) carry some of its labels but not ex.com/spine (no-spine); each is attached to the next level it carries"},
		{Reason: ReasonMissingLabel, Message: "type f: 2 node(s) carry some of its labels but not ex.com/leaf (no-leaf, only-spine); each is attached to the next level it carries"},
		{Reason: ReasonMissingLabel, Message: "type f: 3 node(s) carry some of its labels but not ex.com/nvl (no-nvl, no-spine, only-spine); each is attached to the next level it carries"},
	}
	if diff := cmp.Diff(wantWarnings, res.Warnings); diff != "" {
		t.Errorf("warnings (-want,+got):\n%s", diff)
	}
}

// TestPresets: each preset builds a valid tree from the labels its scheme writes, tier 1 at
// the lowest label the nodes carry, with readable tier names.
func TestPresets(t *testing.T) {
	tested := map[string]bool{}
	for _, tc := range []struct {
		preset string
		// nodes: name and labels.
		nodes []*v1.Node
		// want: each HyperNode's tier and tierName, by name.
		want map[string]string
	}{
		{
			preset: "topograph",
			nodes: []*v1.Node{
				node("n0", "fabric.topograph.run/tier-2=core-a", "fabric.topograph.run/tier-1=sp-1", "fabric.topograph.run/tier-0=lf-1", "accelerator.topograph.run/domain=nvl-1"),
				node("n1", "fabric.topograph.run/tier-2=core-a", "fabric.topograph.run/tier-1=sp-1", "fabric.topograph.run/tier-0=lf-2", "accelerator.topograph.run/domain=nvl-2"),
			},
			want: map[string]string{
				"topograph.core-a":                 "4 core",
				"topograph.core-a.sp-1":            "3 spine",
				"topograph.core-a.sp-1.lf-1":       "2 leaf",
				"topograph.core-a.sp-1.lf-1.nvl-1": "1 accelerator",
				"topograph.core-a.sp-1.lf-2":       "2 leaf",
				"topograph.core-a.sp-1.lf-2.nvl-2": "1 accelerator",
			},
		},
		{
			preset: "topograph",
			// Two fabric tiers and no accelerator labels: tier-0 is tier 1.
			nodes: []*v1.Node{
				node("n0", "fabric.topograph.run/tier-1=sp-1", "fabric.topograph.run/tier-0=lf-1"),
			},
			want: map[string]string{"topograph.sp-1": "2 spine", "topograph.sp-1.lf-1": "1 leaf"},
		},
		{
			preset: "topograph-leaf",
			nodes: []*v1.Node{
				node("n0", "network.topology.nvidia.com/core=c1", "network.topology.nvidia.com/spine=s1", "network.topology.nvidia.com/leaf=l1", "network.topology.nvidia.com/accelerator=nvl1"),
			},
			want: map[string]string{
				"topograph-leaf.c1": "4 core", "topograph-leaf.c1.s1": "3 spine",
				"topograph-leaf.c1.s1.l1": "2 leaf", "topograph-leaf.c1.s1.l1.nvl1": "1 accelerator",
			},
		},
		{
			preset: "topograph-block",
			nodes: []*v1.Node{
				node("n0", "network.topology.nvidia.com/datacenter=dc1", "network.topology.nvidia.com/spine=s1", "network.topology.nvidia.com/block=b1"),
			},
			want: map[string]string{"topograph-block.dc1": "3 datacenter", "topograph-block.dc1.s1": "2 spine", "topograph-block.dc1.s1.b1": "1 block"},
		},
		{
			preset: "gke",
			nodes: []*v1.Node{
				node("n0", "cloud.google.com/gce-topology-block=b1", "cloud.google.com/gce-topology-subblock=sb1", "cloud.google.com/gce-topology-host=h1"),
				node("n1", "cloud.google.com/gce-topology-block=b1", "cloud.google.com/gce-topology-subblock=sb1", "cloud.google.com/gce-topology-host=h2"),
			},
			want: map[string]string{"gke.b1": "3 block", "gke.b1.sb1": "2 subblock", "gke.b1.sb1.h1": "1 host", "gke.b1.sb1.h2": "1 host"},
		},
		{
			preset: "eks",
			nodes: []*v1.Node{
				node("n0", "topology.k8s.aws/network-node-layer-1=nn-1", "topology.k8s.aws/network-node-layer-2=nn-2", "topology.k8s.aws/network-node-layer-3=nn-3"),
			},
			want: map[string]string{"eks.nn-1": "3 layer-1", "eks.nn-1.nn-2": "2 layer-2", "eks.nn-1.nn-2.nn-3": "1 layer-3"},
		},
		{
			preset: "oke-rdma",
			nodes: []*v1.Node{
				node("n0", "oci.oraclecloud.com/rdma.hpc_island_id=i1", "oci.oraclecloud.com/rdma.network_block_id=nb1", "oci.oraclecloud.com/rdma.local_block_id=lb1"),
			},
			want: map[string]string{"oke-rdma.i1": "3 hpc-island", "oke-rdma.i1.nb1": "2 rdma-network-block", "oke-rdma.i1.nb1.lb1": "1 rdma-local-block"},
		},
		{
			preset: "oke",
			nodes: []*v1.Node{
				node("n0", "oci.oraclecloud.com/host.network_block_id=nb1", "oci.oraclecloud.com/host.rack_id=r1"),
			},
			want: map[string]string{"oke.nb1": "2 network-block", "oke.nb1.r1": "1 rack"},
		},
		{
			preset: "coreweave",
			nodes: []*v1.Node{
				node("n0", "backend.coreweave.cloud/fabric=f1", "backend.coreweave.cloud/leafgroup=lg1"),
			},
			want: map[string]string{"coreweave.f1": "2 fabric", "coreweave.f1.lg1": "1 leafgroup"},
		},
		{
			preset: "coreweave-ib",
			nodes: []*v1.Node{
				node("n0", "ib.coreweave.cloud/fabric=f1", "ib.coreweave.cloud/superpod=sp1", "ib.coreweave.cloud/leafgroup=lg1"),
			},
			want: map[string]string{"coreweave-ib.f1": "3 fabric", "coreweave-ib.f1.sp1": "2 superpod", "coreweave-ib.f1.sp1.lg1": "1 leafgroup"},
		},
		{
			preset: "nvlink-clique",
			nodes: []*v1.Node{
				node("n0", "nvidia.com/gpu.clique=0f4d7e2a-1c2b-4e55-9a1e-6a7b8c9d0e1f.1"),
				node("n1", "nvidia.com/gpu.clique=0f4d7e2a-1c2b-4e55-9a1e-6a7b8c9d0e1f.1"),
				node("n2", "nvidia.com/gpu.clique=0f4d7e2a-1c2b-4e55-9a1e-6a7b8c9d0e1f.2"),
			},
			want: map[string]string{
				source.Name("nvlink-clique", "0f4d7e2a-1c2b-4e55-9a1e-6a7b8c9d0e1f.1"): "1 nvlink",
				source.Name("nvlink-clique", "0f4d7e2a-1c2b-4e55-9a1e-6a7b8c9d0e1f.2"): "1 nvlink",
			},
		},
	} {
		tested[tc.preset] = true
		t.Run(tc.preset, func(t *testing.T) {
			s := newSource(t, "presets: ["+tc.preset+"]\n", tc.nodes...)
			res := discover(t, s)
			got := map[string]string{}
			for _, hn := range res.HyperNodes {
				got[hn.Name] = fmt.Sprintf("%d %s", hn.Spec.Tier, hn.Spec.TierName)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("HyperNodes (-want,+got):\n%s", diff)
			}
			leaves := assertValidTree(t, tc.nodes, res.HyperNodes)
			if len(leaves) != len(tc.nodes) {
				t.Errorf("%d of %d nodes are in a leaf: %v", len(leaves), len(tc.nodes), leaves)
			}
			if len(res.Warnings) > 0 {
				t.Errorf("warnings %v, want none", res.Warnings)
			}
		})
	}
	for _, p := range PresetNames() {
		if !tested[p] {
			t.Errorf("preset %s has no test case", p)
		}
	}
}

func assertValidTree(t *testing.T, nodes []*v1.Node, hns []*topologyv1alpha1.HyperNode) map[string]string {
	t.Helper()
	nodeLabels := map[string]labels.Set{}
	for _, n := range nodes {
		nodeLabels[n.Name] = labels.Set(n.Labels)
	}
	snap := hypernode.Build(nodeLabels, hns).Snapshot()
	for name, problems := range snap.Problems() {
		t.Errorf("HyperNode %s: %v", name, problems)
	}
	leaves := map[string]string{}
	for _, n := range nodes {
		if leaf, ok := snap.LeafOf(n.Name); ok {
			leaves[n.Name] = leaf
		}
	}
	return leaves
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		json string
		want []string
	}{
		{"nothing configured", `{}`, []string{"config: Required value: configure networkTopologyTypes or presets ([coreweave coreweave-ib eks gke nvlink-clique oke oke-rdma topograph topograph-block topograph-leaf])"}},
		{"unknown preset", `{"presets":["slurm"]}`, []string{`config.presets[0]: Unsupported value: "slurm": supported values: "coreweave", "coreweave-ib", "eks", "gke", "nvlink-clique", "oke", "oke-rdma", "topograph", "topograph-block", "topograph-leaf"`}},
		{"unknown field", `{"networkTopologyType":{}}`, []string{"config.networkTopologyType: Forbidden: unknown field"}},
		{"hostname only", `{"networkTopologyTypes":{"a":[{"nodeLabel":"kubernetes.io/hostname"}]}}`, []string{"config.networkTopologyTypes[a]: Required value: list at least one node label above kubernetes.io/hostname"}},
		{"hostname in the middle, duplicates, bad keys", `{"networkTopologyTypes":{"a":[{"nodeLabel":"x/y"},{"nodeLabel":"kubernetes.io/hostname"},{"nodeLabel":"x/y"},{"nodeLabel":"bad key"}]}}`, []string{
			`config.networkTopologyTypes[a][1].nodeLabel: Invalid value: "kubernetes.io/hostname": kubernetes.io/hostname denotes the node level and may only be the last entry`,
			`config.networkTopologyTypes[a][2].nodeLabel: Duplicate value: "x/y"`,
			`config.networkTopologyTypes[a][3].nodeLabel: Invalid value: "bad key": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		}},
		{"type name too long", `{"networkTopologyTypes":{"a-very-long-topology-type":[{"nodeLabel":"x/y"}]}}`, []string{`config.networkTopologyTypes[a-very-long-topology-type]: Invalid value: "a-very-long-topology-type": a type name has 1 to 20 characters`}},
		{"names that collide", `{"presets":["gke"],"networkTopologyTypes":{"GKE":[{"nodeLabel":"x/y"}]}}`, []string{`config.networkTopologyTypes[GKE]: Duplicate value: "GKE (its HyperNode names would start like those of gke: gke.)"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := ParseConfig(json.RawMessage(tc.json), field.NewPath("config"))
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestNodeChangeMatters: only changes of a type's labels trigger a discovery.
func TestNodeChangeMatters(t *testing.T) {
	s := newSource(t, "presets: [gke]\n")
	const block = "cloud.google.com/gce-topology-block"
	for _, tc := range []struct {
		name     string
		old, new *v1.Node
		want     bool
	}{
		{"a labelled node joins", nil, node("a", block+"=b1"), true},
		{"an unlabelled node joins", nil, node("a", "x=y"), false},
		{"a label value changes", node("a", block+"=b1"), node("a", block+"=b2"), true},
		{"another label changes", node("a", block+"=b1", "x=1"), node("a", block+"=b1", "x=2"), false},
		{"a labelled node leaves", node("a", block+"=b1"), nil, true},
	} {
		if got := s.NodeChangeMatters(tc.old, tc.new); got != tc.want {
			t.Errorf("%s: NodeChangeMatters = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// metav1LabelSelectorString renders a label selector as the API does: requirements sorted by
// key, "!key" for DoesNotExist.
func metav1LabelSelectorString(ls *metav1.LabelSelector) (string, error) {
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return "", err
	}
	return sel.String(), nil
}

// spineLeafConfig is a source of one network topology type of two levels, ex.com/spine (tier
// spine) above ex.com/leaf (tier leaf).
func spineLeafConfig(typeName string) string {
	return fmt.Sprintf(`
networkTopologyTypes:
  %s:
  - nodeLabel: ex.com/spine
    tierName: spine
  - nodeLabel: ex.com/leaf
    tierName: leaf
`, typeName)
}
