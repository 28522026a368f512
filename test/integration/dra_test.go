package integration

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// draGPUDriver publishes the GPUs of TestTopologyDRAProvidedGPUsPackByCPU.
const draGPUDriver = "gpu.hypernode.test"

// publishDRAGPUs creates a DeviceClass that provides nvidia.com/gpu through DRA (Kubernetes
// 1.37's extended resources backed by DRA, GA) and a ResourceSlice of gpus devices on each
// node (publishDRADevices), and deletes them when the test ends.
func publishDRAGPUs(t *testing.T, c clients, nodes []string, gpus int) {
	t.Helper()
	publishDRADevices(t, c, draGPUDriver, draGPUDriver, ptr.To("nvidia.com/gpu"), nodes, gpus)
}

// TestTopologyDRAProvidedGPUsPackByCPU: the GPUs come through DRA, so no node lists
// nvidia.com/gpu as allocatable, and the default args weigh it. The HyperNode bin-pack leaves
// it out and ranks by the CPUs: a pod bound without a scheduler uses 4 of node-5's 8 CPUs, so
// s2 (node-4, node-5) is the fuller leaf. A plain pod of 1 CPU and 1 GPU prefers s2; then a
// gang of two pods of 1 CPU and 4 GPUs, hard at tier 1, is placed in s2. Counting the GPUs
// scored every leaf 0: the gang went to s0 by name.
func TestTopologyDRAProvidedGPUsPackByCPU(t *testing.T) {
	names := []string{"node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"}
	e := newTopoEnv(t, nodesWithCPU("8", names...), nil, seedHyperNodes(t)...)
	publishDRAGPUs(t, e.c, names, 8)
	filler := util.Pod(e.ns, "filler-node-5", "no-scheduler", "4", nil)
	filler.Spec.NodeName = "node-5"
	if _, err := util.CreatePods(context.Background(), e.c.kube, filler); err != nil {
		t.Fatal(err)
	}
	startScheduler(t, nil)
	request := func(gpus string) v1.ResourceList {
		return v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), "nvidia.com/gpu": resource.MustParse(gpus)}
	}
	e.packsIntoS2(request("1"), request("4"))
	// The GPUs were allocated through DRA: kube-scheduler's claim for the extended resource.
	claims, err := e.c.kube.ResourceV1().ResourceClaims(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	allocated := 0
	for _, claim := range claims.Items {
		if claim.Status.Allocation != nil {
			allocated++
		}
	}
	if allocated != 3 {
		t.Errorf("%d of %d ResourceClaims allocated, want 3 (one per pod)", allocated, len(claims.Items))
	}
}

// TestTopologyDRAProvidedGPUsCountedPerMember: the GPUs are asked for as nvidia.com/gpu and
// provided by DRA (8 on each of node-0 to node-3). node-1's 8 CPUs are taken, so s0 (node-0,
// node-1) is the fuller leaf, with 16 free GPUs and 8 free CPUs, but holds one member of 1
// CPU and 8 GPUs; s1 (node-2, node-3) holds two. A hard tier-1 gang of two such members
// lands in s1. Copies of a member were judged by DynamicResources' Filter alone, which does
// not see them: node-0 "held" two members, the plan chose s0, and the second member was
// refused there.
func TestTopologyDRAProvidedGPUsCountedPerMember(t *testing.T) {
	names := []string{"node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"}
	e := newTopoEnv(t, nodesWithCPU("8", names...), nil, seedHyperNodes(t)...)
	publishDRAGPUs(t, e.c, names[:4], 8)
	startScheduler(t, nil)
	request := func(cpu, gpus string) v1.ResourceList {
		return v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), "nvidia.com/gpu": resource.MustParse(gpus)}
	}
	filler := util.Pod(e.ns, "filler", plugins.SchedulerName, "", nil)
	filler.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("8")}
	onNode("node-1")(filler)
	if _, err := util.CreatePods(context.Background(), e.c.kube, filler); err != nil {
		t.Fatal(err)
	}
	if got := e.waitBound([]string{"filler"}); got["filler"] != "node-1" {
		t.Fatalf("filler bound to %v, want node-1", got)
	}

	members := e.gang("train", 2, `{"mode":"hard","highestTierAllowed":1}`, request("1", "8"))
	got := e.waitBound(members)
	if diff := cmp.Diff([]string{"node-2", "node-3"}, slices.Sorted(maps.Values(got))); diff != "" {
		t.Errorf("gang placed on %v; nodes (-want +got):\n%s", got, diff)
	}
}
