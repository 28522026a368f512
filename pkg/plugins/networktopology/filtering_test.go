package networktopology

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

func TestFilterKeepsMembersInTheirLeaf(t *testing.T) {
	p, _ := newTestPlugin(t)
	state := framework.NewCycleState()
	node := func(name string) fwk.NodeInfo {
		ni := framework.NewNodeInfo()
		ni.SetNode(st.MakeNode().Name(name).Obj())
		return ni
	}
	pod := gangPod("hard")
	if s := p.Filter(context.Background(), state, pod, node("node-9")); !s.IsSuccess() {
		t.Errorf("without a plan (capacity simulation) Filter = %v, want Success", s)
	}
	state.Write(preFilterStateKey, &preFilterState{leaf: "rack-0", nodes: sets.New("node-0", "node-1")})
	if s := p.Filter(context.Background(), state, pod, node("node-1")); !s.IsSuccess() {
		t.Errorf("planned node: %v", s)
	}
	want := fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node is outside the HyperNode rack-0 planned for this gang member")
	if diff := cmp.Diff(want, p.Filter(context.Background(), state, pod, node("node-2"))); diff != "" {
		t.Errorf("node outside the plan (-want,+got):\n%s", diff)
	}
}
