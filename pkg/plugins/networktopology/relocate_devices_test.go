package networktopology

import (
	"context"
	"testing"

	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices/devicestest"
)

// nominatingHandle is a Handle whose nominator has the given pods nominated per node.
type nominatingHandle struct {
	fwk.Handle
	nominated map[string][]fwk.PodInfo
}

func (h nominatingHandle) NominatedPodsForNode(node string) []fwk.PodInfo { return h.nominated[node] }

// TestRelocationCountsNominatedDevices: a member is relocated onto a node only if its claims
// can be allocated next to the claims of the pods nominated there (a sibling planned on the
// node); pods of lower priority, as in kube-scheduler's Filter, do not count.
func TestRelocationCountsNominatedDevices(t *testing.T) {
	for _, tc := range []struct {
		name            string
		member, sibling int // devices each claims (0: no sibling nominated)
		siblingPriority int32
		want            bool
	}{
		{name: "nobody nominated", member: 8, want: true},
		{name: "a sibling nominated takes the 8 devices", member: 8, sibling: 8, want: false},
		{name: "a sibling nominated takes 4 of 8", member: 4, sibling: 4, want: true},
		{name: "a pod of lower priority nominated does not count", member: 8, sibling: 8, siblingPriority: -1, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dra := devicestest.NewFakeDRA()
			node, slice := devicestest.GPUNode("node-a", 8)
			dra.Slices = append(dra.Slices, slice)
			member, claim := devicestest.ClaimPod("member", tc.member)
			dra.AddClaims(claim)
			nominated := map[string][]fwk.PodInfo{}
			if tc.sibling > 0 {
				sibling, siblingClaim := devicestest.ClaimPod("sibling", tc.sibling)
				sibling.Spec.Priority = ptr.To(tc.siblingPriority)
				dra.AddClaims(siblingClaim)
				pi, err := framework.NewPodInfo(sibling)
				if err != nil {
					t.Fatal(err)
				}
				nominated[node.Name] = []fwk.PodInfo{pi}
			}
			member.Spec.Priority = ptr.To[int32](0)
			p := &NetworkTopologyAware{handle: nominatingHandle{nominated: nominated}, devices: devices.NewSource(dra, structured.Features{})}
			state := framework.NewCycleState()
			devices.Attach(state, p.devices)
			if got := p.devicesFitWithNominated(context.Background(), state, member, devicestest.NodeInfo(node)); got != tc.want {
				t.Errorf("fits = %v, want %v", got, tc.want)
			}
		})
	}
}
