package networktopology

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// TestPlanTriesThePreemptedDomainFirst: seed 001's tree (s0..s3 leaves of two 1-CPU nodes), a
// gang of two hard at tier 1, which BinPack plans in s0 from scratch. After a preemption for
// it in s2 ended, its plan goes to s2; to s0 when s2 no longer holds it (both tries counted
// in the nodes simulated), and when the domain is not in the tree.
func TestPlanTriesThePreemptedDomainFirst(t *testing.T) {
	for _, tc := range []struct {
		name          string
		preempted     string
		tainted       string
		wantNodes     []string
		wantSimulated int
	}{
		{name: "no preemption: s0", wantNodes: []string{"node-0"}, wantSimulated: 2},
		{name: "preempted in s2: s2", preempted: "s2", wantNodes: []string{"node-4"}, wantSimulated: 2},
		{name: "s2 holds it no longer: s0", preempted: "s2", tainted: "node-5", wantNodes: []string{"node-0"}, wantSimulated: 4},
		{name: "the domain left the tree: s0", preempted: "s9", wantNodes: []string{"node-0"}, wantSimulated: 2},
		{name: "the whole cluster: s0", preempted: "the cluster", wantNodes: []string{"node-0"}, wantSimulated: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newPlanEnvWith(t, map[string]int{"g": 2}, func(n *v1.Node) {
				if n.Name == tc.tainted {
					n.Spec.Taints = []v1.Taint{{Key: "maintenance", Effect: v1.TaintEffectNoSchedule}}
				}
			})
			if tc.preempted != "" {
				key := podgroup.Key{Namespace: "ns", Name: "g"}
				e.gangs.Lock()
				p := &gangstate.Preemption{Domain: tc.preempted}
				e.gangs.StartPreemptionLocked(key, p)
				e.gangs.EndPreemptionLocked(key, p)
				e.gangs.Unlock()
			}
			result, status, _ := e.fw.RunPreFilterPlugins(e.ctx, framework.NewCycleState(), e.pod("g", 0))
			if !status.IsSuccess() {
				t.Fatalf("PreFilter: %v", status)
			}
			got := result.NodeNames.UnsortedList()
			sort.Strings(got)
			if diff := cmp.Diff(tc.wantNodes, got); diff != "" {
				t.Errorf("planned nodes (-want,+got):\n%s", diff)
			}
			if got := e.plugin.lastSimulated.Load(); got != int64(tc.wantSimulated) {
				t.Errorf("simulated %d nodes, want %d", got, tc.wantSimulated)
			}
		})
	}
}
