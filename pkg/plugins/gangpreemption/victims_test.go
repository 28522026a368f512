package gangpreemption

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// TestCheaperOrdersChoices: no victim at all wins, then the fewest PodDisruptionBudget
// violations, then the lowest highest-victim priority, then the fewest pods
// evicted, then the tightest domain (seed 004 example 2: spine-1, an exact fit, over spine-0
// at the same cost), then the name.
func TestCheaperOrdersChoices(t *testing.T) {
	victims := func(n int) []*unit { return make([]*unit, n) }
	choices := []*choice{
		{domain: domain{name: "spine-0"}, victims: victims(1), highest: 1000, evicted: 1, surplus: 1},
		{domain: domain{name: "spine-1"}, victims: victims(1), highest: 1000, evicted: 1, surplus: 0},
		{domain: domain{name: "spine-2"}, victims: victims(2), highest: 1000, evicted: 2, surplus: 0},
		{domain: domain{name: "spine-3"}, victims: victims(3), highest: 500, evicted: 3, surplus: 4},
		{domain: domain{name: "spine-4"}, victims: victims(1), highest: 1000, evicted: 1, surplus: 0},
		// No victim: first, even against victims of negative priority.
		{domain: domain{name: "spine-5"}, surplus: 9},
		{domain: domain{name: "spine-6"}, victims: victims(1), highest: -10, evicted: 1},
		// A PodDisruptionBudget violation outweighs priority and count.
		{domain: domain{name: "spine-7"}, victims: victims(1), violations: 1, highest: -20, evicted: 1},
	}
	sort.SliceStable(choices, func(i, j int) bool { return choices[i].cheaper(choices[j]) })
	var got []string
	for _, c := range choices {
		got = append(got, c.domain.name)
	}
	if diff := cmp.Diff([]string{"spine-5", "spine-6", "spine-3", "spine-1", "spine-4", "spine-0", "spine-2", "spine-7"}, got); diff != "" {
		t.Errorf("order (-want,+got):\n%s", diff)
	}
}

func TestHoldsAllAndShorten(t *testing.T) {
	for _, tc := range []struct {
		name   string
		nodes  []string
		placed []string
		want   bool
	}{
		{name: "nothing placed", nodes: []string{"a"}, want: true},
		{name: "placed inside", nodes: []string{"a", "b"}, placed: []string{"b", "b"}, want: true},
		{name: "one placed outside", nodes: []string{"a", "b"}, placed: []string{"b", "c"}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := holdsAll(tc.nodes, tc.placed); got != tc.want {
				t.Errorf("holdsAll = %v, want %v", got, tc.want)
			}
		})
	}
	if diff := cmp.Diff([]string{"a", "b", "+2 more"}, shorten([]string{"a", "b", "c", "d"}, 2)); diff != "" {
		t.Errorf("shorten (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a"}, shorten([]string{"a"}, 2)); diff != "" {
		t.Errorf("shorten (-want,+got):\n%s", diff)
	}
}

// TestLeaving: only a pod of lower priority than the gang that terminates because
// kube-scheduler preempted it counts as gone.
func TestLeaving(t *testing.T) {
	preempted := []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonPreemptionByScheduler}}
	now := metav1.Now()
	pod := func(priority int32, deleting bool, conditions []v1.PodCondition) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: v1.PodSpec{Priority: &priority, NodeName: "node-1"},
			Status: v1.PodStatus{Conditions: conditions}}
		if deleting {
			p.DeletionTimestamp = &now
		}
		return p
	}
	// A victim whose grace period (its deletion timestamp) ended more than victimSlack ago.
	stuck := pod(10, true, preempted)
	stuck.DeletionTimestamp = &metav1.Time{Time: now.Add(-victimSlack - time.Second)}
	s := &simulation{priority: 1000, now: now.Time, units: map[string]*unit{}, spared: sets.New[string](), sparedRefused: sets.New[string]()}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want bool
		// victim is whether the pod is a victim unit.
		victim bool
	}{
		{"preempted, terminating", pod(10, true, preempted), true, true},
		{"preempted, not deleted yet", pod(10, false, preempted), false, true},
		{"terminating for another reason", pod(10, true, nil), false, true},
		{"equal priority", pod(1000, true, preempted), false, false},
		{"preempted, stuck terminating", stuck, false, false},
	} {
		if got := s.leaving(tc.pod); got != tc.want {
			t.Errorf("%s: leaving %v, want %v", tc.name, got, tc.want)
		}
		if got := s.unitOf(tc.pod) != nil; got != tc.victim {
			t.Errorf("%s: a victim %v, want %v", tc.name, got, tc.victim)
		}
		s.units = map[string]*unit{}
	}
}

// TestDomainsUpToTheRoot: a hard constraint at or above the virtual root's tier lets the gang
// span the whole cluster, as the planner reads it (two spines, no HyperNode above them);
// below it, only HyperNodes; a soft one always ends with the whole cluster.
func TestDomainsUpToTheRoot(t *testing.T) {
	cache := hypernode.NewCache(klog.Background(), nil)
	var list []fwk.NodeInfo
	for i := range 4 {
		node := st.MakeNode().Name(fmt.Sprintf("node-%d", i)).Obj()
		cache.SetNode(node)
		ni := framework.NewNodeInfo()
		ni.SetNode(node)
		list = append(list, ni)
	}
	cache.SetHyperNode(hntesting.MakeHyperNode("spine-0").Tier(2).Nodes("node-0", "node-1").Obj())
	cache.SetHyperNode(hntesting.MakeHyperNode("spine-1").Tier(2).Nodes("node-2", "node-3").Obj())
	tree := cache.Snapshot()
	for _, tc := range []struct {
		topology string
		want     [][]string
	}{
		{`{"mode":"hard","highestTierAllowed":2}`, [][]string{{"spine-0", "spine-1"}}},
		{`{"mode":"hard","highestTierAllowed":3}`, [][]string{{"spine-0", "spine-1"}, {wholeCluster}}},
		{`{"mode":"soft","highestTierAllowed":2}`, [][]string{{"spine-0", "spine-1"}, {wholeCluster}}},
	} {
		nt, err := podgroup.ParseNetworkTopology(map[string]string{podgroup.NetworkTopologyAnnotation: tc.topology})
		if err != nil {
			t.Fatal(err)
		}
		tiers, err := (&GangPreemption{}).domains(tree, podgroup.Gang{Info: podgroup.Info{Topology: nt}}, list)
		if err != nil {
			t.Fatal(err)
		}
		var got [][]string
		for _, ds := range tiers {
			var names []string
			for _, d := range ds {
				names = append(names, d.name)
			}
			sort.Strings(names)
			got = append(got, names)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: domains (-want,+got):\n%s", tc.topology, diff)
		}
	}
}
