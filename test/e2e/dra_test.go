package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// draClass is the DeviceClass of TestDRAJob: GPUs that exist only as DRA devices.
const draClass = "gpu.e2e.test"

// TestDRAJob: one DRA job on the demo control plane (fabric-64: leaves of eight nodes). The
// nodes gpu-00 to gpu-03 publish GPUs of a DRA class (4 on gpu-00, 8 on the others); a hard
// tier-1 gang of three members, each with a claim from a ResourceClaimTemplate asking 8 of
// them, is placed on gpu-01, gpu-02 and gpu-03, and kube-controller-manager's resource
// claim controller makes the claims that the scheduler allocates there.
func TestDRAJob(t *testing.T) {
	const ns, job = "dra", "train"
	restartScene(t, ns)
	ctx := t.Context()
	api := cluster.Kube.ResourceV1()
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: draClass}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", draClass)}}}}}
	if _, err := api.DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.DeviceClasses().Delete(context.Background(), draClass, metav1.DeleteOptions{}) })
	for i, count := range []int{4, 8, 8, 8} {
		node := fmt.Sprintf("gpu-%02d", i)
		slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-" + draClass}, Spec: resourcev1.ResourceSliceSpec{
			Driver: draClass, NodeName: ptr.To(node), Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}}}
		for d := range count {
			slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", d)})
		}
		if _, err := api.ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = api.ResourceSlices().Delete(context.Background(), slice.Name, metav1.DeleteOptions{}) })
	}
	applyYAML(t, ns, fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: eight-gpus
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly:
          deviceClassName: %s
          count: 8
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: %[2]s
  annotations:
    hypernode.dev/network-topology: '{"mode":"hard","highestTierAllowed":1}'
spec:
  minMember: 3
`, draClass, job))
	for i := range 3 {
		applyYAML(t, ns, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s-%[2]d
  labels:
    scheduling.x-k8s.io/pod-group: %[1]s
spec:
  schedulerName: hypernode-scheduler
  resourceClaims:
  - name: gpus
    resourceClaimTemplateName: eight-gpus
  containers:
  - name: trainer
    image: trainer
    resources:
      requests:
        cpu: "1"
      claims:
      - name: gpus
`, job, i))
	}
	_, nodes := waitGangBound(t, ns, job, 3, 2*time.Minute)
	if diff := cmp.Diff([]string{"gpu-01", "gpu-02", "gpu-03"}, slices.Sorted(maps.Values(nodes))); diff != "" {
		t.Errorf("members placed %v; nodes (-want +got):\n%s", nodes, diff)
	}
	// Each member's claim holds the 8 devices of its node.
	var got map[string]string
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		claims, err := api.ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		got = map[string]string{}
		for _, c := range claims.Items {
			owner := metav1.GetControllerOf(&c)
			if owner == nil || c.Status.Allocation == nil {
				continue
			}
			pools := map[string]bool{}
			for _, r := range c.Status.Allocation.Devices.Results {
				pools[r.Pool] = true
			}
			got[owner.Name] = fmt.Sprintf("%d devices of %v", len(c.Status.Allocation.Devices.Results), slices.Sorted(maps.Keys(pools)))
		}
		return len(got) == 3, nil
	}); err != nil {
		t.Fatalf("allocated claims %v: %v", got, err)
	}
	want := map[string]string{}
	for pod, node := range nodes {
		want[pod] = fmt.Sprintf("8 devices of [%s]", node)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("allocated claims by pod (-want +got):\n%s", diff)
	}
}
