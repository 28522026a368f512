package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/gang"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// draOnlyClass is the DeviceClass of TestTopologyDRA*: GPUs that exist only as DRA devices
// (no extended resource names them).
const draOnlyClass = "gpu.dra.test"

// publishDRADevices creates a DeviceClass selecting the devices of driver and a ResourceSlice
// of count devices on each node (its pool named after the node), and deletes them when the
// test ends. extendedResource, when set, makes the class provide that resource.
func publishDRADevices(t *testing.T, c clients, class, driver string, extendedResource *string, nodes []string, count int, edits ...func(*resourcev1.ResourceSlice)) {
	t.Helper()
	ctx := context.Background()
	api := c.kube.ResourceV1()
	dc := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: resourcev1.DeviceClassSpec{
			Selectors:            []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)}}},
			ExtendedResourceName: extendedResource,
		},
	}
	if _, err := api.DeviceClasses().Create(ctx, dc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := api.DeviceClasses().Delete(ctx, dc.Name, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	})
	for _, node := range nodes {
		slice := &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
			Spec: resourcev1.ResourceSliceSpec{
				Driver:   driver,
				Pool:     resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
				NodeName: ptr.To(node),
			},
		}
		for i := range count {
			slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i)})
		}
		for _, edit := range edits {
			edit(slice)
		}
		if _, err := api.ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := api.ResourceSlices().Delete(ctx, slice.Name, metav1.DeleteOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
}

// startClaimController runs the resource claim controller for the test.
func startClaimController(t *testing.T, c clients) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := util.StartClaimController(ctx, c.kube); err != nil {
		t.Fatal(err)
	}
}

// claimTemplate creates a ResourceClaimTemplate asking for count devices of class.
func (e *topoEnv) claimTemplate(name, class string, count int64) {
	e.t.Helper()
	tmpl := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count,
			}}},
		}}},
	}
	if _, err := e.c.kube.ResourceV1().ResourceClaimTemplates(e.ns).Create(context.Background(), tmpl, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// withClaimFrom makes a pod's container use a claim generated from the template.
func withClaimFrom(template string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: "gpus", ResourceClaimTemplateName: ptr.To(template)})
		p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, v1.ResourceClaim{Name: "gpus"})
	}
}

// allocatedDevices returns, per pod owning a claim, the devices allocated to its claims
// (pool/device, the pool named after the node).
func (e *topoEnv) allocatedDevices() map[string][]string {
	e.t.Helper()
	claims, err := e.c.kube.ResourceV1().ResourceClaims(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string][]string{}
	for _, claim := range claims.Items {
		if claim.Status.Allocation == nil {
			continue
		}
		owner := "?"
		if ref := metav1.GetControllerOf(&claim); ref != nil {
			owner = ref.Name
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			out[owner] = append(out[owner], r.Pool+"/"+r.Device)
		}
		slices.Sort(out[owner])
	}
	return out
}

// devicesOn lists node/gpu-0 .. node/gpu-(n-1).
func devicesOn(node string, n int) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = fmt.Sprintf("%s/gpu-%d", node, i)
	}
	return out
}

// TestTopologyDRAGangCountsDevices is issue #41's scenario: GPUs exist only as DRA devices
// (node-0 to node-3, 8 each), node-1 has 4 of them taken by a pod that also uses 4 of its 8
// CPUs, so leaf s0 (node-0, node-1) is the CPU-fuller leaf but holds one 8-GPU member; s1
// (node-2, node-3) holds two. A hard tier-1 gang of two members, each claiming 8 GPUs from a
// ResourceClaimTemplate, must land in s1 with both claims allocated there. Counting CPUs
// only, each node with a free GPU "held" every copy of a member, the plan chose s0, the
// second member failed with "cannot allocate all claims" and the gang never ran.
func TestTopologyDRAGangCountsDevices(t *testing.T) {
	names := []string{"node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"}
	e := newTopoEnv(t, nodesWithCPU("8", names...), nil, seedHyperNodes(t)...)
	publishDRADevices(t, e.c, draOnlyClass, draOnlyClass, nil, names[:4], 8)
	startClaimController(t, e.c)
	startScheduler(t, nil)
	e.claimTemplate("four-gpus", draOnlyClass, 4)
	e.claimTemplate("eight-gpus", draOnlyClass, 8)

	filler := util.Pod(e.ns, "filler", plugins.SchedulerName, "4", nil)
	withClaimFrom("four-gpus")(filler)
	onNode("node-1")(filler)
	if _, err := util.CreatePods(context.Background(), e.c.kube, filler); err != nil {
		t.Fatal(err)
	}
	if got := e.waitBound([]string{"filler"}); got["filler"] != "node-1" {
		t.Fatalf("filler bound to %v, want node-1", got)
	}

	members := e.gang("train", 2, `{"mode":"hard","highestTierAllowed":1}`, v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}, withClaimFrom("eight-gpus"))
	got := e.waitBound(members)
	nodes := slices.Sorted(maps.Values(got))
	if diff := cmp.Diff([]string{"node-2", "node-3"}, nodes); diff != "" {
		t.Errorf("gang placed on %v; nodes (-want +got):\n%s", got, diff)
	}
	want := map[string][]string{"filler": devicesOn("node-1", 4)}
	for pod, node := range got {
		want[pod] = devicesOn(node, 8)
	}
	if diff := cmp.Diff(want, e.allocatedDevices()); diff != "" {
		t.Errorf("allocated devices by pod (-want +got):\n%s", diff)
	}
}

// onNode pins a pod to a node by a required node affinity, for the scheduler to place (and
// allocate its claims) there.
func onNode(node string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{node}}}}},
		}}}
	}
}

// TestGangPreemptionFreesDRAVictims: low-priority pods hold all 8 DRA GPUs of node-0, node-1
// (leaf s0) and node-2 (leaf s1); node-3 is free. A high-priority hard tier-1 gang of two
// 8-GPU members fits in s1 once the pod on node-2 goes, in s0 once two go: exactly the pod
// on node-2 is evicted, and the gang binds on node-2 and node-3 with their devices. Without
// counting the victims' devices as freed, no domain held the gang and nothing was evicted.
func TestGangPreemptionFreesDRAVictims(t *testing.T) {
	names := []string{"node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"}
	e := newTopoEnv(t, nodesWithCPU("8", names...), nil, seedHyperNodes(t)...)
	publishDRADevices(t, e.c, draOnlyClass, draOnlyClass, nil, names[:4], 8)
	startClaimController(t, e.c)
	e.priorityClasses()
	startScheduler(t, nil)
	e.claimTemplate("eight-gpus", draOnlyClass, 8)
	var low []string
	for _, node := range names[:3] {
		pod := util.Pod(e.ns, "low-"+node, plugins.SchedulerName, "1", nil)
		pod.Spec.PriorityClassName = e.ns + "-low"
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
		withClaimFrom("eight-gpus")(pod)
		onNode(node)(pod)
		if _, err := util.CreatePods(context.Background(), e.c.kube, pod); err != nil {
			t.Fatal(err)
		}
		low = append(low, pod.Name)
	}
	e.waitBound(low)

	members := e.gang("train", 2, `{"mode":"hard","highestTierAllowed":1}`, v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
		withClaimFrom("eight-gpus"), func(p *v1.Pod) { p.Spec.PriorityClassName = e.ns + "-high" })
	got := e.waitBound(members)
	if diff := cmp.Diff([]string{"node-2", "node-3"}, slices.Sorted(maps.Values(got))); diff != "" {
		t.Errorf("gang placed on %v; nodes (-want +got):\n%s", got, diff)
	}
	if diff := cmp.Diff([]string{"low-node-0", "low-node-1"}, e.remaining("low-")); diff != "" {
		t.Errorf("low-priority pods left (-want +got):\n%s", diff)
	}
	want := map[string][]string{"low-node-0": devicesOn("node-0", 8), "low-node-1": devicesOn("node-1", 8)}
	for pod, node := range got {
		want[pod] = devicesOn(node, 8)
	}
	if diff := cmp.Diff(want, e.allocatedDevices()); diff != "" {
		t.Errorf("allocated devices by pod (-want +got):\n%s", diff)
	}
}

// claimTemplateFirstAvailable creates a ResourceClaimTemplate whose one request takes the
// first of the alternatives (counts of class devices) that can be allocated.
func (e *topoEnv) claimTemplateFirstAvailable(name, class string, counts ...int64) {
	e.t.Helper()
	request := resourcev1.DeviceRequest{Name: "gpus"}
	for _, n := range counts {
		request.FirstAvailable = append(request.FirstAvailable, resourcev1.DeviceSubRequest{
			Name: fmt.Sprintf("take-%d", n), DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: n,
		})
	}
	tmpl := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{request},
		}}},
	}
	if _, err := e.c.kube.ResourceV1().ResourceClaimTemplates(e.ns).Create(context.Background(), tmpl, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// claimingFiller schedules a plain pod of cpu CPUs on node, its claim from template (none: no claim),
// and waits until it is bound.
func (e *topoEnv) claimingFiller(name, node, cpu, template string) {
	e.t.Helper()
	pod := util.Pod(e.ns, name, plugins.SchedulerName, cpu, nil)
	if template != "" {
		withClaimFrom(template)(pod)
	}
	onNode(node)(pod)
	if _, err := util.CreatePods(context.Background(), e.c.kube, pod); err != nil {
		e.t.Fatal(err)
	}
	if got := e.waitBound([]string{name}); got[name] != node {
		e.t.Fatalf("%s bound to %v, want %s", name, got, node)
	}
}

// draLeaves is the cluster of the DRA tests: the seed tree, 8 CPUs per node, 8 DRA GPUs on
// node-0 to node-3 (leaves s0 and s1), the claim controller and the scheduler running.
func draLeaves(t *testing.T, edits ...func(*resourcev1.ResourceSlice)) *topoEnv {
	t.Helper()
	e := draNodes(t, edits...)
	startClaimController(t, e.c)
	startScheduler(t, nil)
	return e
}

// draNodes is draLeaves without the claim controller and the scheduler.
func draNodes(t *testing.T, edits ...func(*resourcev1.ResourceSlice)) *topoEnv {
	t.Helper()
	names := []string{"node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"}
	e := newTopoEnv(t, nodesWithCPU("8", names...), nil, seedHyperNodes(t)...)
	publishDRADevices(t, e.c, draOnlyClass, draOnlyClass, nil, names[:4], 8, edits...)
	return e
}

// TestTopologyDRAGangWaitsForItsClaims: the MPI job of TestTopologyDRAMixedGang, created
// while the resource claim controller is not running, so its workers' claims do not exist.
// The gang is held back, the launcher saying why and nothing bound; once the controller
// creates the claims the gang is planned with both workers' devices and binds in one leaf.
// (Without the hold, a member let in before the scheduler's registry saw its sibling's claim
// was refused with "ResourceClaim not created yet" and nothing requeued it.)
func TestTopologyDRAGangWaitsForItsClaims(t *testing.T) {
	e := draNodes(t)
	startScheduler(t, nil)
	e.claimTemplate("eight-gpus", draOnlyClass, 8)
	names := e.mpiJob("eight-gpus")
	e.waitCondition("launcher", gang.ReasonWaitingForGang, "waiting for the ResourceClaims that members of PodGroup "+e.ns+"/mpi request through ResourceClaimTemplates to be created")
	if bound := e.bound(); len(bound) != 0 {
		t.Fatalf("bound before the claims exist: %v", bound)
	}
	startClaimController(t, e.c)
	// The leaves tie; s0 comes first, and the launcher joins the first worker's node.
	got := e.waitBound(names)
	if diff := cmp.Diff(map[string]string{"launcher": "node-0", "mpi-1": "node-0", "mpi-2": "node-1"}, got); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
	want := map[string][]string{}
	for _, w := range names[1:] {
		want[w] = devicesOn(got[w], 8)
	}
	if diff := cmp.Diff(want, e.allocatedDevices()); diff != "" {
		t.Errorf("allocated devices by pod (-want +got):\n%s", diff)
	}
}

// mpiJob creates the MPI job of the DRA tests, hard at tier 1: PodGroup mpi, a 1-CPU launcher
// without claims and two 1-CPU workers (mpi-1, mpi-2), each with a claim from template; it
// returns the pods' names, the launcher first.
func (e *topoEnv) mpiJob(template string) []string {
	e.t.Helper()
	pg := util.PodGroup(e.ns, "mpi", 3, map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`})
	if err := util.CreatePodGroup(context.Background(), e.c.scheduling, pg); err != nil {
		e.t.Fatal(err)
	}
	pods := util.GangPods(e.ns, "mpi", plugins.SchedulerName, "1", 3)
	pods[0].Name = "launcher"
	for _, w := range pods[1:] {
		withClaimFrom(template)(w)
	}
	names, err := util.CreatePods(context.Background(), e.c.kube, pods...)
	if err != nil {
		e.t.Fatal(err)
	}
	return names
}

// TestTopologyDRAMixedGang: an MPI job, a 1-CPU launcher without claims and two workers
// claiming 8 GPUs each, hard at tier 1. node-1 has 4 GPUs and 4 CPUs taken, so s0 is the
// CPU-fuller leaf but holds one worker; s1 holds both. Planned with both shapes (a worker
// next to the launcher, FitNextTo), the job lands in s1.
func TestTopologyDRAMixedGang(t *testing.T) {
	e := draLeaves(t)
	e.claimTemplate("four-gpus", draOnlyClass, 4)
	e.claimTemplate("eight-gpus", draOnlyClass, 8)
	e.claimingFiller("filler", "node-1", "4", "four-gpus")
	names := e.mpiJob("eight-gpus")
	got := e.waitBound(names)
	if !within(got, "node-2", "node-3") || got[names[1]] == got[names[2]] {
		t.Errorf("job placed on %v, want the workers on node-2 and node-3 and the launcher in s1", got)
	}
	want := map[string][]string{"filler": devicesOn("node-1", 4)}
	for _, w := range names[1:] {
		want[w] = devicesOn(got[w], 8)
	}
	if diff := cmp.Diff(want, e.allocatedDevices()); diff != "" {
		t.Errorf("allocated devices by pod (-want +got):\n%s", diff)
	}
}

// TestTopologyDRAFirstAvailable: each member's request takes 8 GPUs, or else 4. s0 has 8
// free GPUs on node-0 and 4 on node-1: it holds two members (8, then 4). s1 has 8 free on
// node-2 and none on node-3, and is the CPU-fuller leaf: it holds one (the first member takes
// all 8 of node-2). The gang of two lands in s0, node-0 with 8 GPUs and node-1 with 4.
func TestTopologyDRAFirstAvailable(t *testing.T) {
	e := draLeaves(t)
	e.claimTemplate("four-gpus", draOnlyClass, 4)
	e.claimTemplate("eight-gpus", draOnlyClass, 8)
	e.claimTemplateFirstAvailable("eight-or-four", draOnlyClass, 8, 4)
	e.claimingFiller("filler-node-1", "node-1", "1", "four-gpus")
	e.claimingFiller("filler-node-3", "node-3", "6", "eight-gpus")
	members := e.gang("train", 2, `{"mode":"hard","highestTierAllowed":1}`, v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}, withClaimFrom("eight-or-four"))
	got := e.waitBound(members)
	want := map[string][]string{"filler-node-1": devicesOn("node-1", 4), "filler-node-3": devicesOn("node-3", 8)}
	for pod, node := range got {
		switch node {
		case "node-0":
			want[pod] = devicesOn("node-0", 8)
		case "node-1":
			want[pod] = []string{"node-1/gpu-4", "node-1/gpu-5", "node-1/gpu-6", "node-1/gpu-7"}
		default:
			t.Errorf("%s placed on %s, want node-0 or node-1", pod, node)
		}
	}
	if diff := cmp.Diff(want, e.allocatedDevices()); diff != "" {
		t.Errorf("allocated devices by pod (-want +got):\n%s", diff)
	}
}

// TestTopologyDRADeviceTaints: every GPU of node-1 carries a NoSchedule device taint the
// members do not tolerate, and node-1 has CPUs taken, so s0 is the CPU-fuller leaf but holds
// one 8-GPU member; the gang of two lands in s1.
func TestTopologyDRADeviceTaints(t *testing.T) {
	e := draLeaves(t, func(slice *resourcev1.ResourceSlice) {
		if ptr.Deref(slice.Spec.NodeName, "") != "node-1" {
			return
		}
		for i := range slice.Spec.Devices {
			slice.Spec.Devices[i].Taints = []resourcev1.DeviceTaint{{Key: "gpu.dra.test/unhealthy", Value: "ecc", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
		}
	})
	e.claimTemplate("eight-gpus", draOnlyClass, 8)
	e.claimingFiller("filler", "node-1", "4", "")
	members := e.gang("train", 2, `{"mode":"hard","highestTierAllowed":1}`, v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}, withClaimFrom("eight-gpus"))
	got := e.waitBound(members)
	if diff := cmp.Diff([]string{"node-2", "node-3"}, slices.Sorted(maps.Values(got))); diff != "" {
		t.Errorf("gang placed on %v; nodes (-want +got):\n%s", got, diff)
	}
}

// TestNormalPodScorePacksByDRADevices: every node's GPUs are DRA devices of a class without
// an extended resource; the args weigh the class's devices (deviceclass.resource.kubernetes.io/<class>).
// node-0 has 3 of its 8 CPUs taken and no GPU, node-5 1 CPU and 6 of its 8 GPUs: by CPUs s0
// is the fuller leaf, by the weighted CPUs and GPUs s2. A plain pod of 1 CPU and one GPU goes
// to s2. Without the devices counted, it went to s0.
func TestNormalPodScorePacksByDRADevices(t *testing.T) {
	names := []string{"node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"}
	e := newTopoEnv(t, nodesWithCPU("8", names...), nil, seedHyperNodes(t)...)
	publishDRADevices(t, e.c, draOnlyClass, draOnlyClass, nil, names, 8)
	startClaimController(t, e.c)
	startScheduler(t, map[string]map[string]any{"NetworkTopologyAware": {"hyperNodeBinPack": map[string]any{
		"cpu": 1, "memory": 1, "resources": map[string]any{resourcev1.ResourceDeviceClassPrefix + draOnlyClass: 2}}}})
	e.claimTemplate("one-gpu", draOnlyClass, 1)
	e.claimTemplate("six-gpus", draOnlyClass, 6)
	e.boundPod("cpu-filler", "node-0", v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}, nil)
	e.claimingFiller("gpu-filler", "node-5", "1", "six-gpus")
	web := util.Pod(e.ns, "web", plugins.SchedulerName, "1", nil)
	withClaimFrom("one-gpu")(web)
	if _, err := util.CreatePods(context.Background(), e.c.kube, web); err != nil {
		t.Fatal(err)
	}
	if got := e.waitBound([]string{"web"}); !within(got, "node-4", "node-5") {
		t.Errorf("plain pod placed on %v, want the leaf fuller by GPUs, s2 (node-4, node-5)", got)
	}
}

// TestImpossibleDRAGang: node-1 and node-3 have 4 of their 8 GPUs taken, so each leaf of
// GPUs (s0, s1) holds one 8-GPU member and a hard tier-1 gang of two fits nowhere: nothing is
// bound, no claim of the gang is allocated, and the members' condition says, per domain, how
// many devices are free against the 16 the gang needs.
func TestImpossibleDRAGang(t *testing.T) {
	e := draLeaves(t)
	e.claimTemplate("four-gpus", draOnlyClass, 4)
	e.claimTemplate("eight-gpus", draOnlyClass, 8)
	e.claimingFiller("filler-node-1", "node-1", "1", "four-gpus")
	e.claimingFiller("filler-node-3", "node-3", "1", "four-gpus")
	members := e.gang("train", 2, `{"mode":"hard","highestTierAllowed":1}`, v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}, withClaimFrom("eight-gpus"))
	msg := e.waitCondition(members[0], v1.PodReasonUnschedulable, "gpu.dra.test devices")
	want := "gpu.dra.test devices: each member claims 8, 2 members need 16; tier 1: s0 12 free, s1 12 free, s2 0 free"
	if !strings.Contains(msg, want) {
		t.Errorf("condition %q does not say %q", msg, want)
	}
	bound := e.bound()
	for _, m := range members {
		if node, ok := bound[m]; ok {
			t.Errorf("member %s bound to %s", m, node)
		}
	}
	if diff := cmp.Diff(map[string][]string{"filler-node-1": devicesOn("node-1", 4), "filler-node-3": devicesOn("node-3", 4)}, e.allocatedDevices()); diff != "" {
		t.Errorf("allocated devices by pod (-want +got):\n%s", diff)
	}
}

// TestGangSharingAnUnallocatedClaim: two members of a gang use one ResourceClaim directly,
// not allocated yet. kube-scheduler allocates a claim when its first user binds, which a gang
// never does alone: the members are refused at once with what to do, nothing is bound, and
// the claim stays unallocated. Once a pod that uses the claim alone has bound (and the claim
// is allocated on its node), the gang is requeued and both members bind next to it.
func TestGangSharingAnUnallocatedClaim(t *testing.T) {
	e := draLeaves(t)
	shared := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "shared-gpu", Namespace: e.ns},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: draOnlyClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}}}}}}
	if _, err := e.c.kube.ResourceV1().ResourceClaims(e.ns).Create(context.Background(), shared, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	useShared := func(p *v1.Pod) {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: "gpu", ResourceClaimName: ptr.To("shared-gpu")})
		p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, v1.ResourceClaim{Name: "gpu"})
	}
	members := e.gang("train", 2, `{"mode":"hard","highestTierAllowed":1}`, v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}, useShared)
	msg := e.waitCondition(members[0], v1.PodReasonUnschedulable, "share ResourceClaim")
	want := fmt.Sprintf("its members [train-0 train-1] share ResourceClaim %s/shared-gpu, which is not allocated", e.ns)
	if !strings.Contains(msg, want) {
		t.Errorf("condition %q does not say %q", msg, want)
	}
	if got := e.bound(); len(got) != 0 {
		t.Errorf("bound while the claim is unallocated: %v", got)
	}
	if got := e.allocatedDevices(); len(got) != 0 {
		t.Errorf("allocated while the gang waits: %v", got)
	}

	first := util.Pod(e.ns, "first-user", plugins.SchedulerName, "1", nil)
	useShared(first)
	if _, err := util.CreatePods(context.Background(), e.c.kube, first); err != nil {
		t.Fatal(err)
	}
	node := e.waitBound([]string{"first-user"})["first-user"]
	got := e.waitBound(members)
	if !within(got, node) {
		t.Errorf("members placed on %v, want next to the claim's first user on %s", got, node)
	}
}
