package podgroup

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"
)

func TestParseSubGroupPolicies(t *testing.T) {
	job := &NetworkTopology{Mode: ModeHard, HighestTierAllowed: ptr.To(2)}
	const a = "annotation hypernode.dev/subgroup-policy: "
	tests := []struct {
		name, raw, wantErr string
	}{
		{name: "valid", raw: `[{"name":"tp","subGroupSize":4,"minSubGroups":2,"matchLabelKeys":["partition"],"networkTopology":{"mode":"hard","highestTierAllowed":1}}]`},
		{name: "valid partitionSize", raw: `[{"name":"tp","subGroupSize":4,"partitionSize":4}]`},
		{name: "invalid JSON", raw: `[{"name":`, wantErr: a + "is not a valid policy list: unexpected EOF"},
		{name: "unknown field", raw: `[{"name":"tp","size":4}]`, wantErr: a + `is not a valid policy list: json: unknown field "size"`},
		{name: "empty list", raw: `[]`, wantErr: a + "lists no policy"},
		{name: "duplicate names", raw: `[{"name":"tp","subGroupSize":1,"matchLabelKeys":["a"]},{"name":"tp","subGroupSize":1,"matchLabelKeys":["b"]}]`, wantErr: a + `policy name "tp" is used twice`},
		{name: "size below 1", raw: `[{"name":"tp","subGroupSize":0,"matchLabelKeys":["a"]}]`, wantErr: a + `policy "tp": subGroupSize must be at least 1, got 0`},
		{name: "no keys", raw: `[{"name":"tp","subGroupSize":2}]`, wantErr: a + `policy "tp": set matchLabelKeys or partitionSize to say which members form a sub-group`},
		{name: "tier above the job's", raw: `[{"name":"tp","subGroupSize":2,"matchLabelKeys":["a"],"networkTopology":{"highestTierAllowed":3}}]`, wantErr: a + `policy "tp": highestTierAllowed 3 is above the job's 2`},
		{name: "bad sub-group constraint", raw: `[{"name":"tp","subGroupSize":2,"matchLabelKeys":["a"],"networkTopology":{"mode":"hard"}}]`, wantErr: a + `policy "tp": networkTopology: mode hard needs highestTierAllowed or highestTierName`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSubGroupPolicies(map[string]string{SubGroupPolicyAnnotation: tc.raw}, job)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("error = %q, want %q", got, tc.wantErr)
			}
		})
	}
}

func TestSubGroupMembershipAndCounts(t *testing.T) {
	r := New()
	key := Key{Namespace: "ns", Name: "job"}
	r.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", Annotations: map[string]string{
		SubGroupPolicyAnnotation: `[{"name":"tp","subGroupSize":2,"labelSelector":{"matchLabels":{"role":"worker"}},"matchLabelKeys":["partition"]},` +
			`{"name":"idx","subGroupSize":2,"partitionSize":2}]`,
	}}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 1}})
	pod := func(name string, l map[string]string) *v1.Pod {
		p := st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedulingv1alpha1.PodGroupLabel, "job").Obj()
		for k, v := range l {
			p.Labels[k] = v
		}
		return p
	}
	pods := []*v1.Pod{
		pod("w0", map[string]string{"role": "worker", "partition": "1"}),
		pod("w1", map[string]string{"role": "worker", "partition": "1"}),
		pod("w2", map[string]string{"role": "worker", "partition": "0"}),
		pod("i3", map[string]string{"batch.kubernetes.io/job-completion-index": "3"}),
		pod("launcher", nil),
	}
	for _, p := range pods {
		r.SetPod(nil, p)
	}
	r.Reserve(pods[0], "n1")
	bound := pods[1].DeepCopy()
	bound.Spec.NodeName = "n2"
	r.SetPod(pods[1], bound)
	view := r.MemberView(key, pods[3])
	info, states, sub, ok := view.Info, view.States, view.Sub, view.InSub
	sort.Slice(states, func(i, j int) bool { return states[i].ID < states[j].ID })
	want := []SubGroupState{
		{SubGroup: SubGroup{Policy: "idx", ID: "idx-1", Index: 1}, Members: 1},
		{SubGroup: SubGroup{Policy: "tp", ID: "tp-0", Index: 0}, Members: 1},
		{SubGroup: SubGroup{Policy: "tp", ID: "tp-1", Index: 1}, Members: 2, Scheduled: 2},
	}
	if diff := cmp.Diff(want, states); diff != "" {
		t.Errorf("sub-groups (-want,+got):\n%s", diff)
	}
	if !ok || sub.ID != "idx-1" || info.Members != 5 {
		t.Errorf("sub-group of i3 = %v, %v, %d members; want idx-1, 5 members", sub, ok, info.Members)
	}
	// The progress comes from the same read: tp-1 is complete (w0 reserved, w1 bound), idx-1
	// has nothing scheduled.
	wantProgress := SubGroupProgress{Bindable: 2, CompleteByPolicy: map[string]int{"tp": 1},
		Sub: SubGroup{Policy: "idx", ID: "idx-1", Index: 1}, InSub: true}
	if diff := cmp.Diff(wantProgress, view.Progress); diff != "" {
		t.Errorf("progress (-want,+got):\n%s", diff)
	}
	if r.MemberView(key, pods[4]).InSub {
		t.Error("the launcher matches no policy: it belongs to the job's default group")
	}
	// A member the registry has not seen yet counts, with its sub-group, in the same read.
	newcomer := pod("w5", map[string]string{"role": "worker", "partition": "0"})
	view = r.MemberView(key, newcomer)
	info, states, sub, ok = view.Info, view.States, view.Sub, view.InSub
	sort.Slice(states, func(i, j int) bool { return states[i].ID < states[j].ID })
	want[1].Members = 2
	if diff := cmp.Diff(want, states); diff != "" || !ok || sub.ID != "tp-0" || info.Members != 6 {
		t.Errorf("a newcomer of tp-0: %d members, sub-group %v %v, states (-want,+got):\n%s", info.Members, sub, ok, diff)
	}
	if again := r.SubGroups(key); len(again) != 3 || r.Info(key).Members != 5 {
		t.Errorf("MemberView changed the registry: %d sub-groups, %d members", len(again), r.Info(key).Members)
	}
	r.Unreserve(pods[0])
	r.DeletePod(bound)
	states = r.SubGroups(key)
	for _, s := range states {
		if s.ID == "tp-1" && (s.Members != 1 || s.Scheduled != 0) {
			t.Errorf("tp-1 after unreserve and delete: %+v, want 1 member, 0 scheduled", s)
		}
	}
	groups := []SubGroup{{ID: "b", Index: 2}, {ID: "a", Index: 2}, {ID: "z", Index: -1}, {ID: "c", Index: 0}}
	SortSubGroups(groups)
	var order []string
	for _, g := range groups {
		order = append(order, g.ID)
	}
	if diff := cmp.Diff([]string{"z", "c", "a", "b"}, order); diff != "" {
		t.Errorf("sub-group order (-want,+got):\n%s", diff)
	}
}

// TestExampleParses keeps manifests/examples/indexed-job-partitions.yaml valid.
func TestExampleParses(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "examples", "indexed-job-partitions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pg := &schedulingv1alpha1.PodGroup{}
	if err := yaml.Unmarshal([]byte(strings.Split(string(data), "\n---\n")[0]), pg); err != nil {
		t.Fatal(err)
	}
	job, err := ParseNetworkTopology(pg.Annotations)
	if err != nil || job == nil {
		t.Fatalf("job constraint: %v, %v", job, err)
	}
	policies, err := ParseSubGroupPolicies(pg.Annotations, job)
	if err != nil || len(policies) != 1 || *policies[0].PartitionSize != 4 {
		t.Fatalf("policies: %+v, %v", policies, err)
	}
	worker := st.MakePod().Label("batch.kubernetes.io/job-completion-index", "5").Obj()
	if sub, ok := SubGroupOf(policies, worker); !ok || sub.ID != "tp-1" {
		t.Errorf("worker 5 is in %v, want tp-1", sub)
	}
}

// TestProgressFollowsEveryChange: after every change of a random sequence (members added,
// relabelled into another sub-group, reserved, unreserved, bound, deleted; the policies
// changed, the PodGroup deleted and recreated), Progress, kept by events, equals a count
// over the test's own record of the members.
func TestProgressFollowsEveryChange(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	r := New()
	key := Key{Namespace: "ns", Name: "job"}
	policies := []string{
		`[{"name":"tp","subGroupSize":2,"minSubGroups":1,"matchLabelKeys":["partition"]},{"name":"idx","subGroupSize":3,"partitionSize":3}]`,
		`[{"name":"tp","subGroupSize":1,"matchLabelKeys":["partition"]}]`,
	}
	setPolicy := func(i int) {
		r.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job",
			Annotations: map[string]string{SubGroupPolicyAnnotation: policies[i]}}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 1}})
	}
	setPolicy(0)
	relabel := func(p *v1.Pod) {
		delete(p.Labels, "partition")
		delete(p.Labels, "batch.kubernetes.io/job-completion-index")
		switch rng.IntN(3) {
		case 0:
			p.Labels["partition"] = strconv.Itoa(rng.IntN(4))
		case 1:
			p.Labels["batch.kubernetes.io/job-completion-index"] = strconv.Itoa(rng.IntN(9))
		}
	}
	pods := map[string]*v1.Pod{}
	reserved := map[string]bool{}
	for step := range 3000 {
		name := fmt.Sprintf("p%d", rng.IntN(30))
		p := pods[name]
		switch op := rng.IntN(8); {
		case p == nil:
			p = st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedulingv1alpha1.PodGroupLabel, "job").Obj()
			relabel(p)
			r.SetPod(nil, p)
			pods[name] = p
		case op == 0:
			changed := p.DeepCopy()
			relabel(changed)
			r.SetPod(p, changed)
			pods[name] = changed
		case op == 1 && p.Spec.NodeName == "":
			r.Reserve(p, "n1")
			reserved[name] = true
		case op == 2:
			r.Unreserve(p)
			delete(reserved, name)
		case op == 3 && p.Spec.NodeName == "":
			bound := p.DeepCopy()
			bound.Spec.NodeName = "n2"
			r.SetPod(p, bound)
			pods[name] = bound
			delete(reserved, name)
		case op == 4:
			r.DeletePod(p)
			delete(pods, name)
			delete(reserved, name)
		case op == 5 && rng.IntN(10) == 0:
			setPolicy(rng.IntN(2))
		case op == 6 && rng.IntN(30) == 0:
			r.DeletePodGroup("ns", "job")
		case op == 7 && rng.IntN(10) == 0 && r.Info(key).PodGroup == nil:
			setPolicy(rng.IntN(2))
		}
		info := r.Info(key)
		size := map[string]int{}
		for _, pol := range info.SubGroupPolicies {
			size[pol.Name] = int(pol.SubGroupSize)
		}
		scheduledIn, policyOf := map[string]int{}, map[string]string{}
		want := SubGroupProgress{CompleteByPolicy: map[string]int{}}
		for n, pod := range pods {
			scheduled := reserved[n] || pod.Spec.NodeName != ""
			if scheduled {
				want.Bindable++
			}
			if sub, ok := SubGroupOf(info.SubGroupPolicies, pod); ok {
				policyOf[sub.ID] = sub.Policy
				if scheduled {
					scheduledIn[sub.ID]++
				}
			}
		}
		for id, policy := range policyOf {
			if scheduledIn[id] >= size[policy] {
				want.CompleteByPolicy[policy]++
			} else {
				want.Bindable -= scheduledIn[id]
			}
		}
		got := r.Progress(key, nil)
		for policy, n := range got.CompleteByPolicy {
			if n == 0 {
				delete(got.CompleteByPolicy, policy) // a policy whose sub-groups were all complete once
			}
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("step %d: progress (-counted,+kept):\n%s", step, diff)
		}
		if p := pods[name]; p != nil {
			sub, inSub := SubGroupOf(info.SubGroupPolicies, p)
			wantOwn := SubGroupProgress{Sub: sub, InSub: inSub, SubComplete: inSub && scheduledIn[sub.ID] >= size[sub.Policy]}
			own := r.Progress(key, p)
			if diff := cmp.Diff(wantOwn, SubGroupProgress{Sub: own.Sub, InSub: own.InSub, SubComplete: own.SubComplete}); diff != "" {
				t.Fatalf("step %d: %s's sub-group (-counted,+kept):\n%s", step, name, diff)
			}
		}
	}
}

// TestCanDropSubGroup: a sub-group may be left out while the policy's other sub-groups,
// less the ones already left out, still reach minSubGroups; sub-groups whose members are all
// gone do not count.
func TestCanDropSubGroup(t *testing.T) {
	info := Info{SubGroupPolicies: []SubGroupPolicy{{Name: "tp", SubGroupSize: 2, MinSubGroups: 2}, {Name: "dp", SubGroupSize: 1}}}
	state := func(policy string, i, members int) SubGroupState {
		return SubGroupState{SubGroup: SubGroup{Policy: policy, ID: fmt.Sprintf("%s-%d", policy, i), Index: i}, Members: members}
	}
	three := []SubGroupState{state("tp", 0, 2), state("tp", 1, 2), state("tp", 2, 2), state("dp", 0, 1)}
	tests := []struct {
		name    string
		states  []SubGroupState
		dropped map[string]int
		policy  string
		want    bool
	}{
		{"three of minSubGroups 2", three, nil, "tp", true},
		{"three, one already left out", three, map[string]int{"tp": 1}, "tp", false},
		{"another policy's drops do not count", three, map[string]int{"dp": 1}, "tp", true},
		{"two of minSubGroups 2", three[:2], nil, "tp", false},
		{"a sub-group whose members are gone", []SubGroupState{state("tp", 0, 2), state("tp", 1, 2), state("tp", 2, 0)}, nil, "tp", false},
		{"no minSubGroups", three, nil, "dp", true},
		{"a policy the job does not have", three, nil, "pp", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := CanDropSubGroup(info, tc.states, tc.dropped, tc.policy); got != tc.want {
				t.Errorf("CanDropSubGroup = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestReserveBeforeThePodEvent: kube-scheduler can reserve a member before the registry has
// its pod event. The member counts in its sub-group from its Reserve on; its event then
// changes nothing; an Unreserve before any event takes it out again (a pod deleted before its
// Reserve: its binding fails), and nothing of it stays.
func TestReserveBeforeThePodEvent(t *testing.T) {
	r := New()
	key := Key{Namespace: "ns", Name: "job"}
	r.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", Annotations: map[string]string{
		SubGroupPolicyAnnotation: `[{"name":"tp","subGroupSize":2,"matchLabelKeys":["partition"]}]`,
	}}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}})
	pod := func(name, partition string) *v1.Pod {
		return st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedulingv1alpha1.PodGroupLabel, "job").Label("partition", partition).Obj()
	}
	counts := func() map[string][2]int {
		out := map[string][2]int{}
		for _, s := range r.SubGroups(key) {
			out[s.ID] = [2]int{s.Members, s.Scheduled}
		}
		return out
	}
	check := func(step string, members int, want map[string][2]int, complete int) {
		t.Helper()
		if got := r.Info(key).Members; got != members {
			t.Errorf("%s: %d members, want %d", step, got, members)
		}
		if diff := cmp.Diff(want, counts()); diff != "" {
			t.Errorf("%s: sub-groups (members, scheduled) (-want,+got):\n%s", step, diff)
		}
		if got := r.Progress(key, nil).CompleteByPolicy["tp"]; got != complete {
			t.Errorf("%s: %d complete sub-groups, want %d", step, got, complete)
		}
	}
	notified := 0
	r.OnGroupChange(func(Key, bool) { notified++ })
	r.SetPod(nil, pod("p0", "0"))
	r.Reserve(pod("p0", "0"), "n0")
	r.Reserve(pod("p1", "0"), "n1") // no event yet
	check("p1 reserved before its event", 2, map[string][2]int{"tp-0": {2, 2}}, 1)
	if notified != 1 {
		t.Errorf("%d notifications, want 1: p1 brought the group to minMember 2", notified)
	}
	r.SetPod(nil, pod("p1", "0"))
	check("p1's event", 2, map[string][2]int{"tp-0": {2, 2}}, 1)
	if notified != 1 {
		t.Errorf("%d notifications after p1's event, want still 1", notified)
	}

	r.Reserve(pod("p2", "1"), "n2")
	check("p2 reserved before its event", 3, map[string][2]int{"tp-0": {2, 2}, "tp-1": {1, 1}}, 1)
	r.Unreserve(pod("p2", "1"))
	check("p2 unreserved before any event", 2, map[string][2]int{"tp-0": {2, 2}, "tp-1": {0, 0}}, 1)

	// Deleted before its Reserve: the Unreserve that follows leaves nothing of it.
	r.SetPod(nil, pod("p3", "1"))
	r.DeletePod(pod("p3", "1"))
	r.Reserve(pod("p3", "1"), "n3")
	r.Unreserve(pod("p3", "1"))
	check("p3 deleted, then reserved and unreserved", 2, map[string][2]int{"tp-0": {2, 2}, "tp-1": {0, 0}}, 1)
	// A confirmed member's Unreserve keeps it a member.
	r.Unreserve(pod("p1", "0"))
	check("p1 unreserved after its event", 2, map[string][2]int{"tp-0": {2, 1}, "tp-1": {0, 0}}, 0)
}
