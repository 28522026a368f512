package networktopology

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// TestPlanTriesThePreemptedDomainFirst: seed 001's tree (s0..s3 leaves of two 1-CPU nodes), a
// gang of two hard at tier 1, which BinPack plans in s0 from scratch. After a preemption for
// it ended, its plan goes to the nodes it nominated, or to its domain; without a record of it
// (a failover), to the nodes the members are nominated on in the API; to s0 when they no
// longer hold it (both tries counted in the nodes simulated), and when the domain left the
// tree.
func TestPlanTriesThePreemptedDomainFirst(t *testing.T) {
	for _, tc := range []struct {
		name          string
		preempted     string
		nominated     []string
		apiNominated  []string // the members' status.nominatedNodeName, in member order
		tainted       string
		wantNodes     []string
		wantSimulated int
	}{
		{name: "no preemption: s0", wantNodes: []string{"node-0"}, wantSimulated: 2},
		{name: "nominated in s2: s2", preempted: "s2", nominated: []string{"node-5", "node-4"}, wantNodes: []string{"node-4"}, wantSimulated: 2},
		{name: "s2 holds it no longer: s0", preempted: "s2", nominated: []string{"node-4", "node-5"}, tainted: "node-5",
			wantNodes: []string{"node-0"}, wantSimulated: 4},
		{name: "one member nominated, in s2: s2", preempted: "s2", nominated: []string{"node-4"}, wantNodes: []string{"node-4"}, wantSimulated: 3},
		{name: "no nomination, domain s2: s2", preempted: "s2", wantNodes: []string{"node-4"}, wantSimulated: 2},
		{name: "the domain left the tree: s0", preempted: "s9", wantNodes: []string{"node-0"}, wantSimulated: 2},
		{name: "no record, the members nominated in s3 in the API (a failover): s3", apiNominated: []string{"node-7", "node-6"},
			wantNodes: []string{"node-6"}, wantSimulated: 2},
		{name: "the record before the API", preempted: "s2", nominated: []string{"node-4", "node-5"}, apiNominated: []string{"node-7", "node-6"},
			wantNodes: []string{"node-4"}, wantSimulated: 2},
		{name: "the whole cluster, nominated in s3: s3", preempted: "the cluster", nominated: []string{"node-6", "node-7"},
			wantNodes: []string{"node-6"}, wantSimulated: 2},
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
				p := &gangstate.Preemption{Domain: tc.preempted, Nodes: map[types.UID]string{}}
				for i, n := range tc.nominated {
					p.Nodes[types.UID(fmt.Sprintf("g-%d", i))] = n
				}
				e.gangs.StartPreemptionLocked(key, p)
				e.gangs.EndPreemptionLocked(key, p)
				e.gangs.Unlock()
			}
			first := e.pod("g", 0)
			for i, n := range tc.apiNominated {
				pod := e.pod("g", i)
				pod.Status.NominatedNodeName = n
				e.registry.SetPod(e.pod("g", i), pod)
				if i == 0 {
					first = pod
				}
			}
			result, status, _ := e.fw.RunPreFilterPlugins(e.ctx, framework.NewCycleState(), first)
			e.wantPlanned(t, result, status, tc.wantNodes, tc.wantSimulated)
		})
	}
}

// TestPlanAfterAPreemptionNotHeldByTheFailure: a gang's failed plan answers its members while
// its back-off runs; once a preemption for the gang ended, the next member plans at once,
// into the room the preemption made (the fault run's baseline: a back-off of 3.5 s let pods
// of lower priority take the room, and the gang preempted again elsewhere).
func TestPlanAfterAPreemptionNotHeldByTheFailure(t *testing.T) {
	e := newPlanEnv(t, map[string]int{"g": 2})
	key := podgroup.Key{Namespace: "ns", Name: "g"}
	now := time.Now()
	e.plugin.setFailure(key, e.pod("g", 0), &gangstate.PlanFailure{Tree: e.cache.Snapshot().Generation(), Revision: e.registry.Info(key).Revision, Made: now, Failures: 3,
		RetryAt: now.Add(time.Minute), Stale: true, Status: fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "no room")})
	_, status, _ := e.fw.RunPreFilterPlugins(e.ctx, framework.NewCycleState(), e.pod("g", 1))
	if status.IsSuccess() || status.Message() != "no room" {
		t.Fatalf("PreFilter during the back-off: %v, want the failure's answer", status)
	}
	e.gangs.Lock()
	p := &gangstate.Preemption{Domain: "s3", Nodes: map[types.UID]string{"g-0": "node-6", "g-1": "node-7"}}
	e.gangs.StartPreemptionLocked(key, p)
	e.gangs.EndPreemptionLocked(key, p)
	e.gangs.Unlock()
	result, status, _ := e.fw.RunPreFilterPlugins(e.ctx, framework.NewCycleState(), e.pod("g", 1))
	if !status.IsSuccess() {
		t.Fatalf("PreFilter after the preemption: %v", status)
	}
	plan := e.plan("g")
	if diff := cmp.Diff([]string{"node-6", "node-7"}, sets.List(sets.New(plan.PodNode["g-0"], plan.PodNode["g-1"]))); diff != "" {
		t.Errorf("planned nodes (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{plan.PodNode["g-1"]}, sets.List(result.NodeNames)); diff != "" {
		t.Errorf("member narrowed to (-want,+got):\n%s", diff)
	}
}
