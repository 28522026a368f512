package inspect

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// draCluster: two leaves of two nodes whose 8 GPUs each exist only as DRA devices of
// NVIDIA's class gpu.nvidia.com (no extended resource); claims hold 3 GPUs of a0 and 8 of b1,
// and a0 is cordoned.
func draCluster(t *testing.T) *Cluster {
	t.Helper()
	kube := []runtime.Object{&resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu.nvidia.com"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.nvidia.com"`}}}},
	}}
	for _, name := range []string{"a0", "a1", "b0", "b1"} {
		n := gpuNode(name)
		delete(n.Status.Allocatable, "nvidia.com/gpu")
		if name == "a0" {
			cordoned(n)
		}
		slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-gpus"}, Spec: resourcev1.ResourceSliceSpec{
			Driver: "gpu.nvidia.com", NodeName: ptr.To(name), Pool: resourcev1.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1}}}
		for i := range 8 {
			slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i)})
		}
		kube = append(kube, n, slice)
	}
	claim := func(name, node string, n int) *resourcev1.ResourceClaim {
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name)}}
		c.Status.Allocation = &resourcev1.AllocationResult{}
		for i := range n {
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourcev1.DeviceRequestAllocationResult{
				Request: "gpus", Driver: "gpu.nvidia.com", Pool: node, Device: fmt.Sprintf("gpu-%d", i)})
		}
		return c
	}
	kube = append(kube, claim("three", "a0", 3), claim("eight", "b1", 8))
	topology := []runtime.Object{
		hntesting.MakeHyperNode("a").Tier(1).Nodes("a0", "a1").Obj(),
		hntesting.MakeHyperNode("b").Tier(1).Nodes("b0", "b1").Obj(),
		hntesting.MakeHyperNode("top").Tier(2).Children("a", "b").Obj(),
	}
	return loadObjects(t, kube, topology, nil)
}

// TestTreeCountsDRADevices: the tree's GPUs on a DRA-only cluster are the devices of the
// NVIDIA class (the default resource then), free those no claim holds, on usable nodes:
// hand-counted, a has 16 and 8 free (a0 cordoned), b 16 and 8, the cluster 32 and 16.
func TestTreeCountsDRADevices(t *testing.T) {
	c := draCluster(t)
	report := c.Tree("")
	figures := func(r HyperNodeReport) string {
		return fmt.Sprintf("%s %s/%s", r.Name, r.Free.String(), r.Allocatable.String())
	}
	got := []string{figures(report.Root)}
	for _, top := range report.Root.Children {
		got = append(got, figures(top))
		for _, leaf := range top.Children {
			got = append(got, figures(leaf))
		}
	}
	want := []string{"<cluster> 16/32", "top 16/32", "a 8/16", "b 8/16"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("free/allocatable (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("deviceclass.resource.kubernetes.io/gpu.nvidia.com", report.Resource); diff != "" {
		t.Errorf("default resource (-want +got):\n%s", diff)
	}
	if len(report.Warnings) != 0 {
		t.Errorf("warnings %v, want none: the resource is offered as devices", report.Warnings)
	}
	// The DRA column: per class, free/total devices below each HyperNode.
	var buf bytes.Buffer
	if err := WriteTree(&buf, report); err != nil {
		t.Fatal(err)
	}
	var deviceLines []string
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.Contains(line, "devices: ") {
			deviceLines = append(deviceLines, strings.TrimSpace(line))
		}
	}
	// (The cluster's row is left out when one HyperNode spans it.)
	want = []string{"devices: gpu.nvidia.com 16/32 free", "devices: gpu.nvidia.com 8/16 free", "devices: gpu.nvidia.com 8/16 free"}
	if diff := cmp.Diff(want, deviceLines); diff != "" {
		t.Errorf("devices lines of the tree (-want +got):\n%s", diff)
	}
	// A node that lists the resource as allocatable counts it from there, not from devices.
	c.nodes["b0"].node.Status.Allocatable[v1.ResourceName(resourcev1.ResourceDeviceClassPrefix+"gpu.nvidia.com")] = resource.MustParse("2")
	if got := figures(c.Tree("").Root.Children[0].Children[1]); got != "b 2/10" {
		t.Errorf("leaf b with b0 listing the resource: %s, want b 2/10", got)
	}
}

// TestExplainCountsClaimedDevices: two pending members, each with a claim generated for it
// asking 8 GPUs of the NVIDIA class, hard at tier 1 on draCluster: hand-counted, leaf a holds
// one (a1; a0 is cordoned), leaf b one (b0; b1's 8 are held), so no leaf holds the gang;
// the spine top holds it. Without the devices, every leaf "held" both (by CPUs).
func TestExplainCountsClaimedDevices(t *testing.T) {
	e := explainClaimingGang(t, nil)
	if e.Search == nil {
		t.Fatalf("no search in %+v", e)
	}
	got := map[string]int{}
	for _, tier := range e.Search.Tiers {
		for _, cand := range tier.Candidates {
			got[cand.Name] = cand.Holds
		}
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 1, "top": 2}, got); diff != "" {
		t.Errorf("members each candidate holds (-want +got):\n%s", diff)
	}
	if e.Search.Fits || len(e.Search.NotCounted) != 0 {
		t.Errorf("fits %v, not counted %v; want no fit at tier 1 and everything counted", e.Search.Fits, e.Search.NotCounted)
	}
}

// TestExplainSaysWhatDevicesItCountsByClass: a request with a selector is counted by its
// class's free devices, an upper bound; explain says the selector is the scheduler's to judge.
func TestExplainSaysWhatDevicesItCountsByClass(t *testing.T) {
	e := explainClaimingGang(t, func(r *resourcev1.ExactDeviceRequest) {
		r.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.attributes["gpu.nvidia.com"].memory > 40`}}}
	})
	want := []string{"device requests beyond a count of one class (selectors, constraints, alternatives)"}
	if diff := cmp.Diff(want, e.Search.NotCounted); diff != "" {
		t.Errorf("not counted (-want +got):\n%s", diff)
	}
}

// explainClaimingGang explains gang team-a/train on draCluster: two members of 1 CPU, each
// claiming 8 gpu.nvidia.com devices from a template (edit changes the request), hard at tier 1.
func explainClaimingGang(t *testing.T, edit func(*resourcev1.ExactDeviceRequest)) Explanation {
	t.Helper()
	c := draCluster(t)
	for i := range 2 {
		name := fmt.Sprintf("train-%d", i)
		pod := memberPod("team-a", name, "train", "", nil)
		pod.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}
		pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("eight-gpus")}}
		pod.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: ptr.To(name + "-gpus")}}
		request := &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 8}
		if edit != nil {
			edit(request)
		}
		claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name + "-gpus", UID: types.UID(name + "-gpus")},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpus", Exactly: request}}}}}
		c.Pods = append(c.Pods, pod)
		c.ResourceClaims = append(c.ResourceClaims, claim)
	}
	c.PodGroups = append(c.PodGroups, podGroup("team-a", "train", 2, map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`}))
	c.index()
	e, err := c.Explain("team-a", "train", "")
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestExplainCountsDRAExtendedResource: the NVIDIA class provides nvidia.com/gpu (its
// extendedResourceName) and no node lists it: a gang of three members requesting 4 GPUs
// each, hard at tier 1, is counted against the devices no claim holds instead of being left
// out ("not counted"): hand-counted, leaf a holds 2 (a1; a0 cordoned), b 2 (b0; b1 full), the spine the 3 asked.
func TestExplainCountsDRAExtendedResource(t *testing.T) {
	c := draCluster(t)
	c.DeviceClasses[0].Spec.ExtendedResourceName = ptr.To("nvidia.com/gpu")
	for i := range 3 {
		c.Pods = append(c.Pods, memberPod("team-a", fmt.Sprintf("train-%d", i), "train", "", nil))
	}
	c.PodGroups = append(c.PodGroups, podGroup("team-a", "train", 3, map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`}))
	c.index()
	e, err := c.Explain("team-a", "train", "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, tier := range e.Search.Tiers {
		for _, cand := range tier.Candidates {
			got[cand.Name] = cand.Holds
		}
	}
	if diff := cmp.Diff(map[string]int{"a": 2, "b": 2, "top": 3}, got); diff != "" {
		t.Errorf("members each candidate holds (-want +got):\n%s", diff)
	}
	if len(e.Search.NotCounted) != 0 {
		t.Errorf("not counted %v, want nothing: the devices count nvidia.com/gpu", e.Search.NotCounted)
	}
}
