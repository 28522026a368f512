package gangstate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// notification is one call of an OnGroupChange listener.
type notification struct {
	Key             Key
	PodGroupChanged bool
}

func member(name, group string) *v1.Pod {
	return st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedulingv1alpha1.PodGroupLabel, group).Obj()
}

// TestFormerBlockerReservingActivatesTheHeldMembers: a node change clears a gang's blocker;
// when the blocker then reserves, the members held for it are activated at once, also when
// its Permit will not wait (the gang is complete with it).
func TestFormerBlockerReservingActivatesTheHeldMembers(t *testing.T) {
	tr := New()
	r := tr.Registry()
	key := Key{Namespace: "ns", Name: "g"}
	var notified []notification
	r.OnGroupChange(func(k Key, podGroupChanged bool) { notified = append(notified, notification{k, podGroupChanged}) })
	r.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}})
	r.SetPod(nil, member("a", "g"))
	r.SetPod(nil, member("b", "g"))
	if blocked, _ := tr.SetBlocked(key, Blocker{UID: "a", Name: "a", Reason: "no node matches"}); !blocked {
		t.Fatal("a did not block the gang of two")
	}
	r.SetNode(nil, st.MakeNode().Name("new").Obj())
	notified = nil
	r.Reserve(member("a", "g"), "new")
	if diff := cmp.Diff([]notification{{key, false}}, notified); diff != "" {
		t.Errorf("notifications when the former blocker reserved (-want,+got):\n%s", diff)
	}
	notified = nil
	r.Reserve(member("b", "g"), "new")
	if len(notified) != 0 {
		t.Errorf("notified %v when a member that blocked nothing reserved", notified)
	}
}

// TestBlockedOnlyWhenTheJobCannotDoWithout: members that fit no node (with their pending
// siblings of the same shape) block their gang only once the others cannot complete it:
// fewer than minMember left, or fewer complete sub-groups than minSubGroups. A member whose
// spec changes may fit again; a member added lifts a block the job no longer needs.
func TestBlockedOnlyWhenTheJobCannotDoWithout(t *testing.T) {
	type step struct {
		member               string
		blocked, reported    bool
		changeSpecBeforehand bool
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		members     map[string]map[string]string // name -> extra labels
		minMember   int32
		sameShape   bool
		steps       []step
	}{
		{
			name:      "one shape: a member that fits nowhere counts its pending siblings",
			members:   map[string]map[string]string{"a": nil, "b": nil, "c": nil, "d": nil},
			minMember: 2,
			sameShape: true,
			steps:     []step{{member: "a", blocked: true, reported: true}},
		},
		{
			name:      "elastic: two of four may go",
			members:   map[string]map[string]string{"a": nil, "b": nil, "c": nil, "d": nil},
			minMember: 2,
			steps:     []step{{member: "a"}, {member: "a"}, {member: "b"}, {member: "c", blocked: true, reported: true}, {member: "c", blocked: true}},
		},
		{
			name:      "a member that may fit again no longer counts",
			members:   map[string]map[string]string{"a": nil, "b": nil, "c": nil, "d": nil},
			minMember: 2,
			steps: []step{{member: "a"}, {member: "b"}, {member: "a", changeSpecBeforehand: true}, {member: "c"},
				{member: "d", blocked: true, reported: true}},
		},
		{
			name: "sub-groups: one of two stages may go",
			annotations: map[string]string{podgroup.SubGroupPolicyAnnotation: `[{"name":"stage","subGroupSize":2,"minSubGroups":1,` +
				`"labelSelector":{"matchLabels":{"role":"worker"}},"matchLabelKeys":["stage"]}]`},
			members: map[string]map[string]string{
				"w0": {"role": "worker", "stage": "0"}, "w1": {"role": "worker", "stage": "0"},
				"w2": {"role": "worker", "stage": "1"}, "w3": {"role": "worker", "stage": "1"},
			},
			minMember: 2,
			steps:     []step{{member: "w0"}, {member: "w1"}, {member: "w2", blocked: true, reported: true}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New()
			r := tr.Registry()
			key := Key{Namespace: "ns", Name: "g"}
			r.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", Annotations: tc.annotations},
				Spec: schedulingv1alpha1.PodGroupSpec{MinMember: tc.minMember}})
			pods := map[string]*v1.Pod{}
			for name, l := range tc.members {
				p := member(name, "g")
				for k, v := range l {
					p.Labels[k] = v
				}
				if !tc.sameShape {
					// Each its own shape: one failing says nothing of the others.
					p.Spec.NodeSelector = map[string]string{"slot": name}
				}
				pods[name] = p
				r.SetPod(nil, p)
			}
			for i, s := range tc.steps {
				if s.changeSpecBeforehand {
					changed := pods[s.member].DeepCopy()
					changed.Spec.NodeSelector = map[string]string{"zone": "b"}
					r.SetPod(pods[s.member], changed)
					pods[s.member] = changed
					continue
				}
				blocked, reported := tr.SetBlocked(key, Blocker{UID: pods[s.member].UID, Name: s.member, Reason: "1 node(s) didn't match Pod's node affinity/selector"})
				if blocked != s.blocked || reported != s.reported {
					t.Errorf("step %d, %s: blocked %v, reported %v; want %v, %v", i, s.member, blocked, reported, s.blocked, s.reported)
				}
				if b := tr.Blocker(key); (b != nil) != s.blocked || (b != nil && b.Name != s.member) {
					t.Errorf("step %d, %s: blocker %v", i, s.member, b)
				}
			}
		})
	}
}

// TestBlockLiftedWhenTheJobCanDoWithout: a member added, or a member known to fit nowhere
// whose spec changes, lifts the block when the others can complete the job now (and notifies,
// so the held members try); a blocker a node change cleared that fails again alone frees the
// members held for it.
func TestBlockLiftedWhenTheJobCanDoWithout(t *testing.T) {
	key := Key{Namespace: "ns", Name: "g"}
	setup := func(t *testing.T) (*Tracker, *podgroup.Registry, *int, map[string]*v1.Pod) {
		tr := New()
		r := tr.Registry()
		r.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}})
		pods := map[string]*v1.Pod{}
		for _, name := range []string{"a", "b", "c"} {
			p := member(name, "g")
			p.Spec.NodeSelector = map[string]string{"slot": name}
			pods[name] = p
			r.SetPod(nil, p)
		}
		tr.SetBlocked(key, Blocker{UID: "a", Name: "a", Reason: "taint"})
		if blocked, _ := tr.SetBlocked(key, Blocker{UID: "b", Name: "b", Reason: "taint"}); !blocked {
			t.Fatal("two of three fit nowhere with minMember 2: not blocked")
		}
		notified := 0
		r.OnGroupChange(func(Key, bool) { notified++ })
		return tr, r, &notified, pods
	}
	t.Run("a member added", func(t *testing.T) {
		tr, r, notified, _ := setup(t)
		d := member("d", "g")
		d.Spec.NodeSelector = map[string]string{"slot": "d"}
		r.SetPod(nil, d)
		if b := tr.Blocker(key); b != nil || *notified != 1 {
			t.Errorf("blocker %v, %d notifications; want none and 1", b, *notified)
		}
	})
	t.Run("a member that may fit again", func(t *testing.T) {
		tr, r, notified, pods := setup(t)
		changed := pods["a"].DeepCopy()
		changed.Spec.NodeSelector = map[string]string{"slot": "anywhere"}
		r.SetPod(pods["a"], changed)
		if b := tr.Blocker(key); b != nil || *notified != 1 {
			t.Errorf("blocker %v, %d notifications; want none and 1", b, *notified)
		}
	})
	t.Run("a cleared blocker fails again alone", func(t *testing.T) {
		tr, r, notified, _ := setup(t)
		r.SetNode(nil, st.MakeNode().Name("node-9").Obj())
		if blocked, _ := tr.SetBlocked(key, Blocker{UID: "b", Name: "b", Reason: "taint"}); blocked {
			t.Error("one of three fits nowhere with minMember 2: blocked")
		}
		if *notified != 1 {
			t.Errorf("%d notifications, want 1: the members held for b wait for nothing", *notified)
		}
	})
}

// TestFitNowhereByShape: a member without claims that fits no node counts its pending
// siblings of the same shape, and later members of that shape, as fitting nowhere too; one
// with a volume claim counts alone; a sibling that reserves shows the shape fits after all.
func TestFitNowhereByShape(t *testing.T) {
	key := Key{Namespace: "ns", Name: "g"}
	newGang := func(t *testing.T, claims bool) (*Tracker, *podgroup.Registry, *int) {
		tr := New()
		r := tr.Registry()
		r.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}})
		for _, name := range []string{"a", "b", "c"} {
			p := member(name, "g")
			if claims {
				p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
					PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + name}}}}
			}
			r.SetPod(nil, p)
		}
		notified := 0
		r.OnGroupChange(func(Key, bool) { notified++ })
		return tr, r, &notified
	}
	t.Run("same shape, no claims: blocked at once; later siblings keep it blocked", func(t *testing.T) {
		tr, r, notified := newGang(t, false)
		if blocked, _ := tr.SetBlocked(key, Blocker{UID: "a", Name: "a", Reason: "taint"}); !blocked {
			t.Fatal("three members of one shape that fits nowhere, minMember 2: not blocked")
		}
		// Counted alone, two more members would make minMember 2 without a, b and c.
		r.SetPod(nil, member("d", "g"))
		r.SetPod(nil, member("e", "g"))
		if b := tr.Blocker(key); b == nil || *notified != 0 {
			t.Errorf("after two more members of the same shape: blocker %v, %d notifications; want a, 0", b, *notified)
		}
	})
	t.Run("DRA claims: each counts alone", func(t *testing.T) {
		tr := New()
		r := tr.Registry()
		r.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}})
		for _, name := range []string{"a", "b", "c"} {
			p := member(name, "g")
			p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}}
			r.SetPod(nil, p)
		}
		if blocked, _ := tr.SetBlocked(key, Blocker{UID: "a", Name: "a", Reason: "cannot allocate all claims"}); blocked {
			t.Error("a member whose own resource claim keeps it out blocked its siblings")
		}
	})
	t.Run("a sibling reserves: the shape fits, the block goes", func(t *testing.T) {
		tr, r, notified := newGang(t, false)
		tr.SetBlocked(key, Blocker{UID: "a", Name: "a", Reason: "taint"})
		r.Reserve(member("b", "g"), "node-1")
		if b := tr.Blocker(key); b != nil || *notified != 1 {
			t.Errorf("blocker %v, %d notifications; want none and 1", b, *notified)
		}
	})
	t.Run("volume claims: each counts alone", func(t *testing.T) {
		tr, _, _ := newGang(t, true)
		if blocked, _ := tr.SetBlocked(key, Blocker{UID: "a", Name: "a", Reason: "1 node(s) had volume node affinity conflict"}); blocked {
			t.Error("a member whose own claim keeps it out blocked its siblings")
		}
	})
}
