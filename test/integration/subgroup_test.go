package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// seed003Tree: two tier-2 HyperNodes, each with two leaves of four 4-CPU nodes.
func seed003Tree() (map[string]string, []*topologyv1alpha1.HyperNode, map[string]string) {
	nodes := map[string]string{}
	leafOf := map[string]string{}
	var hns []*topologyv1alpha1.HyperNode
	for l := range 4 {
		var members []topologyv1alpha1.MemberSpec
		for i := range 4 {
			n := fmt.Sprintf("node-%d", 4*l+i)
			nodes[n] = "4"
			leafOf[n] = fmt.Sprintf("leaf-%d", l)
			members = append(members, hntesting.NodeMember(n))
		}
		hns = append(hns, hntesting.MakeHyperNode(fmt.Sprintf("leaf-%d", l)).Tier(1).Members(members...).Obj())
	}
	hns = append(hns,
		hntesting.MakeHyperNode("t2-a").Tier(2).Children("leaf-0", "leaf-1").Obj(),
		hntesting.MakeHyperNode("t2-b").Tier(2).Children("leaf-2", "leaf-3").Obj())
	return nodes, hns, leafOf
}

var spineOf = map[string]string{"leaf-0": "t2-a", "leaf-1": "t2-a", "leaf-2": "t2-b", "leaf-3": "t2-b"}

const partitionPolicy = `[{"name":"tp","subGroupSize":4,"minSubGroups":%d,"matchLabelKeys":["partition"],"networkTopology":{"mode":"hard","highestTierAllowed":1}}]`

// job creates a PodGroup with the given annotations and members of 4 CPUs; labels(i) gives
// member i's extra labels.
func (e *topoEnv) job(name string, minMember, size int, annotations map[string]string, labels func(i int) map[string]string) []string {
	e.t.Helper()
	if err := util.CreatePodGroup(context.Background(), e.c.scheduling, util.PodGroup(e.ns, name, int32(minMember), annotations)); err != nil {
		e.t.Fatal(err)
	}
	pods := util.GangPods(e.ns, name, plugins.SchedulerName, "4", size)
	for i, p := range pods {
		for k, v := range labels(i) {
			p.Labels[k] = v
		}
	}
	names, err := util.CreatePods(context.Background(), e.c.kube, pods...)
	if err != nil {
		e.t.Fatal(err)
	}
	return names
}

func partitionLabel(size int) func(i int) map[string]string {
	return func(i int) map[string]string { return map[string]string{"partition": fmt.Sprint(i / size)} }
}

// leavesOf returns the leaf of each pod's node.
func leavesOf(placements map[string]string, leafOf map[string]string, pods []string) map[string]bool {
	out := map[string]bool{}
	for _, p := range pods {
		out[leafOf[placements[p]]] = true
	}
	return out
}

func onlyKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}

// Test 1: seed 003: job hard at tier 2, two partitions of 4 hard at tier 1: each partition in
// one leaf, the whole job in one tier-2 HyperNode.
func TestSubGroupsSeed003(t *testing.T) {
	nodes, hns, leafOf := seed003Tree()
	e := newTopoEnv(t, nodes, nil, hns...)
	startScheduler(t, nil)
	names := e.job("train", 8, 8, map[string]string{
		podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":2}`,
		podgroup.SubGroupPolicyAnnotation:  fmt.Sprintf(partitionPolicy, 2),
	}, partitionLabel(4))
	got := e.waitBound(names)
	l0, l1 := leavesOf(got, leafOf, names[:4]), leavesOf(got, leafOf, names[4:])
	if len(l0) != 1 || len(l1) != 1 || onlyKey(l0) == onlyKey(l1) || spineOf[onlyKey(l0)] != spineOf[onlyKey(l1)] {
		t.Errorf("partitions in leaves %v and %v; want one leaf each, different, under one tier-2 HyperNode", l0, l1)
	}
}

// Test 2: the partitions fit leaves, the whole job fits no tier-2 HyperNode: pending, with the
// job-level explanation.
func TestSubGroupsJobLevelDoesNotFit(t *testing.T) {
	nodes, hns, _ := seed003Tree()
	e := newTopoEnv(t, nodes, nil, hns...)
	e.filler("node-4", "4")  // t2-a: leaf-0 4 free, leaf-1 3 free
	e.filler("node-12", "4") // t2-b: leaf-2 4 free, leaf-3 3 free
	startScheduler(t, nil)
	names := e.job("train", 8, 8, map[string]string{
		podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":2}`,
		podgroup.SubGroupPolicyAnnotation:  fmt.Sprintf(partitionPolicy, 2),
	}, partitionLabel(4))
	e.waitCondition(names[0], v1.PodReasonUnschedulable,
		"job hard topology (tier<=2): no HyperNode can host 8 pods; tier 1: leaf-0 4/8, leaf-2 4/8 (+2 more); tier 2: t2-a 7/8, t2-b 7/8")
	e.expectOnlyFillersBound()
}

func (e *topoEnv) expectOnlyFillersBound() {
	e.t.Helper()
	for pod := range e.bound() {
		if len(pod) < 7 || pod[:7] != "filler-" {
			e.t.Fatalf("%s is bound", pod)
		}
	}
}

// Test 3: minSubGroups 2 of 3 partitions, room for exactly 2: two whole partitions bind, the
// third stays pending, none partially.
func TestSubGroupsMinSubGroups(t *testing.T) {
	nodes, hns, leafOf := seed003Tree()
	e := newTopoEnv(t, nodes, nil, hns...)
	for i := 8; i < 16; i++ {
		e.filler(fmt.Sprintf("node-%d", i), "4") // t2-b is full: room for exactly 2 partitions
	}
	startScheduler(t, nil)
	names := e.job("train", 8, 12, map[string]string{
		podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":2}`,
		podgroup.SubGroupPolicyAnnotation:  fmt.Sprintf(partitionPolicy, 2),
	}, partitionLabel(4))
	got := e.waitBound(names[:8])
	key := e.ns + "/train"
	for i := 8; i < 12; i++ {
		// The plan names the domain the job runs in, and the left-out sub-group preempts
		// nothing: the job has what it needs.
		e.waitCondition(names[i], v1.PodReasonUnschedulable, "gang "+key+": sub-group tp-2 does not fit next to the job's other sub-groups in t2-a now. "+
			"preemption: not attempted: gang "+key+" is planned without this member, which waits for room, "+
			"gang "+key+": sub-group tp-2: this member cannot be placed, so no member of the sub-group binds")
	}
	// Nothing of tp-2 was waiting: no member failing there reports a rejection, and a plan
	// that places nobody (tp-2 planned again after the others reserved) is announced as nothing.
	events := e.eventsByReason()
	if rejected := events["GangRejected"]; len(rejected) > 0 {
		t.Errorf("GangRejected Events for a sub-group left out by the plan: %q", rejected)
	}
	for _, note := range events["TopologyPlanned"] {
		if !strings.Contains(note, ": 8 pending members over leaves [leaf-0 leaf-1]") {
			t.Errorf("TopologyPlanned %q, want only the plan of the 8 members", note)
		}
	}
	bound := e.bound()
	for _, n := range names[8:] {
		if _, ok := bound[n]; ok {
			t.Errorf("%s of the third partition is bound", n)
		}
	}
	if l := leavesOf(got, leafOf, names[:4]); len(l) != 1 {
		t.Errorf("partition 0 spans %v", l)
	}
	if l := leavesOf(got, leafOf, names[4:8]); len(l) != 1 {
		t.Errorf("partition 1 spans %v", l)
	}
}

// Test 4: one partition's pods are deleted and recreated: they return inside the job's
// domain, the other partition is untouched.
func TestSubGroupsReplacement(t *testing.T) {
	nodes, hns, leafOf := seed003Tree()
	e := newTopoEnv(t, nodes, nil, hns...)
	startScheduler(t, nil)
	annotations := map[string]string{
		podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":2}`,
		podgroup.SubGroupPolicyAnnotation:  fmt.Sprintf(partitionPolicy, 2),
	}
	names := e.job("train", 8, 8, annotations, partitionLabel(4))
	first := e.waitBound(names)
	domain := spineOf[leafOf[first[names[0]]]]
	ctx := context.Background()
	for _, n := range names[4:] {
		e.deletePodNow(n)
	}
	pods := util.GangPods(e.ns, "train", plugins.SchedulerName, "4", 8)[4:]
	for _, p := range pods {
		p.Labels["partition"] = "1"
	}
	if _, err := util.CreatePods(ctx, e.c.kube, pods...); err != nil {
		t.Fatal(err)
	}
	second := e.waitBound(names[4:])
	if l := leavesOf(second, leafOf, names[4:]); len(l) != 1 || spineOf[onlyKey(l)] != domain {
		t.Errorf("the recreated partition is in %v, want one leaf of %s", l, domain)
	}
	now := e.bound()
	for _, n := range names[:4] {
		if now[n] != first[n] {
			t.Errorf("%s moved from %s to %s", n, first[n], now[n])
		}
	}
}

// Test 5: partitions derived from the Job completion index (partitionSize), as an Indexed
// Job or a JobSet sets it: pods 0-3 share a leaf, so do pods 4-7.
func TestSubGroupsFromIndex(t *testing.T) {
	nodes, hns, leafOf := seed003Tree()
	e := newTopoEnv(t, nodes, nil, hns...)
	startScheduler(t, nil)
	names := e.job("indexed", 8, 8, map[string]string{
		podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":2}`,
		podgroup.SubGroupPolicyAnnotation:  `[{"name":"tp","subGroupSize":4,"partitionSize":4,"networkTopology":{"mode":"hard","highestTierAllowed":1}}]`,
	}, func(i int) map[string]string {
		return map[string]string{"batch.kubernetes.io/job-completion-index": fmt.Sprint(i)}
	})
	got := e.waitBound(names)
	l0, l1 := leavesOf(got, leafOf, names[:4]), leavesOf(got, leafOf, names[4:])
	if len(l0) != 1 || len(l1) != 1 || onlyKey(l0) == onlyKey(l1) {
		t.Errorf("index partitions in %v and %v; want one leaf each", l0, l1)
	}
}

// Test 6: every bad sub-group annotation keeps the members pending with the exact message.
func TestSubGroupsBadAnnotations(t *testing.T) {
	nodes, hns, _ := seed003Tree()
	e := newTopoEnv(t, nodes, nil, hns...)
	startScheduler(t, nil)
	const a = "annotation hypernode.dev/subgroup-policy: "
	tests := []struct {
		group, policy, want string
	}{
		{"json", `[{"name":`, a + "is not a valid policy list: unexpected EOF"},
		{"dup", `[{"name":"tp","subGroupSize":1,"matchLabelKeys":["a"]},{"name":"tp","subGroupSize":1,"matchLabelKeys":["b"]}]`, a + `policy name "tp" is used twice`},
		{"size", `[{"name":"tp","subGroupSize":0,"matchLabelKeys":["a"]}]`, a + `policy "tp": subGroupSize must be at least 1, got 0`},
		{"tier", `[{"name":"tp","subGroupSize":1,"matchLabelKeys":["a"],"networkTopology":{"highestTierAllowed":3}}]`, a + `policy "tp": highestTierAllowed 3 is above the job's 2`},
	}
	var pods []string
	for _, tc := range tests {
		pods = append(pods, e.job(tc.group, 1, 1, map[string]string{
			podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":2}`,
			podgroup.SubGroupPolicyAnnotation:  tc.policy,
		}, func(int) map[string]string { return nil })...)
	}
	for i, tc := range tests {
		e.waitCondition(pods[i], "SchedulingGated", fmt.Sprintf("PodGroup %s/%s: %s", e.ns, tc.group, tc.want))
	}
	e.expectNoneBound()
	pg, err := e.c.scheduling.SchedulingV1alpha1().PodGroups(e.ns).Get(context.Background(), "dup", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitForObjectEvent(t, e.c, e.ns, "PodGroup", pg.UID, "InvalidSubGroupPolicy", plugins.SchedulerName,
		fmt.Sprintf("PodGroup %s/dup: %s", e.ns, tests[1].want))
}
