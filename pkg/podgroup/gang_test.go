package podgroup

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// memberView is a Member as the tests compare it: names instead of pods.
type memberView struct {
	Pod, Node, SubGroup string
}

func viewMembers(members []Member) []memberView {
	var out []memberView
	for _, m := range members {
		v := memberView{Pod: m.Pod.Name, Node: m.Node}
		if m.InSubGroup {
			v.SubGroup = m.SubGroup.ID
		}
		out = append(out, v)
	}
	return out
}

// TestGangView: the registry's view and the view built from API objects classify members the
// same way (pending in rank order, placed with their node), with their sub-groups; the
// registry also counts this scheduler's reservations as placed.
func TestGangView(t *testing.T) {
	pg := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", Annotations: map[string]string{
		SubGroupPolicyAnnotation: `[{"name":"tp","subGroupSize":2,"matchLabelKeys":["partition"]}]`}},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 4}}
	pod := func(name, rank, partition, node string) *v1.Pod {
		w := st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedulingv1alpha1.PodGroupLabel, "g").
			Label("batch.kubernetes.io/job-completion-index", rank).Node(node)
		if partition != "" {
			w = w.Label("partition", partition)
		}
		return w.Obj()
	}
	pods := []*v1.Pod{
		pod("w-3", "3", "1", ""),
		pod("w-1", "1", "0", "node-1"),
		pod("w-2", "2", "1", ""),
		pod("w-0", "0", "0", ""),
		pod("launcher", "", "", ""),
	}
	// The launcher has an empty completion index: unranked, after every ranked member.
	pods[4].Labels["batch.kubernetes.io/job-completion-index"] = "x"

	wantPending := []memberView{{Pod: "w-2", SubGroup: "tp-1"}, {Pod: "w-3", SubGroup: "tp-1"}, {Pod: "launcher"}}
	wantPlaced := []memberView{{Pod: "w-0", Node: "node-0", SubGroup: "tp-0"}, {Pod: "w-1", Node: "node-1", SubGroup: "tp-0"}}

	r := New()
	r.SetPodGroup(pg)
	for _, p := range pods {
		r.SetPod(nil, p)
	}
	r.Reserve(pods[3], "node-0")
	gang := r.Gang(Key{Namespace: "ns", Name: "g"})
	if diff := cmp.Diff(wantPending, viewMembers(gang.Pending)); diff != "" {
		t.Errorf("registry: pending (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(wantPlaced, viewMembers(gang.Placed)); diff != "" {
		t.Errorf("registry: placed (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"node-0", "node-1"}, gang.PlacedNodes()); diff != "" {
		t.Errorf("registry: placed nodes (-want,+got):\n%s", diff)
	}
	if gang.Info.Members != 5 || gang.Info.Scheduled != 2 || len(gang.Info.SubGroupPolicies) != 1 {
		t.Errorf("registry: info = %+v, want 5 members, 2 scheduled, 1 policy", gang.Info)
	}

	// From the API: w-0 is bound there instead of reserved.
	bound := pods[3].DeepCopy()
	bound.Spec.NodeName = "node-0"
	view := NewGang(pg, []*v1.Pod{pods[0], pods[1], pods[2], bound, pods[4]}, nil)
	if diff := cmp.Diff(wantPending, viewMembers(view.Pending)); diff != "" {
		t.Errorf("from the API: pending (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(wantPlaced, viewMembers(view.Placed)); diff != "" {
		t.Errorf("from the API: placed (-want,+got):\n%s", diff)
	}

	// A member the registry has not seen joins the pending members in rank order, once.
	newcomer := pod("w-4", "4", "2", "")
	with := gang.Including(newcomer).Including(newcomer)
	if diff := cmp.Diff(append(wantPending[:2:2], memberView{Pod: "w-4", SubGroup: "tp-2"}, wantPending[2]), viewMembers(with.Pending)); diff != "" {
		t.Errorf("including a newcomer (-want,+got):\n%s", diff)
	}
	if len(gang.Pending) != 3 {
		t.Errorf("Including changed the original view: %d pending", len(gang.Pending))
	}

	// Sub-group counts come with the members, and a newcomer is counted in its sub-group:
	// leaving sub-groups out is judged on the members planned.
	counts := func(states []SubGroupState) map[string][2]int {
		out := map[string][2]int{}
		for _, s := range states {
			out[s.ID] = [2]int{s.Members, s.Scheduled}
		}
		return out
	}
	wantCounts := map[string][2]int{"tp-0": {2, 2}, "tp-1": {2, 0}}
	if diff := cmp.Diff(wantCounts, counts(gang.SubGroups)); diff != "" {
		t.Errorf("registry: sub-group counts (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(wantCounts, counts(view.SubGroups)); diff != "" {
		t.Errorf("from the API: sub-group counts (-want,+got):\n%s", diff)
	}
	withCounts := map[string][2]int{"tp-0": {2, 2}, "tp-1": {2, 0}, "tp-2": {1, 0}}
	if diff := cmp.Diff(withCounts, counts(with.SubGroups)); diff != "" {
		t.Errorf("including a newcomer: sub-group counts (-want,+got):\n%s", diff)
	}
	joining := pod("w-5", "5", "1", "")
	if diff := cmp.Diff(map[string][2]int{"tp-0": {2, 2}, "tp-1": {3, 0}}, counts(gang.Including(joining).SubGroups)); diff != "" {
		t.Errorf("including a newcomer of a known sub-group: counts (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(wantCounts, counts(gang.SubGroups)); diff != "" {
		t.Errorf("Including changed the original view's counts (-want,+got):\n%s", diff)
	}
}

// TestSortByRank: the Job completion index orders members (so consecutive ranks fill a leaf
// together), then the hypernode.dev/rank annotation; members without a rank follow by name,
// with numbers compared as numbers.
func TestSortByRank(t *testing.T) {
	withIndex := func(name, index string) *v1.Pod {
		return st.MakePod().Name(name).Label("batch.kubernetes.io/job-completion-index", index).Obj()
	}
	withRank := func(name, rank string) *v1.Pod {
		return st.MakePod().Name(name).Annotation(RankAnnotation, rank).Obj()
	}
	named := func(name string) *v1.Pod { return st.MakePod().Name(name).Obj() }
	tests := []struct {
		name string
		pods []*v1.Pod
		want []string
	}{{
		name: "completion index, rank annotation, unranked by name",
		pods: []*v1.Pod{named("b-unranked"), withIndex("w-10", "10"), withRank("r-3", "3"), withIndex("w-2", "2"),
			named("a-unranked"), withRank("bad", "x")},
		want: []string{"w-2", "r-3", "w-10", "a-unranked", "b-unranked", "bad"},
	}, {
		name: "an MPIJob's pods by name: the launcher, then the workers in rank order",
		pods: []*v1.Pod{named("pi-worker-10"), named("pi-worker-2"), named("pi-launcher"), named("pi-worker-0")},
		want: []string{"pi-launcher", "pi-worker-0", "pi-worker-2", "pi-worker-10"},
	}, {
		name: "unranked: numbers in names compare as numbers",
		pods: []*v1.Pod{named("worker-10"), named("worker-9"), named("worker-1"), named("worker-01"), named("worker"),
			named("worker-2b"), named("worker-2a"), named("master-0")},
		want: []string{"master-0", "worker", "worker-1", "worker-01", "worker-2a", "worker-2b", "worker-9", "worker-10"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			members := make([]Member, 0, len(tc.pods))
			for _, p := range tc.pods {
				members = append(members, Member{Pod: p})
			}
			SortByRank(members)
			var got []string
			for _, m := range members {
				got = append(got, m.Pod.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("order (-want,+got):\n%s", diff)
			}
		})
	}
}
