package podgroup

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
)

func podGroupWith(annotations map[string]string) *schedulingv1alpha1.PodGroup {
	return &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", Annotations: annotations},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}}
}

// TestDefaultTopologyOnlyForPodGroupsThatSayNothing: the scheduler's default constraint is a
// PodGroup's only when it says nothing of topology; any constraint of its own, valid or not,
// and an unusable policy annotation are its own answer.
func TestDefaultTopologyOnlyForPodGroupsThatSayNothing(t *testing.T) {
	def := &NetworkTopology{Mode: ModeHard, HighestTierAllowed: ptr.To(1)}
	policy := func(constraint string) string {
		return `[{"name":"tp","subGroupSize":2,"partitionSize":2` + constraint + `}]`
	}
	tests := []struct {
		name        string
		annotations map[string]string
		def         *NetworkTopology
		want        string // the constraint, "" for none
		wantDefault bool
	}{
		{name: "no annotation takes the default", want: "hard topology (tier<=1)", def: def, wantDefault: true},
		{name: "no default: a plain gang", want: ""},
		{name: "its own constraint wins", def: def,
			annotations: map[string]string{NetworkTopologyAnnotation: `{"mode":"soft","highestTierAllowed":2}`}, want: "soft topology (tier<=2)"},
		{name: "an invalid constraint stays its own error", def: def,
			annotations: map[string]string{NetworkTopologyAnnotation: `{"mode":"firm"}`}, want: ""},
		{name: "a sub-group with its own constraint: the job spans the cluster", def: def,
			annotations: map[string]string{SubGroupPolicyAnnotation: policy(`,"networkTopology":{"mode":"hard","highestTierAllowed":1}`)}, want: ""},
		{name: "sub-groups without a constraint take the default for the job", def: def,
			annotations: map[string]string{SubGroupPolicyAnnotation: policy("")}, want: "hard topology (tier<=1)", wantDefault: true},
		{name: "an unusable policy annotation stays its own error", def: def,
			annotations: map[string]string{SubGroupPolicyAnnotation: `[`}, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			info := NewGang(podGroupWith(tc.annotations), nil, tc.def).Info
			got := ""
			if info.Topology != nil {
				got = info.Topology.String()
			}
			if got != tc.want || info.TopologyDefault != tc.wantDefault {
				t.Errorf("constraint %q (default %v), want %q (default %v)", got, info.TopologyDefault, tc.want, tc.wantDefault)
			}
			if info.TopologyDefault && (info.Topology == tc.def || info.Topology.HighestTierAllowed == tc.def.HighestTierAllowed) {
				t.Error("the gang shares memory with the default: a change to one would change the other")
			}
		})
	}
}

// TestSetDefaultTopology: PodGroups seen before the default take it under a new revision and
// their gangs are told; later ones take it as they come; every profile must agree.
func TestSetDefaultTopology(t *testing.T) {
	r := New()
	var notified []Key
	r.OnGroupChange(func(k Key, podGroupChanged bool) {
		if podGroupChanged {
			notified = append(notified, k)
		}
	})
	r.SetPodGroup(podGroupWith(nil))
	annotated := podGroupWith(map[string]string{NetworkTopologyAnnotation: `{"mode":"soft"}`})
	annotated.Name = "own"
	r.SetPodGroup(annotated)
	before := r.Info(Key{Namespace: "ns", Name: "g"})
	notified = nil

	def := &NetworkTopology{Mode: ModeSoft, HighestTierAllowed: ptr.To(2)}
	if err := r.SetDefaultTopology(def); err != nil {
		t.Fatal(err)
	}
	after := r.Info(Key{Namespace: "ns", Name: "g"})
	if after.Topology == nil || after.Topology.String() != "soft topology (tier<=2)" || !after.TopologyDefault {
		t.Errorf("after the default: constraint %v (default %v)", after.Topology, after.TopologyDefault)
	}
	if after.Revision != before.Revision+1 {
		t.Errorf("revision %d, want %d: plans made under no constraint must not be reused", after.Revision, before.Revision+1)
	}
	if diff := cmp.Diff([]Key{{Namespace: "ns", Name: "g"}}, notified); diff != "" {
		t.Errorf("gangs told (-want,+got):\n%s", diff)
	}
	if own := r.Info(Key{Namespace: "ns", Name: "own"}); own.TopologyDefault || own.Topology.String() != "soft topology" {
		t.Errorf("the annotated PodGroup: constraint %v (default %v)", own.Topology, own.TopologyDefault)
	}

	later := podGroupWith(nil)
	later.Name = "later"
	r.SetPodGroup(later)
	if info := r.Info(Key{Namespace: "ns", Name: "later"}); !info.TopologyDefault {
		t.Errorf("a PodGroup seen after the default: constraint %v, not the default", info.Topology)
	}

	if err := r.SetDefaultTopology(&NetworkTopology{Mode: ModeSoft, HighestTierAllowed: ptr.To(2)}); err != nil {
		t.Errorf("a second profile with the same default: %v", err)
	}
	r.SetPod(nil, member("a", "g")) // the group outlives its PodGroup
	r.DeletePodGroup("ns", "g")
	if info := r.Info(Key{Namespace: "ns", Name: "g"}); info.Topology != nil || info.TopologyDefault {
		t.Errorf("a deleted PodGroup: constraint %v (default %v)", info.Topology, info.TopologyDefault)
	}
	err := r.SetDefaultTopology(nil)
	want := "two profiles set different defaultNetworkTopology args (soft topology (tier<=2) and none): the PodGroup registry serves every profile, so they must agree"
	if err == nil || err.Error() != want {
		t.Errorf("a second profile without the default: %v, want %q", err, want)
	}
}

// TestSetDefaultTopologyNoneFirst: a profile without a default, then one with: they differ.
func TestSetDefaultTopologyNoneFirst(t *testing.T) {
	r := New()
	if err := r.SetDefaultTopology(nil); err != nil {
		t.Fatal(err)
	}
	err := r.SetDefaultTopology(&NetworkTopology{Mode: ModeSoft})
	want := "two profiles set different defaultNetworkTopology args (none and soft topology): the PodGroup registry serves every profile, so they must agree"
	if err == nil || err.Error() != want {
		t.Errorf("%v, want %q", err, want)
	}
	r.SetPodGroup(podGroupWith(nil))
	if info := r.Info(Key{Namespace: "ns", Name: "g"}); info.Topology != nil {
		t.Errorf("the first profile's (no default) stands: got %v", info.Topology)
	}
}

func TestTopologyFromArgs(t *testing.T) {
	tests := []struct {
		args    *config.NetworkTopologyConstraint
		want    string
		wantErr string
	}{
		{args: nil, want: ""},
		{args: &config.NetworkTopologyConstraint{HighestTierAllowed: ptr.To[int32](1)}, want: "hard topology (tier<=1)"},
		{args: &config.NetworkTopologyConstraint{Mode: "soft"}, want: "soft topology"},
		{args: &config.NetworkTopologyConstraint{Mode: "soft", HighestTierName: "spine"}, want: "soft topology (tier<=spine)"},
		{args: &config.NetworkTopologyConstraint{Mode: "firm"}, wantErr: `mode "firm" is not supported: use "hard" or "soft"`},
		{args: &config.NetworkTopologyConstraint{}, wantErr: "mode hard needs highestTierAllowed or highestTierName"},
		{args: &config.NetworkTopologyConstraint{HighestTierAllowed: ptr.To[int32](0)}, wantErr: "highestTierAllowed must be at least 1, got 0"},
		{args: &config.NetworkTopologyConstraint{HighestTierAllowed: ptr.To[int32](1), HighestTierName: "leaf"},
			wantErr: "set only one of highestTierAllowed and highestTierName"},
	}
	for _, tc := range tests {
		nt, err := TopologyFromArgs(tc.args)
		got, gotErr := "", ""
		if nt != nil {
			got = nt.String()
		}
		if err != nil {
			gotErr = err.Error()
		}
		if got != tc.want || gotErr != tc.wantErr {
			t.Errorf("%+v: %q, error %q; want %q, error %q", tc.args, got, gotErr, tc.want, tc.wantErr)
		}
	}
}
