package networktopology

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// TestHoldKeepsDevices: a hold whose members claim 8 GPUs of a DRA class on node-0 keeps a
// later pod whose claims take one of them off node-0 while the node has no more than 8 free,
// and lets it on when it has more, or when the pod takes none.
func TestHoldKeepsDevices(t *testing.T) {
	p, registry := newTestPlugin(t)
	registry.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "big"}})
	big := podgroup.Key{Namespace: "ns", Name: "big"}
	gpus := devices.ClassResource("gpu")
	h := &gangstate.Hold{Key: big, Domain: "rack-0", Tier: 1, Since: time.Now(),
		Need:       map[string]v1.ResourceList{"node-0": {gpus: resource.MustParse("8")}},
		Precedence: podgroup.GangPrecedence(big, 0, time.Unix(0, 0))}
	if ok, why := p.gangs.TakeHold(klog.Background(), h, -1); !ok {
		t.Fatalf("TakeHold: %s", why)
	}
	later := podgroup.PlainPrecedence(st.MakePod().Name("later").CreationTimestamp(metav1.Now()).Obj())
	ahead := p.gangs.Holds().After(later, podgroup.Key{}, false)
	for _, tc := range []struct {
		name    string
		devices int
		req     v1.ResourceList
		kept    bool
	}{
		{name: "8 free, the pod claims one", devices: 8, req: v1.ResourceList{gpus: resource.MustParse("1")}, kept: true},
		{name: "9 free, the pod claims one", devices: 9, req: v1.ResourceList{gpus: resource.MustParse("1")}},
		{name: "8 free, the pod claims none", devices: 8, req: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := devices.NewInventory()
			inv.SetClass(&resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.test"`}}}}})
			slice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}, Spec: resourceapi.ResourceSliceSpec{
				Driver: "gpu.test", NodeName: ptr.To("node-0"), Pool: resourceapi.ResourcePool{Name: "node-0", ResourceSliceCount: 1}}}
			for i := range tc.devices {
				slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i)})
			}
			inv.SetSlice(slice)
			state := framework.NewCycleState()
			state.Write(holdStateKey, &holdState{ahead: ahead, req: tc.req, code: fwk.UnschedulableAndUnresolvable, inventory: inv})
			ni := framework.NewNodeInfo()
			ni.SetNode(st.MakeNode().Name("node-0").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "8"}).Obj())
			if got := heldBy(state, ni); (got != nil) != tc.kept {
				t.Errorf("kept off = %v (%v), want %v", got != nil, got, tc.kept)
			}
		})
	}
}
