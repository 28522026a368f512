package inspect

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/jobspec"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// planJob is a job of n members of 4 GPUs (memberPod's shape) with a topology annotation,
// ranked 0..n-1.
func planJob(n int, topology string) *jobspec.Job {
	pg := podGroup("team-x", "new", int32(n), map[string]string{podgroup.NetworkTopologyAnnotation: topology})
	job := &jobspec.Job{Kind: "PodGroup", Namespace: "team-x", Name: "new", PodGroup: pg, PodGroupFrom: jobspec.FromFile}
	for i := range n {
		p := memberPod("team-x", "new-"+string(rune('0'+i)), "new", "", nil)
		p.Annotations = map[string]string{podgroup.RankAnnotation: string(rune('0' + i))}
		job.Members = append(job.Members, p)
	}
	return job
}

// placedMembers is "pod@leaf" per planned member, in rank order.
func placedMembers(pl *PlannedPlacement) []string {
	var out []string
	for _, m := range pl.Members {
		out = append(out, m.Pod+"@"+m.Leaf)
	}
	return out
}

// TestPlanPlacesAsThePlannerDoes: on the test cluster (free GPUs per leaf s0 4, s1 12, s2 16,
// s3 8 with s3-n0 cordoned), 4 members of 4 GPUs in one leaf go to s2, the only leaf that
// holds them; 6 members with a soft constraint at tier 1 go to spine s5 over 2 leaves, the
// fewest that could hold them.
func TestPlanPlacesAsThePlannerDoes(t *testing.T) {
	c := loadTestCluster(t)
	r, err := c.Plan(planJob(4, `{"mode":"hard","highestTierAllowed":1}`), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Placed || r.WaitsFor != nil || r.Note != NothingChanged {
		t.Fatalf("placed %v, waitsFor %+v, note %q", r.Placed, r.WaitsFor, r.Note)
	}
	want := &PlannedPlacement{Domain: "s2", Tier: 1, TierName: "leaf", Leaves: 1, MinLeaves: 1}
	for i := range 4 {
		want.Members = append(want.Members, PlannedMember{Pod: "new-" + string(rune('0'+i)), Rank: ptr.To(i), Leaf: "s2"})
	}
	if diff := cmp.Diff(want, r.Placement); diff != "" {
		t.Errorf("placement (-want +got):\n%s", diff)
	}

	r, err = c.Plan(planJob(6, `{"mode":"soft","highestTierAllowed":1}`), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Placed || r.Placement.Domain != "s5" || r.Placement.Leaves != 2 || r.Placement.MinLeaves != 2 {
		t.Fatalf("placement %+v", r.Placement)
	}
	if diff := cmp.Diff([]string{"new-0@s2", "new-1@s2", "new-2@s2", "new-3@s2", "new-4@s3", "new-5@s3"}, placedMembers(r.Placement)); diff != "" {
		t.Errorf("members (-want +got):\n%s", diff)
	}
	wantText(t, func(w io.Writer) error { return WritePlan(w, r) },
		"PodGroup team-x/new: would start now (nothing was created or evicted)",
		"Placement: s5, tier 2 (spine); 2 leaves (the fewest that could hold them: 2)",
		"  s2: new-0 (rank 0), new-1 (rank 1), new-2 (rank 2), new-3 (rank 3)",
		"  s3: new-4 (rank 4), new-5 (rank 5)",
	)
}

// waitCluster: leaves l0 and l1 (two 8-GPU nodes each) under spine sp. Gang team-a/running
// (2 pods of 8 GPUs, priority 10, 2h) fills l0; pods web (4 GPUs, 30m) and batch (4 GPUs,
// 1h) share l1 with 8 GPUs free.
func waitCluster(t *testing.T) *Cluster {
	started := func(p *v1.Pod, ago time.Duration, priority int32) *v1.Pod {
		p.Status.StartTime = &metav1.Time{Time: now.Add(-ago)}
		p.Spec.Priority = &priority
		return p
	}
	gpus := func(p *v1.Pod, n string) *v1.Pod {
		p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse(n)
		return p
	}
	kube := []runtime.Object{gpuNode("l0-n0"), gpuNode("l0-n1"), gpuNode("l1-n0"), gpuNode("l1-n1"),
		started(gpus(memberPod("team-a", "running-0", "running", "l0-n0", nil), "8"), 2*time.Hour, 10),
		started(gpus(memberPod("team-a", "running-1", "running", "l0-n1", nil), "8"), 2*time.Hour, 10),
		started(memberPod("team-b", "web", "", "l1-n0", nil), 30*time.Minute, 0),
		started(memberPod("team-b", "batch", "", "l1-n1", nil), time.Hour, 0),
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000},
	}
	for _, p := range kube[6:8] {
		delete(p.(*v1.Pod).Labels, "scheduling.x-k8s.io/pod-group")
	}
	topology := []runtime.Object{
		hntesting.MakeHyperNode("l0").Tier(1).Nodes("l0-n0", "l0-n1").Obj(),
		hntesting.MakeHyperNode("l1").Tier(1).Nodes("l1-n0", "l1-n1").Obj(),
		hntesting.MakeHyperNode("sp").Tier(2).Children("l0", "l1").Obj(),
	}
	c := loadObjects(t, kube, topology, nil)
	c.PriorityClasses = []*schedulingv1.PriorityClass{kube[8].(*schedulingv1.PriorityClass)}
	return c
}

// TestPlanSaysWhatTheJobWaitsFor: 2 members of 12 GPUs (one per node) in one leaf: l0 holds
// none until gang running ends, l1 none until both web and batch end (free 4 per node).
// The plan names the domain needing the fewest to finish, l0, and its one occupant.
func TestPlanSaysWhatTheJobWaitsFor(t *testing.T) {
	c := waitCluster(t)
	job := planJob(2, `{"mode":"hard","highestTierAllowed":1}`)
	for _, p := range job.Members {
		p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("6")
		p.Spec.PriorityClassName = "high"
	}
	r, err := c.Plan(job, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Placed || r.Placement != nil || r.Priority != 1000 {
		t.Fatalf("placed %v, placement %+v, priority %d", r.Placed, r.Placement, r.Priority)
	}
	want := &WaitsForReport{Domain: "l0", Tier: 1, Holds: 0, Needs: 2, Running: 1, Occupants: []OccupantReport{
		{Kind: "PodGroup", Name: "team-a/running", Pods: 2, Priority: 10, Since: now.Add(-2 * time.Hour), Age: "120m", Frees: 2}}}
	if diff := cmp.Diff(want, r.WaitsFor); diff != "" {
		t.Errorf("waitsFor (-want +got):\n%s", diff)
	}
	wantText(t, func(w io.Writer) error { return WritePlan(w, r) },
		"PodGroup team-x/new: would NOT start now (nothing was created or evicted)",
		"What it waits for: in l0 (tier 1), which holds 0 of the 2 pods now, 1 of the 1 gangs and pods running there would have to finish:",
		"  PodGroup team-a/running (2 pods, priority 10, running 120m); frees room for 2",
	)

	// With the spine allowed, l1's and l0's room add up: nothing to wait for, it fits.
	r, err = c.Plan(planJob(2, `{"mode":"hard","highestTierAllowed":2}`), PlanOptions{Priority: ptr.To[int32](5)})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Placed || r.Placement.Domain != "l1" || r.Priority != 5 {
		t.Fatalf("placed %v in %+v at priority %d", r.Placed, r.Placement, r.Priority)
	}
}

// TestPlanWithoutAPlace: a job no allowed domain holds even empty says so; a job held back
// before planning (fewer pods than minMember) and one with an invalid constraint name no
// domain to wait for; a missing priority class is refused as admission refuses it.
func TestPlanWithoutAPlace(t *testing.T) {
	c := waitCluster(t)
	r, err := c.Plan(planJob(5, `{"mode":"hard","highestTierAllowed":1}`), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := &WaitsForReport{Needs: 5, Reason: "no allowed domain would hold the job even if everything running in it finished"}
	if diff := cmp.Diff(want, r.WaitsFor); r.Placed || diff != "" {
		t.Errorf("placed %v; waitsFor (-want +got):\n%s", r.Placed, diff)
	}

	job := planJob(2, `{"mode":"hard","highestTierAllowed":1}`)
	job.PodGroup.Spec.MinMember = 3
	r, err = c.Plan(job, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantVerdict := "the scheduler holds the members back before it plans: waiting for PodGroup team-x/new to have 3 members (minMember); 2 exist"
	if r.Placed || r.WaitsFor != nil || r.Search.Verdict != wantVerdict {
		t.Errorf("placed %v, waitsFor %+v, verdict %q", r.Placed, r.WaitsFor, r.Search.Verdict)
	}

	r, err = c.Plan(planJob(2, `{"mode":"hard","highestTierAllowed":"one"}`), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Placed || r.Search != nil || r.NetworkTopology == nil || !strings.HasPrefix(r.NetworkTopology.Error, "annotation hypernode.dev/network-topology: is not a valid constraint") {
		t.Errorf("placed %v, search %+v, topology %+v", r.Placed, r.Search, r.NetworkTopology)
	}

	// Members of two shapes (a launcher and two workers of 8 GPUs): room is not counted for
	// one of them as if it were the job's.
	job = planJob(3, `{"mode":"hard","highestTierAllowed":1}`)
	job.Members[0].Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
	for _, p := range job.Members[1:] {
		p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("8")
	}
	r, err = c.Plan(job, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (&WaitsForReport{Needs: 3, Reason: "not counted for members of several pod shapes: the candidates above say what each domain misses"}); r.Placed || !cmp.Equal(want, r.WaitsFor) {
		t.Errorf("placed %v, waits for %+v", r.Placed, r.WaitsFor)
	}

	job = planJob(1, `{"mode":"soft"}`)
	job.Members[0].Spec.PriorityClassName = "missing"
	if _, err := c.Plan(job, PlanOptions{}); err == nil || err.Error() != "pod new-0: no PriorityClass with name missing was found (the API server would refuse the pod)" {
		t.Errorf("error %v", err)
	}
}

// TestCapacityCountsPerTier: pods of 4 GPUs on the test cluster (GPUs free per node: s0-n0 0,
// s0-n1 4, s1-n0 4, s1-n1 8, s2-n* 8, s3-n0 cordoned, s3-n1 8, bad-n0 8 in no usable leaf,
// loose-0 not ready).
func TestCapacityCountsPerTier(t *testing.T) {
	c := loadTestCluster(t)
	r := c.Capacity(memberPod("x", "shape", "", "", nil), "")
	got := map[int]string{}
	for _, tier := range r.Tiers {
		var cands []string
		for _, d := range tier.Candidates {
			cands = append(cands, fmt.Sprintf("%s=%d", d.Name, d.Holds))
		}
		got[tier.Tier] = fmt.Sprintf("%s:%d %s", tier.Domain, tier.Largest, strings.Join(cands, ","))
	}
	want := map[int]string{1: "s2:4 s2=4,s1=3,s3=2", 2: "s5:6 s5=6,s4=4", 3: "s6:10 s6=10"}
	root := c.snap.RootTier()
	want[root] = "<cluster>:12 <cluster>=12"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tiers (-want +got):\n%s", diff)
	}
	if r.UnusableNodes != 2 || r.Tiers[0].More != 1 {
		t.Errorf("unusable nodes %d, tier 1 more %d", r.UnusableNodes, r.Tiers[0].More)
	}
	wantText(t, func(w io.Writer) error { return WriteCapacity(w, r) },
		"  tier 1 (leaf): 4 pods in s2 (next: s1 3, s3 2, +1 more)",
		"  tier 2 (spine): 6 pods in s5 (next: s4 4)",
		"  2 nodes take no pod of this shape (taints, node selection, not ready or cordoned)",
	)
}

// wantText fails the test unless what write writes has each line's words in a row,
// wherever the printer wrapped them.
func wantText(t *testing.T, write func(io.Writer) error, lines ...string) {
	t.Helper()
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		t.Fatal(err)
	}
	words := strings.Join(strings.Fields(buf.String()), " ")
	for _, line := range lines {
		if !strings.Contains(words, strings.Join(strings.Fields(line), " ")) {
			t.Errorf("output lacks %q:\n%s", line, buf.String())
		}
	}
}

// TestPlanCountsRoomTogether: on l0's only node two pods of 4 GPUs: neither alone makes room
// for a member of 8, both do; l1's node holds an earlier pod of the job's own PodGroup, which
// the plan counts as gone (and warns of).
func TestPlanCountsRoomTogether(t *testing.T) {
	gpus := func(p *v1.Pod, n string) *v1.Pod {
		p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse(n)
		p.Spec.Containers[0].Resources.Limits = nil
		p.Status.StartTime = &metav1.Time{Time: now.Add(-time.Hour)}
		p.UID = types.UID(p.Name)
		return p
	}
	a, b := gpus(memberPod("team-b", "a", "", "l0-n0", nil), "4"), gpus(memberPod("team-b", "b", "", "l0-n0", nil), "4")
	for _, p := range []*v1.Pod{a, b} {
		delete(p.Labels, "scheduling.x-k8s.io/pod-group")
	}
	old := gpus(memberPod("team-x", "new-old", "new", "l1-n0", nil), "8")
	topology := []runtime.Object{
		hntesting.MakeHyperNode("l0").Tier(1).Nodes("l0-n0").Obj(),
		hntesting.MakeHyperNode("l1").Tier(1).Nodes("l1-n0").Obj(),
	}
	job := func() *jobspec.Job {
		j := planJob(1, `{"mode":"hard","highestTierAllowed":1}`)
		gpus(j.Members[0], "8")
		return j
	}

	c := loadObjects(t, []runtime.Object{gpuNode("l0-n0"), a, b}, topology[:1], nil)
	r, err := c.Plan(job(), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	if r.WaitsFor != nil {
		for _, o := range r.WaitsFor.Occupants {
			names = append(names, o.Name)
		}
	}
	if r.Placed || r.WaitsFor == nil || r.WaitsFor.Domain != "l0" || !slices.Equal(names, []string{"team-b/a", "team-b/b"}) {
		t.Errorf("placed %v, waits for %+v (%v); want l0 and both pods", r.Placed, r.WaitsFor, names)
	}

	c = loadObjects(t, []runtime.Object{gpuNode("l0-n0"), gpuNode("l1-n0"), a, b, old}, topology, nil)
	r, err = c.Plan(job(), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Placed || r.Placement.Domain != "l1" || len(r.Warnings) != 1 ||
		r.Warnings[0] != "PodGroup team-x/new already has 1 live pods in the cluster; the plan is for the job alone, as if they were gone" {
		t.Errorf("placed %v in %+v, warnings %q; want l1 and the warning", r.Placed, r.Placement, r.Warnings)
	}
}
