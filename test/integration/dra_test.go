package integration

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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
