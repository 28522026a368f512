package networktopology

import (
	"testing"

	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
)

// draHandle is a Handle whose DRA manager maps extended resources to DeviceClasses.
type draHandle struct {
	fwk.Handle
	classes map[v1.ResourceName]*resourceapi.DeviceClass
}

func (h draHandle) EventRecorder() events.EventRecorderLogger { return &events.FakeRecorder{} }

func (h draHandle) ClientSet() clientset.Interface { return fake.NewClientset() }

func (h draHandle) SharedInformerFactory() informers.SharedInformerFactory {
	return informers.NewSharedInformerFactory(fake.NewClientset(), 0)
}

func (h draHandle) SharedDRAManager() fwk.SharedDRAManager { return draManager{classes: h.classes} }

type draManager struct {
	fwk.SharedDRAManager
	classes map[v1.ResourceName]*resourceapi.DeviceClass
}

func (m draManager) DeviceClassResolver() fwk.DeviceClassResolver { return m }
func (m draManager) GetDeviceClass(name v1.ResourceName) *resourceapi.DeviceClass {
	return m.classes[name]
}

// TestCapacityBoundsDRA: a node that lacks an extended resource in its allocatable is bounded
// to 0 members only when no DeviceClass provides that resource through DRA and some node
// advertises it; otherwise it must be simulated (the bound is the demand), or the lazy planner
// would skip it, or, with every node at 0, simulate the whole cluster.
func TestCapacityBoundsDRA(t *testing.T) {
	const gpu v1.ResourceName = "example.com/gpu"
	nodes := []fwk.NodeInfo{
		framework.NewNodeInfo(), framework.NewNodeInfo(),
	}
	nodes[0].SetNode(st.MakeNode().Name("device-plugin").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "8", gpu: "2", v1.ResourcePods: "10"}).Obj())
	nodes[1].SetNode(st.MakeNode().Name("dra").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "8", v1.ResourcePods: "10"}).Obj())
	pod := st.MakePod().Name("p").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", gpu: "1"}).Obj()
	for _, tc := range []struct {
		name    string
		classes map[v1.ResourceName]*resourceapi.DeviceClass
		nodes   []fwk.NodeInfo
		want    map[string]int
	}{
		{"no DeviceClass: a node without the resource holds none", nil, nodes, map[string]int{"device-plugin": 2, "dra": 0}},
		{"DRA-backed: the node is simulated", map[v1.ResourceName]*resourceapi.DeviceClass{gpu: {}}, nodes, map[string]int{"device-plugin": 2, "dra": 4}},
		// NodeResourcesFit may ignore it, for an extender: only the simulation can tell.
		{"advertised by no node: the node is simulated", nil, nodes[1:], map[string]int{"dra": 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlugin(config.NetworkTopologyAwareArgs{}, draHandle{classes: tc.classes}, nil, gangstate.New())
			got := map[string]int{}
			for name, n := range p.capacityBounds(pod, tc.nodes, 4) {
				got[name] = n.Capacity
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("bounds (-want,+got):\n%s", diff)
			}
		})
	}
}
