package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	schedfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"

	topologyfake "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned/fake"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// lines joins golden lines into the expected output.
func lines(l ...string) string { return strings.Join(l, "\n") + "\n" }

// checkWidth fails for every rendered line wider than the terminal.
func checkWidth(t *testing.T, out string) {
	t.Helper()
	for i, l := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(l); n > Width {
			t.Errorf("line %d is %d columns wide (max %d): %q", i+1, n, Width, l)
		}
	}
}

// jsonOf round-trips v through JSON, so tests assert what scripts see.
func jsonOf(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	return out
}

// field walks a decoded JSON document by object keys and array indexes.
func field(t *testing.T, doc any, path ...any) any {
	t.Helper()
	cur := doc
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("path %v: %T is not an object", path, cur)
			}
			cur = m[k]
		case int:
			a, ok := cur.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("path %v: no element %d in %v", path, k, cur)
			}
			cur = a[k]
		}
	}
	return cur
}

// decode turns a JSON literal into the shape jsonOf produces.
func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad expected JSON %s: %v", s, err)
	}
	return v
}

func TestTree(t *testing.T) {
	c := loadTestCluster(t)
	report := c.Tree("")
	var buf bytes.Buffer
	if err := WriteTree(&buf, report); err != nil {
		t.Fatal(err)
	}
	want := lines(
		"Resource nvidia.com/gpu. NODES: usable/total (usable: ready and not cordoned).",
		"FREE: allocatable minus the requests of bound pods, on usable nodes. VALID: no",
		"problem of its own. SOURCE: the discovery source that owns it (- if made by",
		"hand).",
		"",
		"HYPERNODE  TIER     NODES  ALLOC  FREE  VALID  SOURCE",
		"<cluster>  4         8/10     80    48",
		"  podgroups: team-a/trained (4)",
		"  s6       3 core     7/8     64    40  yes    -",
		"    podgroups: team-a/trained (4)",
		"    s4     2 spine    4/4     32    16  yes    -",
		"      podgroups: team-a/trained (4)",
		"      s0   1 leaf     2/2     16     4  yes    -",
		"        podgroups: team-a/trained (3)",
		"      s1   1 leaf     2/2     16    12  yes    -",
		"        podgroups: team-a/trained (1)",
		"    s5     2 spine    3/4     32    24  yes    ufm",
		"      bad  1 leaf     1/1      8     8  no     -       EXCLUDED",
		"        invalid (InvalidMember): member 1: regexMatch pattern \"([\" does not",
		"          compile: error parsing regexp: missing closing ]: `[`",
		"      s2   1 leaf     2/2     16    16  yes    ufm",
		"      s3   1 leaf     1/2     16     8  yes    ufm",
		"",
		"Nodes in no HyperNode (1): loose-0",
		"",
		"Nodes only in excluded HyperNodes (1): bad-n0 (bad)",
	)
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("tree output (-want,+got):\n%s", diff)
	}
	checkWidth(t, buf.String())

	doc := jsonOf(t, report)
	for _, tc := range []struct {
		path []any
		want string
	}{
		{[]any{"resource"}, `"nvidia.com/gpu"`},
		{[]any{"root", "name"}, `"<cluster>"`},
		{[]any{"root", "tier"}, `4`},
		{[]any{"root", "virtual"}, `true`},
		{[]any{"nodesInNoHyperNode"}, `["loose-0"]`},
		{[]any{"nodesInExcludedHyperNodes"}, `[{"node":"bad-n0","leaves":["bad"]}]`},
		// s6 > s4 > s0: the leaf with its nodes, capacity and occupants.
		// ... with the status hypernode-controller wrote.
		{[]any{"root", "children", 0, "children", 0, "children", 0}, `{"name":"s0","tier":1,"tierName":"leaf","leaf":true,
			"nodes":2,"usableNodes":2,"allocatable":"16","free":"4",
			"podGroups":[{"podGroup":"team-a/trained","pods":3}],"nodeNames":["s0-n0","s0-n1"],
			"valid":true,"status":{"nodeCount":2,"valid":"True","reason":"Valid"}}`},
		// s6 > s5 > bad: the invalid leaf, in place, with its reason.
		{[]any{"root", "children", 0, "children", 1, "children", 0}, `{"name":"bad","tier":1,"tierName":"leaf","leaf":true,
			"nodes":1,"usableNodes":1,"allocatable":"8","free":"8","excluded":true,"excludedBy":"bad",
			"problems":[{"reason":"InvalidMember","excludes":true,
				"message":"member 1: regexMatch pattern \"([\" does not compile: error parsing regexp: missing closing ]: ` + "`[`" + `"}],
			"nodeNames":["bad-n0"],"valid":false}`},
		// A discovered HyperNode names its source.
		{[]any{"root", "children", 0, "children", 1, "source"}, `"ufm"`},
		// s5 counts what placement can use: s2 and s3, not the excluded leaf.
		{[]any{"root", "children", 0, "children", 1, "nodes"}, `4`},
		{[]any{"root", "children", 0, "children", 1, "free"}, `"24"`},
	} {
		if diff := cmp.Diff(decode(t, tc.want), field(t, doc, tc.path...)); diff != "" {
			t.Errorf("JSON %v (-want,+got):\n%s", tc.path, diff)
		}
	}
}

func TestTreeOtherResource(t *testing.T) {
	c := loadTestCluster(t)
	report := c.Tree(v1.ResourceCPU)
	doc := jsonOf(t, report)
	// 32 CPUs per node, 8 per bound member: s0 has 64 - 3*8 = 40 free.
	if diff := cmp.Diff(decode(t, `["cpu", "64", "40"]`), []any{
		field(t, doc, "resource"),
		field(t, doc, "root", "children", 0, "children", 0, "children", 0, "allocatable"),
		field(t, doc, "root", "children", 0, "children", 0, "children", 0, "free"),
	}); diff != "" {
		t.Errorf("cpu figures (-want,+got):\n%s", diff)
	}
}

func TestExplain(t *testing.T) {
	type jsonCheck struct {
		path []any
		want string
	}
	tests := []struct {
		name      string
		namespace string
		podGroup  string
		want      string
		json      []jsonCheck
	}{
		{
			name:      "members of two shapes are planned together",
			namespace: "team-c", podGroup: "mpi",
			want: lines(
				"PodGroup team-c/mpi: Pending (PodGroup phase Pending)",
				"  minMember 3; members: 3 live (0 bound, 3 pending)",
				"  pending pod shapes: 1 x cpu=1 (as mpi-launcher), 2 x",
				"    cpu=8,memory=32Gi,nvidia.com/gpu=8 (as mpi-worker-0)",
				"  network topology: hard topology (tier<=1)",
				"  sub-groups: none",
				"",
				"Where the 3 pending pods could go (hard, up to tier 1; capacity from requests on",
				"  usable nodes):",
				"  tier 1 (leaf), allowed:",
				"    s2  3/3  has room: the planner picks it",
				"    s1  2/3  room for at most 2 of the 3 pods (1 x cpu=1, 2 x",
				"             cpu=8,memory=32Gi,nvidia.com/gpu=8), each shape counted alone",
				"    s3  2/3  room for at most 2 of the 3 pods (1 x cpu=1, 2 x",
				"             cpu=8,memory=32Gi,nvidia.com/gpu=8), each shape counted alone",
				"    (+1 more)",
				"  tier 2 (spine), above the allowed tier 1, not used:",
				"    s5  3/3  has room, but its tier is above the allowed one",
				"    s4  2/3  room for at most 2 of the 3 pods (1 x cpu=1, 2 x",
				"             cpu=8,memory=32Gi,nvidia.com/gpu=8), each shape counted alone",
				"  nodes that take no member: loose-0 (not ready), s3-n0 (cordoned)",
				"  planner on this data: it fits now: the planner would place the 3 pending pods",
				"    in s2 (tier 1)",
				"  (the scheduler also runs its other filters and keeps slots promised to other",
				"    gangs; its own words follow)",
				"",
				"The scheduler has said nothing about this gang yet (no condition, no Event).",
			),
			json: []jsonCheck{
				{[]any{"shapes"}, `[{"name":"cpu=1","pods":1,"example":"mpi-launcher"},
					{"name":"cpu=8,memory=32Gi,nvidia.com/gpu=8","pods":2,"example":"mpi-worker-0"}]`},
			},
		},
		{
			name:      "pending gang that fits nowhere",
			namespace: "team-a", podGroup: "big",
			want: lines(
				"PodGroup team-a/big: Pending (PodGroup phase Pending)",
				"  minMember 5; members: 5 live (0 bound, 5 pending)",
				"  each pod requests: nvidia.com/gpu 4, cpu 8, memory 32Gi (as big-0)",
				"  network topology: hard topology (tier<=1)",
				"  sub-groups: none",
				"",
				"Where the 5 pending pods could go (hard, up to tier 1; capacity from requests on",
				"  usable nodes):",
				"  tier 1 (leaf), allowed:",
				"    s2  4/5  free nvidia.com/gpu 16, 4 per pod",
				"    s1  3/5  free nvidia.com/gpu 12, 4 per pod",
				"    s3  2/5  free nvidia.com/gpu 8, 4 per pod; 1 node: cordoned",
				"    (+1 more)",
				"  tier 2 (spine), above the allowed tier 1, not used:",
				"    s5  5/5  has room, but its tier is above the allowed one",
				"    s4  4/5  free nvidia.com/gpu 16, 4 per pod",
				"  nodes that take no member: loose-0 (not ready), s3-n0 (cordoned)",
				"  planner on this data: hard topology (tier<=1): no HyperNode can host 5 pods;",
				"    tier 1: s2 4/5, s1 3/5 (+2 more)",
				"  (the scheduler also runs its other filters and keeps slots promised to other",
				"    gangs; its own words follow)",
				"",
				"What the scheduler said:",
				"  big-0, big-1, big-2 (+2 more): Unschedulable: hard topology (tier<=1): no",
				"    HyperNode can host 5 pods; tier 1: s2 4/5, s1 3/5 (+2 more)",
				"  Events, newest first:",
				"    90s ago Warning FailedScheduling Pod/big-0 (x3):",
				"      hard topology (tier<=1): no HyperNode can host 5 pods; tier 1: s2 4/5, s1",
				"      3/5 (+2 more)",
				"    2m ago Warning TopologyUnsatisfiable PodGroup/big (x7):",
				"      hard topology (tier<=1): no HyperNode can host 5 pods; tier 1: s2 4/5, s1",
				"      3/5 (+2 more)",
				"    10m ago Normal GangWaiting PodGroup/big:",
				"      waiting for 5 members",
			),
			json: []jsonCheck{
				{[]any{"status"}, `"Pending"`},
				{[]any{"members"}, `{"seen":5,"bound":0,"pending":5}`},
				{[]any{"request"}, `[{"resource":"nvidia.com/gpu","amount":"4"},{"resource":"cpu","amount":"8"},{"resource":"memory","amount":"32Gi"}]`},
				{[]any{"networkTopology"}, `{"annotation":"{\"mode\":\"hard\",\"highestTierAllowed\":1}",
					"parsed":{"mode":"hard","highestTierAllowed":1},"description":"hard topology (tier<=1)","maxTier":1}`},
				{[]any{"search", "tiers", 0}, `{"tier":1,"tierName":"leaf","allowed":true,"more":1,"candidates":[
					{"name":"s2","holds":4,"needs":5,"fits":false,"reason":"free nvidia.com/gpu 16, 4 per pod"},
					{"name":"s1","holds":3,"needs":5,"fits":false,"reason":"free nvidia.com/gpu 12, 4 per pod"},
					{"name":"s3","holds":2,"needs":5,"fits":false,"reason":"free nvidia.com/gpu 8, 4 per pod; 1 node: cordoned"}]}`},
				{[]any{"search", "tiers", 1, "allowed"}, `false`},
				{[]any{"search", "tiers", 1, "candidates", 0}, `{"name":"s5","holds":5,"needs":5,"fits":true,"reason":"has room, but its tier is above the allowed one"}`},
				{[]any{"search", "unusableNodes"}, `[{"node":"loose-0","reason":"not ready"},{"node":"s3-n0","reason":"cordoned"}]`},
				{[]any{"search", "verdict"}, `"hard topology (tier<=1): no HyperNode can host 5 pods; tier 1: s2 4/5, s1 3/5 (+2 more)"`},
				{[]any{"search", "fits"}, `false`},
				{[]any{"scheduler", "conditions"}, `[{"pods":["big-0","big-1","big-2","big-3","big-4"],"reason":"Unschedulable",
					"message":"hard topology (tier<=1): no HyperNode can host 5 pods; tier 1: s2 4/5, s1 3/5 (+2 more)"}]`},
				{[]any{"scheduler", "events", 1}, `{"object":"PodGroup/big","type":"Warning","reason":"TopologyUnsatisfiable",
					"message":"hard topology (tier<=1): no HyperNode can host 5 pods; tier 1: s2 4/5, s1 3/5 (+2 more)",
					"count":7,"lastSeen":"2026-05-01T11:58:00Z","age":"2m"}`},
			},
		},
		{
			name:      "placed gang",
			namespace: "team-a", podGroup: "trained",
			want: lines(
				"PodGroup team-a/trained: Placed (PodGroup phase Pending)",
				"  minMember 4; members: 4 live (4 bound, 0 pending)",
				"  each pod requests: nvidia.com/gpu 4, cpu 8, memory 32Gi (as trained-0)",
				"  network topology: hard topology (tier<=2)",
				"  sub-groups: none",
				"",
				"Bound members: 4 pods on 3 nodes, lowest common HyperNode s4, tier 2 (spine):",
				"  s4 (tier 2, spine)",
				"    s0 (tier 1, leaf)",
				"      s0-n0: trained-0, trained-1",
				"      s0-n1: trained-2",
				"    s1 (tier 1, leaf)",
				"      s1-n0: trained-3",
				"",
				"The scheduler has said nothing about this gang yet (no condition, no Event).",
			),
			json: []jsonCheck{
				{[]any{"status"}, `"Placed"`},
				{[]any{"networkTopology", "maxTier"}, `2`},
				{[]any{"placement"}, `{"domain":"s4","tier":2,"tierName":"spine","pods":4,"nodes":3,"tree":
					{"name":"s4","tier":2,"tierName":"spine","children":[
						{"name":"s0","tier":1,"tierName":"leaf","nodes":[
							{"node":"s0-n0","pods":["trained-0","trained-1"]},{"node":"s0-n1","pods":["trained-2"]}]},
						{"name":"s1","tier":1,"tierName":"leaf","nodes":[{"node":"s1-n0","pods":["trained-3"]}]}]}}`},
				{[]any{"search"}, `null`},
			},
		},
		{
			name:      "gang with sub-groups",
			namespace: "team-b", podGroup: "tp",
			want: lines(
				"PodGroup team-b/tp: Pending (PodGroup phase Pending)",
				"  minMember 6; members: 6 live (0 bound, 6 pending)",
				"  each pod requests: nvidia.com/gpu 4, cpu 8, memory 32Gi (as tp-0)",
				"  network topology: hard topology (tier<=spine)",
				"  sub-groups:",
				"    policy tp: subGroupSize 3, minSubGroups 2, hard topology (tier<=1)",
				"    tp-0: 3 of 3 members (0 bound, 3 pending)",
				"    tp-1: 3 of 3 members (0 bound, 3 pending)",
				"",
				"Where the 6 pending pods could go (hard, up to tier 2; capacity from requests on",
				"  usable nodes):",
				"  tier 1 (leaf), allowed:",
				"    s2  4/6  free nvidia.com/gpu 16, 4 per pod",
				"    s1  3/6  free nvidia.com/gpu 12, 4 per pod",
				"    s3  2/6  free nvidia.com/gpu 8, 4 per pod; 1 node: cordoned",
				"    (+1 more)",
				"  tier 2 (spine), allowed:",
				"    s5  6/6  has room for the job, not for its sub-groups (see the planner",
				"             below)",
				"    s4  4/6  free nvidia.com/gpu 16, 4 per pod",
				"  tier 3 (core), above the allowed tier 2, not used:",
				"    s6  6/6  has room, but its tier is above the allowed one",
				"  nodes that take no member: loose-0 (not ready), s3-n0 (cordoned)",
				"  planner on this data: job hard topology (tier<=spine): 1 HyperNode(s) can host",
				"    the job's 6 pods but not its sub-groups; in s5: sub-group tp-1 (hard",
				"    topology (tier<=1)) fits no HyperNode for its 3 pods",
				"  (the scheduler also runs its other filters and keeps slots promised to other",
				"    gangs; its own words follow)",
				"",
				"The scheduler has said nothing about this gang yet (no condition, no Event).",
			),
			json: []jsonCheck{
				{[]any{"networkTopology", "maxTier"}, `2`},
				{[]any{"subGroups", "policies"}, `[{"name":"tp","subGroupSize":3,"minSubGroups":2,"constraint":"hard topology (tier<=1)"}]`},
				{[]any{"subGroups", "groups"}, `[{"id":"tp-0","policy":"tp","size":3,"members":3,"bound":0,"pending":3},
					{"id":"tp-1","policy":"tp","size":3,"members":3,"bound":0,"pending":3}]`},
				{[]any{"subGroups", "ungrouped"}, `0`},
				{[]any{"search", "tiers", 1, "candidates", 0, "reason"}, `"has room for the job, not for its sub-groups (see the planner below)"`},
				{[]any{"search", "verdict"}, `"job hard topology (tier<=spine): 1 HyperNode(s) can host the job's 6 pods but not its sub-groups; in s5: sub-group tp-1 (hard topology (tier<=1)) fits no HyperNode for its 3 pods"`},
			},
		},
		{
			name:      "invalid constraint",
			namespace: "team-a", podGroup: "broken",
			want: lines(
				"PodGroup team-a/broken: NoMembers (PodGroup phase Pending)",
				"  minMember 2; members: 0 live (0 bound, 0 pending)",
				"  network topology: INVALID, the members stay pending: annotation",
				"    hypernode.dev/network-topology: mode hard needs highestTierAllowed or",
				"    highestTierName",
				"  sub-groups: none",
				"",
				"The scheduler has said nothing about this gang yet (no condition, no Event).",
			),
			json: []jsonCheck{
				{[]any{"status"}, `"NoMembers"`},
				{[]any{"networkTopology"}, `{"annotation":"{\"mode\":\"hard\"}",
					"error":"annotation hypernode.dev/network-topology: mode hard needs highestTierAllowed or highestTierName"}`},
			},
		},
	}
	c := loadTestCluster(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := c.Explain(tc.namespace, tc.podGroup, "")
			if err != nil {
				t.Fatalf("Explain: %v", err)
			}
			var buf bytes.Buffer
			if err := WriteExplanation(&buf, e); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, buf.String()); diff != "" {
				t.Errorf("explain output (-want,+got):\n%s", diff)
			}
			checkWidth(t, buf.String())
			doc := jsonOf(t, e)
			for _, check := range tc.json {
				if diff := cmp.Diff(decode(t, check.want), field(t, doc, check.path...)); diff != "" {
					t.Errorf("JSON %v (-want,+got):\n%s", check.path, diff)
				}
			}
		})
	}
}

func TestExplainNotFound(t *testing.T) {
	c := loadTestCluster(t)
	_, err := c.Explain("team-a", "missing", "")
	if !errors.Is(err, ErrPodGroupNotFound) {
		t.Fatalf("Explain of a missing PodGroup: err = %v, want ErrPodGroupNotFound", err)
	}
	if diff := cmp.Diff("PodGroup not found: team-a/missing", err.Error()); diff != "" {
		t.Errorf("error (-want,+got):\n%s", diff)
	}
}

// notServed makes a fake clientset answer lists of a resource as an apiserver without the CRD.
func notServed(resource string) k8stesting.ReactionFunc {
	return func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: resource}, "")
	}
}

func TestLoadWithoutCRDs(t *testing.T) {
	kube, topology, _ := testObjects()
	noHyperNodes := topologyfake.NewSimpleClientset(topology...)
	noHyperNodes.PrependReactor("list", "hypernodes", notServed("hypernodes"))
	_, err := Load(context.Background(), Clients{Kube: kubefake.NewClientset(kube...), Topology: noHyperNodes, Scheduling: schedfake.NewSimpleClientset()})
	if !errors.Is(err, ErrHyperNodeCRDMissing) {
		t.Errorf("Load without the HyperNode CRD: err = %v, want ErrHyperNodeCRDMissing", err)
	}

	// Without the PodGroup CRD the tree still works; explain says why it finds nothing.
	noPodGroups := schedfake.NewSimpleClientset()
	noPodGroups.PrependReactor("list", "podgroups", notServed("podgroups"))
	c, err := Load(context.Background(), Clients{Kube: kubefake.NewClientset(kube...), Topology: topologyfake.NewSimpleClientset(topology...), Scheduling: noPodGroups})
	if err != nil {
		t.Fatalf("Load without the PodGroup CRD: %v", err)
	}
	if diff := cmp.Diff([]string{"the PodGroup CRD (podgroups.scheduling.x-k8s.io) is not installed"}, c.Tree("").Warnings); diff != "" {
		t.Errorf("tree warnings (-want,+got):\n%s", diff)
	}
	_, err = c.Explain("team-a", "big", "")
	if diff := cmp.Diff("PodGroup not found: team-a/big (the PodGroup CRD (podgroups.scheduling.x-k8s.io) is not installed)", err.Error()); diff != "" {
		t.Errorf("explain error (-want,+got):\n%s", diff)
	}
}

// TestExplainSubGroupConstraintOnly: a gang whose only constraints are its sub-groups' is not
// called a plain gang.
func TestExplainSubGroupConstraintOnly(t *testing.T) {
	e := Explanation{PodGroup: "team-a/stages", Status: "Pending", MinMember: 8,
		SubGroups: &SubGroupsReport{Policies: []SubGroupPolicyReport{{Name: "stage", SubGroupSize: 4, MinSubGroups: 2, Constraint: "hard topology (tier<=1)"}}}}
	var buf bytes.Buffer
	if err := WriteExplanation(&buf, e); err != nil {
		t.Fatal(err)
	}
	const want = "  network topology: none for the whole job (its sub-groups' constraints are\n    placed by topology, the job anywhere)\n"
	if !strings.Contains(buf.String(), want) {
		t.Errorf("explain output:\n%s\nwant it to contain:\n%s", buf.String(), want)
	}
}

// TestExplainVerdictBinPacks: the verdict names the candidate the scheduler's default
// bin-pack picks, the fuller leaf b, not the first by name.
func TestExplainVerdictBinPacks(t *testing.T) {
	kube := []runtime.Object{
		gpuNode("a-n0"), gpuNode("a-n1"), gpuNode("b-n0"), gpuNode("b-n1"),
		memberPod("team-x", "busy-0", "busy", "b-n0", nil), memberPod("team-x", "busy-1", "busy", "b-n1", nil),
		memberPod("team-x", "job-0", "job", "", nil), memberPod("team-x", "job-1", "job", "", nil),
	}
	topology := []runtime.Object{
		hntesting.MakeHyperNode("a").Tier(1).Nodes("a-n0", "a-n1").Obj(),
		hntesting.MakeHyperNode("b").Tier(1).Nodes("b-n0", "b-n1").Obj(),
	}
	tier1 := map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`}
	scheduling := []runtime.Object{podGroup("team-x", "busy", 2, nil), podGroup("team-x", "job", 2, tier1)}
	c, err := Load(context.Background(), Clients{Kube: kubefake.NewClientset(kube...),
		Topology: topologyfake.NewSimpleClientset(topology...), Scheduling: schedfake.NewSimpleClientset(scheduling...)})
	if err != nil {
		t.Fatal(err)
	}
	e, err := c.Explain("team-x", "job", "")
	if err != nil {
		t.Fatal(err)
	}
	const want = "it fits now: the planner would place the 2 pending pods in b (tier 1)"
	if e.Search == nil || e.Search.Verdict != want {
		t.Errorf("verdict %+v, want %q", e.Search, want)
	}
}

// TestExplainSoftGangShowsEveryTier: a soft gang may be placed up to the whole cluster, so
// every tier is listed, the whole cluster last.
func TestExplainSoftGangShowsEveryTier(t *testing.T) {
	kube := []runtime.Object{gpuNode("a-n0"), gpuNode("a-n1"), gpuNode("b-n0"), gpuNode("b-n1")}
	for i := range 6 {
		kube = append(kube, memberPod("team-x", fmt.Sprintf("job-%d", i), "job", "", nil))
	}
	topology := []runtime.Object{
		hntesting.MakeHyperNode("a").Tier(1).Nodes("a-n0", "a-n1").Obj(),
		hntesting.MakeHyperNode("b").Tier(1).Nodes("b-n0", "b-n1").Obj(),
		hntesting.MakeHyperNode("s").Tier(2).Children("a", "b").Obj(),
	}
	soft := map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"soft","highestTierAllowed":1}`}
	c, err := Load(context.Background(), Clients{Kube: kubefake.NewClientset(kube...),
		Topology: topologyfake.NewSimpleClientset(topology...), Scheduling: schedfake.NewSimpleClientset(podGroup("team-x", "job", 6, soft))})
	if err != nil {
		t.Fatal(err)
	}
	e, err := c.Explain("team-x", "job", "")
	if err != nil {
		t.Fatal(err)
	}
	var tiers []int
	for _, tr := range e.Search.Tiers {
		tiers = append(tiers, tr.Tier)
	}
	if diff := cmp.Diff([]int{1, 2, 3}, tiers); diff != "" {
		t.Errorf("tiers listed (-want,+got):\n%s", diff)
	}
}

// TestExplainShapesThatDoNotFitTogether: two workers that each fill a node and a launcher:
// each shape counted alone fits the leaf, packed together they do not, and the candidate
// says so instead of "has room".
func TestExplainShapesThatDoNotFitTogether(t *testing.T) {
	eightCPU := func(n *v1.Node) { n.Status.Allocatable[v1.ResourceCPU] = resource.MustParse("8") }
	request := func(p *v1.Pod, gpu, cpu string) *v1.Pod {
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: v1.ResourceList{
			"nvidia.com/gpu": resource.MustParse(gpu), v1.ResourceCPU: resource.MustParse(cpu)}}
		return p
	}
	kube := []runtime.Object{gpuNode("a-n0", eightCPU), gpuNode("a-n1", eightCPU),
		request(memberPod("team-x", "job-0", "job", "", nil), "8", "8"),
		request(memberPod("team-x", "job-1", "job", "", nil), "8", "8"),
		request(memberPod("team-x", "job-launcher", "job", "", nil), "0", "1"),
	}
	topology := []runtime.Object{hntesting.MakeHyperNode("a").Tier(1).Nodes("a-n0", "a-n1").Obj()}
	tier1 := map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`}
	c, err := Load(context.Background(), Clients{Kube: kubefake.NewClientset(kube...),
		Topology: topologyfake.NewSimpleClientset(topology...), Scheduling: schedfake.NewSimpleClientset(podGroup("team-x", "job", 3, tier1))})
	if err != nil {
		t.Fatal(err)
	}
	e, err := c.Explain("team-x", "job", "")
	if err != nil {
		t.Fatal(err)
	}
	got := e.Search.Tiers[0].Candidates[0]
	if got.Name != "a" || got.Fits || !strings.HasPrefix(got.Reason, "room for each shape counted alone, but the 3 pods (") {
		t.Errorf("candidate %+v; want a, not fitting, room for each shape alone but not together", got)
	}
	if e.Search.Fits {
		t.Errorf("verdict %q: the planner placed shapes that do not fit together", e.Search.Verdict)
	}
}

// TestExplainRunsTheSchedulersFallbacks: a job that can run with fewer members than it has is
// explained as the scheduler plans it, with the members it can do without left to wait: an
// elastic gang with as many members as fit, a job of sub-groups without those minSubGroups
// lets it drop. The candidate the planner picks says for how many pods.
func TestExplainRunsTheSchedulersFallbacks(t *testing.T) {
	kube, topology, scheduling := testObjects()
	for i := range 5 {
		kube = append(kube, memberPod("team-d", fmt.Sprintf("elastic-%d", i), "elastic", "",
			map[string]string{podgroup.RankAnnotation: fmt.Sprint(i)}))
	}
	for i := range 9 {
		kube = append(kube, memberPod("team-d", fmt.Sprintf("stages-%d", i), "stages", "",
			map[string]string{"stage": fmt.Sprint(i / 3)}))
	}
	for i := range 6 {
		kube = append(kube, memberPod("team-d", fmt.Sprintf("halves-%d", i), "halves", "",
			map[string]string{"half": fmt.Sprint(i / 3)}))
	}
	scheduling = append(scheduling,
		podGroup("team-d", "halves", 3, map[string]string{
			podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":2}`,
			podgroup.SubGroupPolicyAnnotation:  `[{"name":"half","subGroupSize":3,"minSubGroups":1,"matchLabelKeys":["half"],"networkTopology":{"mode":"hard","highestTierAllowed":1}}]`,
		}),
		podGroup("team-d", "elastic", 3, map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`}),
		podGroup("team-d", "stages", 3, map[string]string{
			podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":2}`,
			podgroup.SubGroupPolicyAnnotation:  `[{"name":"stage","subGroupSize":3,"minSubGroups":1,"matchLabelKeys":["stage"],"networkTopology":{"mode":"hard","highestTierAllowed":1}}]`,
		}))
	c, err := Load(context.Background(), Clients{Kube: kubefake.NewClientset(kube...),
		Topology: topologyfake.NewSimpleClientset(topology...), Scheduling: schedfake.NewSimpleClientset(scheduling...)})
	if err != nil {
		t.Fatal(err)
	}
	c.Now = now
	for _, tc := range []struct {
		podGroup string
		want     []string // the search's lines, from the first tier to the verdict
		deferred int
	}{
		{podGroup: "elastic", deferred: 1, want: []string{
			"  tier 1 (leaf), allowed:",
			"    s2  4/5  the planner picks it for 4 of the 5 pods; the rest wait for room",
			"    s1  3/5  free nvidia.com/gpu 12, 4 per pod",
			"    s3  2/5  free nvidia.com/gpu 8, 4 per pod; 1 node: cordoned",
			"    (+1 more)",
			"  tier 2 (spine), above the allowed tier 1, not used:",
			"    s5  5/5  has room, but its tier is above the allowed one",
			"    s4  4/5  free nvidia.com/gpu 16, 4 per pod",
			"  nodes that take no member: loose-0 (not ready), s3-n0 (cordoned)",
			"  planner on this data: it fits now without all its members: the planner would",
			"    place 4 of the 5 pending pods in s2 (tier 1); the remaining 1 waits for room",
			"    (the gang runs with its minMember 3)",
		}},
		// s5 holds the six pods counted alone, not their two sub-groups.
		{podGroup: "halves", deferred: 3, want: []string{
			"  tier 1 (leaf), allowed:",
			"    s2  4/6  free nvidia.com/gpu 16, 4 per pod",
			"    s1  3/6  the planner picks it for 3 of the 6 pods; the rest wait for room",
			"    s3  2/6  free nvidia.com/gpu 8, 4 per pod; 1 node: cordoned",
			"    (+1 more)",
			"  tier 2 (spine), allowed:",
			"    s5  6/6  has room for the job, not for its sub-groups (see the planner",
			"             below)",
			"    s4  4/6  free nvidia.com/gpu 16, 4 per pod",
			"  tier 3 (core), above the allowed tier 2, not used:",
			"    s6  6/6  has room, but its tier is above the allowed one",
			"  nodes that take no member: loose-0 (not ready), s3-n0 (cordoned)",
			"  planner on this data: it fits now without all its members: the planner would",
			"    place 3 of the 6 pending pods in s1 (tier 1); the remaining 3 wait for room:",
			"    the job runs without sub-group half-1 (its minMember and minSubGroups allow",
			"    it)",
		}},
		// One sub-group of three fits in a leaf of either spine, two in none.
		{podGroup: "stages", deferred: 6, want: []string{
			"  tier 1 (leaf), allowed:",
			"    s2  4/9  free nvidia.com/gpu 16, 4 per pod",
			"    s1  3/9  the planner picks it for 3 of the 9 pods; the rest wait for room",
			"    s3  2/9  free nvidia.com/gpu 8, 4 per pod; 1 node: cordoned",
			"    (+1 more)",
			"  tier 2 (spine), allowed:",
			"    s5  6/9  free nvidia.com/gpu 24, 4 per pod; 1 node: cordoned",
			"    s4  4/9  free nvidia.com/gpu 16, 4 per pod",
			"  tier 3 (core), above the allowed tier 2, not used:",
			"    s6  9/9  has room, but its tier is above the allowed one",
			"  nodes that take no member: loose-0 (not ready), s3-n0 (cordoned)",
			"  planner on this data: it fits now without all its members: the planner would",
			"    place 3 of the 9 pending pods in s1 (tier 1); the remaining 6 wait for room:",
			"    the job runs without sub-groups stage-1, stage-2 (its minMember and",
			"    minSubGroups allow it)",
		}},
	} {
		t.Run(tc.podGroup, func(t *testing.T) {
			e, err := c.Explain("team-d", tc.podGroup, "")
			if err != nil {
				t.Fatal(err)
			}
			if e.Search == nil || !e.Search.Fits || e.Search.Deferred != tc.deferred {
				t.Fatalf("search %+v: want it to fit with %d pods deferred", e.Search, tc.deferred)
			}
			for _, tier := range e.Search.Tiers {
				for _, cand := range tier.Candidates {
					if strings.HasPrefix(cand.Reason, "the planner picks it") && !cand.Fits {
						t.Errorf("the picked candidate %s does not fit in the JSON", cand.Name)
					}
				}
			}
			var buf bytes.Buffer
			if err := WriteExplanation(&buf, e); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			from, to := strings.Index(out, "  tier 1"), strings.Index(out, "  (the scheduler also runs")
			if from < 0 || to < from {
				t.Fatalf("no search in:\n%s", out)
			}
			if diff := cmp.Diff(lines(tc.want...), out[from:to]); diff != "" {
				t.Errorf("search (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestLoadReadsInPages: every list is read in pages (a large cluster is not one response),
// each item kept without its managed fields; a user who may not list PodGroups still gets the
// tree, with a warning.
func TestLoadReadsInPages(t *testing.T) {
	kube, topology, scheduling := testObjects()
	for i := range 1200 {
		p := memberPod("team-e", fmt.Sprintf("plain-%04d", i), "", "", nil)
		delete(p.Labels, schedulingv1alpha1.PodGroupLabel)
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
		kube = append(kube, p)
	}
	kubeClient := kubefake.NewClientset(kube...)
	var limits []int64
	// The fake API ignores Limit and Continue: serve the pods in pages as an apiserver does.
	kubeClient.PrependReactor("list", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		opts := action.(k8stesting.ListActionImpl).ListOptions
		limits = append(limits, opts.Limit)
		all, err := kubeClient.Tracker().List(v1.SchemeGroupVersion.WithResource("pods"), v1.SchemeGroupVersion.WithKind("Pod"), "")
		if err != nil {
			return true, nil, err
		}
		items := all.(*v1.PodList).Items
		sort.Slice(items, func(i, j int) bool {
			return items[i].Namespace+"/"+items[i].Name < items[j].Namespace+"/"+items[j].Name
		})
		start := 0
		if opts.Continue != "" {
			start, _ = strconv.Atoi(opts.Continue)
		}
		end := min(start+int(opts.Limit), len(items))
		page := &v1.PodList{Items: items[start:end]}
		if end < len(items) {
			page.Continue = strconv.Itoa(end)
		}
		return true, page, nil
	})
	forbidden := schedfake.NewSimpleClientset(scheduling...)
	forbidden.PrependReactor("list", "podgroups", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "scheduling.x-k8s.io", Resource: "podgroups"}, "", errors.New("RBAC: access denied"))
	})
	c, err := Load(context.Background(), Clients{Kube: kubeClient, Topology: topologyfake.NewSimpleClientset(topology...), Scheduling: forbidden})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if diff := cmp.Diff([]int64{500, 500, 500}, limits); diff != "" {
		t.Errorf("pod list pages' limits (-want,+got):\n%s", diff)
	}
	pods := 0
	for _, o := range kube {
		if _, ok := o.(*v1.Pod); ok {
			pods++
		}
	}
	if len(c.Pods) != pods {
		t.Errorf("%d pods loaded, want %d", len(c.Pods), pods)
	}
	for _, p := range c.Pods {
		if p.ManagedFields != nil {
			t.Fatalf("pod %s kept its managed fields", p.Name)
		}
	}
	want := []string{`PodGroups could not be read: podgroups.scheduling.x-k8s.io is forbidden: RBAC: access denied`}
	if diff := cmp.Diff(want, c.Warnings); diff != "" {
		t.Errorf("warnings (-want,+got):\n%s", diff)
	}
}

// TestExplainSaysWhatHoldsTheMembersBack: members the scheduler keeps out of scheduling (too
// few for minMember, a member without its sub-group label) are not called placeable, whatever
// the capacity: the verdict is the scheduler's reason.
func TestExplainSaysWhatHoldsTheMembersBack(t *testing.T) {
	kube, topology, scheduling := testObjects()
	for i := range 3 {
		kube = append(kube, memberPod("team-f", fmt.Sprintf("short-%d", i), "short", "", nil))
	}
	for i := range 3 {
		labels := map[string]string{"part": "0"}
		if i == 2 {
			labels = nil
		}
		kube = append(kube, memberPod("team-f", fmt.Sprintf("unlabelled-%d", i), "unlabelled", "", labels))
	}
	scheduling = append(scheduling,
		podGroup("team-f", "short", 4, nil),
		podGroup("team-f", "unlabelled", 3, map[string]string{
			podgroup.SubGroupPolicyAnnotation: `[{"name":"part","subGroupSize":3,"matchLabelKeys":["part"]}]`,
		}))
	c, err := Load(context.Background(), Clients{Kube: kubefake.NewClientset(kube...),
		Topology: topologyfake.NewSimpleClientset(topology...), Scheduling: schedfake.NewSimpleClientset(scheduling...)})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"short":      "the scheduler holds the members back before it plans: waiting for PodGroup team-f/short to have 4 members (minMember); 3 exist",
		"unlabelled": `the scheduler holds the members back before it plans: PodGroup team-f/unlabelled: member unlabelled-2: sub-group policy "part" needs its label(s) part, which it does not have`,
	} {
		e, err := c.Explain("team-f", name, "")
		if err != nil {
			t.Fatal(err)
		}
		if e.Search == nil || e.Search.Fits || e.Search.Verdict != want {
			t.Fatalf("%s: search %+v, want it not to fit with the verdict %q", name, e.Search, want)
		}
		for _, tier := range e.Search.Tiers {
			for _, cand := range tier.Candidates {
				if strings.Contains(cand.Reason, "planner picks") {
					t.Errorf("%s: candidate %s: %q while the members are held back", name, cand.Name, cand.Reason)
				}
			}
		}
	}
}

// TestExplainLeavesOutEventsOfEarlierObjects: Events of an earlier PodGroup or pod of the same
// name (deleted and created again) are not the scheduler's words about this one.
func TestExplainLeavesOutEventsOfEarlierObjects(t *testing.T) {
	kube, topology, scheduling := testObjects()
	pod := memberPod("team-g", "again-0", "again", "", nil)
	pod.UID = "pod-new"
	pg := podGroup("team-g", "again", 1, nil)
	pg.UID = "pg-new"
	withUID := func(e *v1.Event, uid types.UID) *v1.Event { e.InvolvedObject.UID = uid; return e }
	kube = append(kube, pod,
		withUID(event("team-g", "e1", "PodGroup", "again", v1.EventTypeWarning, "TopologyUnsatisfiable", "about the earlier PodGroup", time.Hour, 1), "pg-old"),
		withUID(event("team-g", "e2", "PodGroup", "again", v1.EventTypeNormal, "GangWaiting", "about this PodGroup", time.Minute, 1), "pg-new"),
		withUID(event("team-g", "e3", "Pod", "again-0", v1.EventTypeWarning, "FailedScheduling", "about the earlier pod", time.Hour, 1), "pod-old"),
		withUID(event("team-g", "e4", "Pod", "again-0", v1.EventTypeWarning, "FailedScheduling", "about this pod", 2*time.Minute, 1), "pod-new"),
		event("team-g", "e5", "Pod", "again-0", v1.EventTypeNormal, "Nominated", "without a UID", 3*time.Minute, 1))
	c, err := Load(context.Background(), Clients{Kube: kubefake.NewClientset(kube...),
		Topology: topologyfake.NewSimpleClientset(topology...), Scheduling: schedfake.NewSimpleClientset(append(scheduling, pg)...)})
	if err != nil {
		t.Fatal(err)
	}
	c.Now = now
	e, err := c.Explain("team-g", "again", "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range e.Scheduler.Events {
		got = append(got, ev.Message)
	}
	if diff := cmp.Diff([]string{"about this PodGroup", "about this pod", "without a UID"}, got); diff != "" {
		t.Errorf("Events (-want,+got):\n%s", diff)
	}
}

// TestExplainLeavesOutWhatDRAProvides: GPUs that a DeviceClass provides through DRA are in no
// node's allocatable; capacity is counted from the other requests and the report says which
// resource it left out. When DeviceClasses cannot be read, explain warns instead.
func TestExplainLeavesOutWhatDRAProvides(t *testing.T) {
	// objects are two nodes without GPUs in their allocatable and two members requesting
	// 4 GPUs by the given name.
	objects := func(gpu v1.ResourceName) []runtime.Object {
		var objs []runtime.Object
		for _, name := range []string{"d0", "d1"} {
			n := gpuNode(name)
			delete(n.Status.Allocatable, "nvidia.com/gpu")
			objs = append(objs, n)
		}
		for _, name := range []string{"dra-0", "dra-1"} {
			p := memberPod("team-h", name, "dra", "", nil)
			requests := p.Spec.Containers[0].Resources.Requests
			delete(requests, "nvidia.com/gpu")
			requests[gpu] = resource.MustParse("4")
			p.Spec.Containers[0].Resources.Limits = v1.ResourceList{gpu: resource.MustParse("4")}
			objs = append(objs, p)
		}
		return objs
	}
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.nvidia.com"},
		Spec: resourcev1.DeviceClassSpec{ExtendedResourceName: ptr.To("nvidia.com/gpu")}}
	for _, tc := range []struct {
		name       string
		gpu        v1.ResourceName
		forbidden  bool
		notCounted []string
		holds      int
		warning    string
	}{
		{name: "DeviceClasses read", gpu: "nvidia.com/gpu", notCounted: []string{"nvidia.com/gpu"}, holds: 2},
		// A class also answers to its implicit name.
		{name: "the class's implicit name", gpu: "deviceclass.resource.kubernetes.io/gpu.nvidia.com",
			notCounted: []string{"deviceclass.resource.kubernetes.io/gpu.nvidia.com"}, holds: 2},
		{name: "DeviceClasses forbidden", gpu: "nvidia.com/gpu", forbidden: true, holds: 0,
			warning: "no node has nvidia.com/gpu in its allocatable, and DeviceClasses could not be read to tell whether DRA provides it (then its capacity figures are wrong): deviceclasses.resource.k8s.io is forbidden: RBAC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := kubefake.NewClientset(append(objects(tc.gpu), class)...)
			if tc.forbidden {
				kube.PrependReactor("list", "deviceclasses", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "resource.k8s.io", Resource: "deviceclasses"}, "", errors.New("RBAC"))
				})
			}
			c, err := Load(context.Background(), Clients{Kube: kube,
				Topology:   topologyfake.NewSimpleClientset(hntesting.MakeHyperNode("leaf").Tier(1).Nodes("d0", "d1").Obj()),
				Scheduling: schedfake.NewSimpleClientset(podGroup("team-h", "dra", 2, map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`}))})
			if err != nil {
				t.Fatal(err)
			}
			e, err := c.Explain("team-h", "dra", "cpu")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.notCounted, e.Search.NotCounted); diff != "" {
				t.Errorf("not counted (-want,+got):\n%s", diff)
			}
			if got := e.Search.Tiers[0].Candidates[0].Holds; got != tc.holds {
				t.Errorf("the leaf holds %d of the 2 pods, want %d", got, tc.holds)
			}
			var warnings []string
			if tc.warning != "" {
				warnings = []string{tc.warning}
			}
			if diff := cmp.Diff(warnings, e.Warnings); diff != "" {
				t.Errorf("warnings (-want,+got):\n%s", diff)
			}
		})
	}
}
