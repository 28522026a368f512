package inspect

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	schedfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"

	topologyfake "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned/fake"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

func TestWrapLines(t *testing.T) {
	tests := []struct {
		name        string
		first, rest string
		text        string
		width       int
		want        []string
	}{
		{name: "fits", first: "a: ", rest: "  ", text: "one two", width: 20, want: []string{"a: one two"}},
		{name: "wraps at spaces", first: "a: ", rest: "  ", text: "one two three four five", width: 12,
			want: []string{"a: one two", "  three four", "  five"}},
		{name: "cuts a word longer than the line", first: "", rest: "", text: "abcdefghijklmnopqrstuvwxyz0123456789", width: 25,
			want: []string{"abcdefghijklmnopqrstuvwxy", "z0123456789"}},
		{name: "empty text keeps the prefix", first: "label:", rest: "", text: "", width: 20, want: []string{"label:"}},
		{name: "deep prefix leaves 20 columns", first: "x ", rest: strings.Repeat(" ", 70), text: "aaaa bbbb cccc dddd eeee ffff", width: 80,
			want: []string{"x aaaa bbbb cccc dddd eeee ffff"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, wrapLines(tc.first, tc.rest, tc.text, tc.width)); diff != "" {
				t.Errorf("wrapLines (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestLongNamesFit renders a cluster whose names are as long as Kubernetes allows in places
// and checks that no line of any report exceeds the terminal width.
func TestLongNamesFit(t *testing.T) {
	long := func(prefix string) string { return prefix + strings.Repeat("x", 60-len(prefix)) }
	leaf, spine := long("leaf-"), long("spine-")
	nodeA, nodeB := long("node-a-"), long("node-b-")
	group := long("group-")
	kube := []runtime.Object{gpuNode(nodeA), gpuNode(nodeB), gpuNode(long("loose-"), cordoned)}
	bound := memberPod("a-namespace-with-a-long-name", long("pod-0-"), group, nodeA, nil)
	pending := unschedulable(memberPod("a-namespace-with-a-long-name", long("pod-1-"), group, "", nil),
		strings.Repeat("averyveryverylongwordwithoutspaces", 4)+" 0/3 nodes are available: 1 node(s) were unschedulable.")
	kube = append(kube, bound, pending)
	topology := []runtime.Object{
		hntesting.MakeHyperNode(leaf).Tier(1).TierName(long("a-very-long-tier-name-")).Nodes(nodeA, nodeB).Obj(),
		hntesting.MakeHyperNode(spine).Tier(2).TierName("spine").Children(leaf, long("missing-")).Obj(),
	}
	scheduling := []runtime.Object{podGroup("a-namespace-with-a-long-name", group, 2, map[string]string{
		podgroup.NetworkTopologyAnnotation: `{"mode":"soft","highestTierAllowed":1}`,
	})}
	c, err := Load(context.Background(), Clients{
		Kube:       kubefake.NewClientset(kube...),
		Topology:   topologyfake.NewSimpleClientset(topology...),
		Scheduling: schedfake.NewSimpleClientset(scheduling...),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.DefaultResource(); got != "nvidia.com/gpu" {
		t.Errorf("default resource = %s, want nvidia.com/gpu", got)
	}
	for _, res := range []v1.ResourceName{"", v1.ResourceMemory} {
		var buf bytes.Buffer
		if err := WriteTree(&buf, c.Tree(res)); err != nil {
			t.Fatal(err)
		}
		checkWidth(t, buf.String())
		e, err := c.Explain("a-namespace-with-a-long-name", group, res)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status != StatusPartiallyPlaced || e.Search == nil || e.Search.PlacedIn != leaf || !e.Search.Fits {
			t.Errorf("partially placed soft gang: status %s, search %+v", e.Status, e.Search)
		}
		buf.Reset()
		if err := WriteExplanation(&buf, e); err != nil {
			t.Fatal(err)
		}
		checkWidth(t, buf.String())
		if t.Failed() {
			t.Logf("output:\n%s", buf.String())
		}
	}
}

func TestDefaultResourceWithoutGPUs(t *testing.T) {
	n := gpuNode("cpu-only")
	delete(n.Status.Allocatable, "nvidia.com/gpu")
	c, err := Load(context.Background(), Clients{
		Kube:       kubefake.NewClientset(n),
		Topology:   topologyfake.NewSimpleClientset(),
		Scheduling: schedfake.NewSimpleClientset(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.DefaultResource(); got != v1.ResourceCPU {
		t.Errorf("default resource = %s, want cpu", got)
	}
	var buf bytes.Buffer
	if err := WriteTree(&buf, c.Tree("")); err != nil {
		t.Fatal(err)
	}
	want := lines(
		"Resource cpu. NODES: usable/total (usable: ready and not cordoned). FREE:",
		"allocatable minus the requests of bound pods, on usable nodes. VALID: no problem",
		"of its own. SOURCE: the discovery source that owns it (- if made by hand).",
		"",
		"No HyperNodes.",
		"HYPERNODE  TIER  NODES  ALLOC  FREE  VALID  SOURCE",
		"<cluster>  1       1/1     32    32",
		"",
		"Nodes in no HyperNode (1): cpu-only",
	)
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("tree without HyperNodes (-want,+got):\n%s", diff)
	}
}

// TestNodesInNoHyperNodeAreCapped: a cluster not yet labelled lists 20 node names and counts
// the rest; the JSON keeps them all.
func TestNodesInNoHyperNodeAreCapped(t *testing.T) {
	var objs []runtime.Object
	for i := range 25 {
		objs = append(objs, gpuNode(fmt.Sprintf("n%02d", i)))
	}
	c, err := Load(context.Background(), Clients{Kube: kubefake.NewClientset(objs...),
		Topology: topologyfake.NewSimpleClientset(), Scheduling: schedfake.NewSimpleClientset()})
	if err != nil {
		t.Fatal(err)
	}
	report := c.Tree("")
	if len(report.NodesInNoHyperNode) != 25 {
		t.Errorf("the report lists %d nodes in no HyperNode, want 25", len(report.NodesInNoHyperNode))
	}
	var buf bytes.Buffer
	if err := WriteTree(&buf, report); err != nil {
		t.Fatal(err)
	}
	want := "Nodes in no HyperNode (25): n00, n01, n02, n03, n04, n05, n06, n07, n08, n09,\n  n10, n11, n12, n13, n14, n15, n16, n17, n18, n19 (+5 more)\n"
	if !strings.HasSuffix(buf.String(), want) {
		t.Errorf("tree output does not end with\n%s\n%s", want, buf.String())
	}
}

// TestResizedPodHoldsTheLargerRequest: a bound pod whose downsize is not done yet holds the
// larger of its new and its running requests, as kube-scheduler counts it.
func TestResizedPodHoldsTheLargerRequest(t *testing.T) {
	pod := memberPod("team-i", "resizing", "", "n0", nil)
	pod.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("8")
	pod.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "trainer", Resources: &v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("12")}}}}
	c, err := Load(context.Background(), Clients{Kube: kubefake.NewClientset(gpuNode("n0"), pod),
		Topology:   topologyfake.NewSimpleClientset(hntesting.MakeHyperNode("leaf").Tier(1).Nodes("n0").Obj()),
		Scheduling: schedfake.NewSimpleClientset()})
	if err != nil {
		t.Fatal(err)
	}
	if free := c.Tree(v1.ResourceCPU).Root.Free; free.Cmp(resource.MustParse("20")) != 0 {
		t.Errorf("free cpu %s, want 20 (32 minus the running 12)", free.String())
	}
}
