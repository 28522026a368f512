package inspect

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
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
