package podgroup

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

func member(name, group string) *v1.Pod {
	return st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedulingv1alpha1.PodGroupLabel, group).Obj()
}

func TestRegistryCounts(t *testing.T) {
	r := New()
	key := Key{Namespace: "ns", Name: "g"}
	var notified []notification
	r.OnGroupChange(func(k Key, podGroupChanged bool) { notified = append(notified, notification{k, podGroupChanged}) })

	r.SetPod(nil, member("a", "g"))
	r.SetPod(nil, member("b", "g"))
	r.SetPod(nil, member("c", "g"))
	r.SetPod(nil, st.MakePod().Namespace("ns").Name("solo").UID("solo").Obj())
	if diff := cmp.Diff(Info{Members: 3}, r.Info(key)); diff != "" {
		t.Errorf("without PodGroup (-want,+got):\n%s", diff)
	}
	pg := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}}
	r.SetPodGroup(pg)

	r.Reserve(member("a", "g"), "node-1")
	r.Reserve(member("a", "g"), "node-1") // idempotent
	bound := member("b", "g")
	bound.Spec.NodeName = "node-1"
	r.SetPod(member("b", "g"), bound)
	r.Reserve(bound, "node-1") // a bound member is not counted twice
	if diff := cmp.Diff(Info{PodGroup: pg, Revision: 1, Members: 3, Bound: 1, Scheduled: 2}, r.Info(key)); diff != "" {
		t.Errorf("reserved and bound (-want,+got):\n%s", diff)
	}
	if got := names(r.PendingMembers(key)); !cmp.Equal(got, []string{"c"}) {
		t.Errorf("pending = %v, want [c]", got)
	}

	r.Unreserve(member("a", "g"))
	r.Unreserve(member("a", "g")) // idempotent
	done := bound.DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	r.SetPod(bound, done)
	moved := member("c", "g")
	moved.Labels[schedulingv1alpha1.PodGroupLabel] = "other"
	r.SetPod(member("c", "g"), moved)
	if diff := cmp.Diff(Info{PodGroup: pg, Revision: 1, Members: 1, Scheduled: 0}, r.Info(key)); diff != "" {
		t.Errorf("after unreserve, completion and relabel (-want,+got):\n%s", diff)
	}
	if got := r.Info(Key{Namespace: "ns", Name: "other"}).Members; got != 1 {
		t.Errorf("members of the other group = %d, want 1", got)
	}
	if got := r.Info(key).MinMember(); got != 2 {
		t.Errorf("MinMember = %d, want 2", got)
	}
	// Only the PodGroup's arrival notified (the members came first; none of them, nor the
	// relabelled one, brought a group to exactly minMember with its PodGroup present).
	want := []notification{{key, true}}
	if diff := cmp.Diff(want, notified); diff != "" {
		t.Errorf("notifications (-want,+got):\n%s", diff)
	}
}

func TestClusterAllocatable(t *testing.T) {
	r := New()
	node := func(name, cpu string) *v1.Node {
		return st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{v1.ResourceCPU: cpu}).Obj()
	}
	r.SetNode(nil, node("a", "4"))
	r.SetNode(nil, node("b", "8"))
	before := r.ClusterAllocatable()
	r.SetNode(nil, node("a", "2"))
	r.DeleteNode("b")
	if got := r.ClusterAllocatable()[v1.ResourceCPU]; got.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("cluster cpu = %s, want 2", got.String())
	}
	if got := before[v1.ResourceCPU]; got.Cmp(resource.MustParse("12")) != 0 {
		t.Errorf("a published total changed afterwards: %s, want 12", got.String())
	}
}

// notification is one call of an OnGroupChange listener.
type notification struct {
	Key             Key
	PodGroupChanged bool
}

// TestMinResourcesShortfallWakesTheGroup: a group found short of the cluster's allocatable is
// notified when a node change covers its minResources, and when its minResources change;
// nothing else notifies.
func TestMinResourcesShortfallWakesTheGroup(t *testing.T) {
	r := New()
	var notified []notification
	r.OnGroupChange(func(k Key, podGroupChanged bool) { notified = append(notified, notification{k, podGroupChanged}) })
	node := func(name, gpus string) *v1.Node {
		return st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{"nvidia.com/gpu": gpus}).Obj()
	}
	setGroup := func(gpus string) {
		r.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"},
			Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 1, MinResources: v1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus)}}})
	}
	key := Key{Namespace: "ns", Name: "g"}
	min := func() v1.ResourceList { return r.Info(key).PodGroup.Spec.MinResources }
	r.SetNode(nil, node("a", "8"))
	setGroup("16")
	notified = nil
	if got, want := r.MinResourcesShortfall(key, min()), "nvidia.com/gpu 16 (cluster allocatable 8)"; got != want {
		t.Fatalf("shortfall %q, want %q", got, want)
	}
	r.SetNode(nil, node("b", "4")) // 12: still short
	if len(notified) != 0 {
		t.Errorf("notified %v while the cluster is still short", notified)
	}
	r.SetNode(nil, node("c", "4")) // 16: enough
	r.SetNode(nil, node("d", "4")) // remembered no longer
	setGroup("8")
	if diff := cmp.Diff([]notification{{key, false}, {key, true}}, notified); diff != "" {
		t.Errorf("notifications (-want,+got):\n%s", diff)
	}
	if got := r.MinResourcesShortfall(key, min()); got != "" {
		t.Errorf("shortfall %q at 20 GPUs for 8", got)
	}
}

// TestFormerBlockerReservingActivatesTheHeldMembers: a node change clears a gang's blocker;
// when the blocker then reserves, the members held for it are activated at once, also when
// its Permit will not wait (the gang is complete with it).
func TestFormerBlockerReservingActivatesTheHeldMembers(t *testing.T) {
	r := New()
	key := Key{Namespace: "ns", Name: "g"}
	var notified []notification
	r.OnGroupChange(func(k Key, podGroupChanged bool) { notified = append(notified, notification{k, podGroupChanged}) })
	r.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}})
	r.SetPod(nil, member("a", "g"))
	r.SetPod(nil, member("b", "g"))
	if blocked, _ := r.SetBlocked(key, Blocker{UID: "a", Name: "a", Reason: "no node matches"}); !blocked {
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

func names(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// TestPreemptionHoldersAreEachAsked: each profile's GangPreemption registers a holder on the
// shared registry; a nomination or a gang held by any of them is held, and a holder without
// an answer (nil) says no.
func TestPreemptionHoldersAreEachAsked(t *testing.T) {
	r := New()
	pod := member("m-0", "g")
	running, other := Key{Namespace: "ns", Name: "g"}, Key{Namespace: "ns", Name: "other"}
	if _, held := r.NominationHeld(pod); held || r.Preempting(running) {
		t.Errorf("held without a holder")
	}
	r.AddPreemptionHolder(PreemptionHolder{
		Running:    func(Key) bool { return false },
		Nomination: func(*v1.Pod) (string, bool) { return "", false },
	})
	r.AddPreemptionHolder(PreemptionHolder{})
	r.AddPreemptionHolder(PreemptionHolder{
		Running:    func(k Key) bool { return k == running },
		Nomination: func(p *v1.Pod) (string, bool) { return "node-" + p.Name, true },
	})
	if node, held := r.NominationHeld(pod); !held || node != "node-m-0" {
		t.Errorf("NominationHeld = %q, %v; want node-m-0, true", node, held)
	}
	if !r.Preempting(running) || r.Preempting(other) {
		t.Errorf("Preempting: %v for %s, %v for %s; want true, false", r.Preempting(running), running, r.Preempting(other), other)
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
			annotations: map[string]string{SubGroupPolicyAnnotation: `[{"name":"stage","subGroupSize":2,"minSubGroups":1,` +
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
			r := New()
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
				blocked, reported := r.SetBlocked(key, Blocker{UID: pods[s.member].UID, Name: s.member, Reason: "1 node(s) didn't match Pod's node affinity/selector"})
				if blocked != s.blocked || reported != s.reported {
					t.Errorf("step %d, %s: blocked %v, reported %v; want %v, %v", i, s.member, blocked, reported, s.blocked, s.reported)
				}
				if b := r.Info(key).Blocker; (b != nil) != s.blocked || (b != nil && b.Name != s.member) {
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
	setup := func(t *testing.T) (*Registry, *int, map[string]*v1.Pod) {
		r := New()
		r.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}})
		pods := map[string]*v1.Pod{}
		for _, name := range []string{"a", "b", "c"} {
			p := member(name, "g")
			p.Spec.NodeSelector = map[string]string{"slot": name}
			pods[name] = p
			r.SetPod(nil, p)
		}
		r.SetBlocked(key, Blocker{UID: "a", Name: "a", Reason: "taint"})
		if blocked, _ := r.SetBlocked(key, Blocker{UID: "b", Name: "b", Reason: "taint"}); !blocked {
			t.Fatal("two of three fit nowhere with minMember 2: not blocked")
		}
		notified := 0
		r.OnGroupChange(func(Key, bool) { notified++ })
		return r, &notified, pods
	}
	t.Run("a member added", func(t *testing.T) {
		r, notified, _ := setup(t)
		d := member("d", "g")
		d.Spec.NodeSelector = map[string]string{"slot": "d"}
		r.SetPod(nil, d)
		if b := r.Info(key).Blocker; b != nil || *notified != 1 {
			t.Errorf("blocker %v, %d notifications; want none and 1", b, *notified)
		}
	})
	t.Run("a member that may fit again", func(t *testing.T) {
		r, notified, pods := setup(t)
		changed := pods["a"].DeepCopy()
		changed.Spec.NodeSelector = map[string]string{"slot": "anywhere"}
		r.SetPod(pods["a"], changed)
		if b := r.Info(key).Blocker; b != nil || *notified != 1 {
			t.Errorf("blocker %v, %d notifications; want none and 1", b, *notified)
		}
	})
	t.Run("a cleared blocker fails again alone", func(t *testing.T) {
		r, notified, _ := setup(t)
		r.SetNode(nil, st.MakeNode().Name("node-9").Obj())
		if blocked, _ := r.SetBlocked(key, Blocker{UID: "b", Name: "b", Reason: "taint"}); blocked {
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
	newGang := func(t *testing.T, claims bool) (*Registry, *int) {
		r := New()
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
		return r, &notified
	}
	t.Run("same shape, no claims: blocked at once; later siblings keep it blocked", func(t *testing.T) {
		r, notified := newGang(t, false)
		if blocked, _ := r.SetBlocked(key, Blocker{UID: "a", Name: "a", Reason: "taint"}); !blocked {
			t.Fatal("three members of one shape that fits nowhere, minMember 2: not blocked")
		}
		// Counted alone, two more members would make minMember 2 without a, b and c.
		r.SetPod(nil, member("d", "g"))
		r.SetPod(nil, member("e", "g"))
		if b := r.Info(key).Blocker; b == nil || *notified != 0 {
			t.Errorf("after two more members of the same shape: blocker %v, %d notifications; want a, 0", b, *notified)
		}
	})
	t.Run("DRA claims: each counts alone", func(t *testing.T) {
		r := New()
		r.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}})
		for _, name := range []string{"a", "b", "c"} {
			p := member(name, "g")
			p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}}
			r.SetPod(nil, p)
		}
		if blocked, _ := r.SetBlocked(key, Blocker{UID: "a", Name: "a", Reason: "cannot allocate all claims"}); blocked {
			t.Error("a member whose own resource claim keeps it out blocked its siblings")
		}
	})
	t.Run("a sibling reserves: the shape fits, the block goes", func(t *testing.T) {
		r, notified := newGang(t, false)
		r.SetBlocked(key, Blocker{UID: "a", Name: "a", Reason: "taint"})
		r.Reserve(member("b", "g"), "node-1")
		if b := r.Info(key).Blocker; b != nil || *notified != 1 {
			t.Errorf("blocker %v, %d notifications; want none and 1", b, *notified)
		}
	})
	t.Run("volume claims: each counts alone", func(t *testing.T) {
		r, _ := newGang(t, true)
		if blocked, _ := r.SetBlocked(key, Blocker{UID: "a", Name: "a", Reason: "1 node(s) had volume node affinity conflict"}); blocked {
			t.Error("a member whose own claim keeps it out blocked its siblings")
		}
	})
}

// TestRetryUnplaced: only the scout of a gang waiting for room may retry, when the nodes of
// its cycle's snapshot offer more than at the failure (more free of one of the failure's
// resources, counted only for those, or the nodes changed) or after UnplacedMaxAge; not for
// the same room or less, whatever the registry's own node events said (its informer may be
// ahead of the snapshot). A node event wakes the scout, at most once per ScoutWakeInterval;
// one during the failed attempt wakes it at once. A retry ends the hold, once.
func TestRetryUnplaced(t *testing.T) {
	key := Key{Namespace: "ns", Name: "g"}
	at := time.Now()
	free := func(cpu, gpus int64) map[v1.ResourceName]int64 {
		return map[v1.ResourceName]int64{v1.ResourceCPU: cpu, "nvidia.com/gpu": gpus}
	}
	failedWith := Room{Free: free(8000, 4), Nodes: 7}
	for _, tc := range []struct {
		name string
		// asker is the member asking at now, room what the nodes offer then; nodeAdded adds
		// nodes after the failure, nodeDuringAttempt while the failing attempt ran.
		asker             string
		now               time.Time
		room              Room
		nodeAdded         bool
		nodeDuringAttempt bool
		wake              bool
		woken             []string
		retry             bool
	}{
		{name: "the same room", asker: "b", now: at, room: failedWith},
		{name: "less room (another gang reserved since)", asker: "b", now: at, room: Room{Free: free(0, 0), Nodes: 7}},
		{name: "more CPU", asker: "b", now: at, room: Room{Free: free(8001, 4), Nodes: 7}, retry: true},
		{name: "more GPUs, less CPU", asker: "b", now: at, room: Room{Free: free(0, 8), Nodes: 7}, retry: true},
		{name: "the nodes changed, no more free", asker: "b", now: at, room: Room{Free: free(8000, 4), Nodes: 8}, retry: true},
		{name: "more room, asked by a member that is not the scout", asker: "a", now: at, room: Room{Free: free(9000, 8), Nodes: 9}},
		{name: "a node event the snapshot does not show yet", asker: "b", now: at, room: failedWith, nodeAdded: true, woken: []string{"ns/g b"}},
		{name: "a node event and the snapshot shows it", asker: "b", now: at, room: Room{Free: free(8000, 4), Nodes: 8}, nodeAdded: true, woken: []string{"ns/g b"}, retry: true},
		{name: "a node event during the failed attempt", asker: "b", now: at, room: failedWith, nodeDuringAttempt: true, wake: true},
		{name: "old enough", asker: "b", now: at.Add(UnplacedMaxAge), room: failedWith, retry: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New()
			clock := at
			r.now = func() time.Time { return clock }
			var woken []string
			r.OnScoutWake(func(k Key, scout *v1.Pod) { woken = append(woken, k.String()+" "+scout.Name) })
			r.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}})
			r.SetPod(nil, member("a", "g"))
			r.SetPod(nil, member("b", "g"))
			start := r.NodeChanges()
			if tc.nodeDuringAttempt {
				r.SetNode(nil, st.MakeNode().Name("node-0").Obj())
			}
			if wake := r.MarkUnplaced(key, "b", "member b cannot be placed", at, failedWith, start); wake != tc.wake {
				t.Errorf("MarkUnplaced: wake %v, want %v", wake, tc.wake)
			}
			if tc.nodeAdded {
				r.SetNode(nil, st.MakeNode().Name("node-1").Obj())
				r.SetNode(nil, st.MakeNode().Name("node-2").Obj()) // woken already
			}
			if diff := cmp.Diff(tc.woken, woken); diff != "" {
				t.Errorf("woken (-want,+got):\n%s", diff)
			}
			var counted []v1.ResourceName
			u, retry, forgot := r.RetryUnplaced(key, types.UID(tc.asker), tc.now, func(names []v1.ResourceName) Room {
				counted = names
				return tc.room
			})
			if retry != tc.retry || forgot != tc.retry {
				t.Errorf("retry %v, forgot %v (failure %+v), want %v", retry, forgot, u, tc.retry)
			}
			if want := []v1.ResourceName{v1.ResourceCPU, "nvidia.com/gpu"}; counted != nil && !cmp.Equal(counted, want) {
				t.Errorf("counted %v, want the failure's resources %v", counted, want)
			}
			if _, again, forgotAgain := r.RetryUnplaced(key, "b", tc.now, func([]v1.ResourceName) Room { return failedWith }); again != tc.retry || forgotAgain {
				t.Errorf("asked again: retry %v, forgot %v; want %v, false (a retry forgets the failure and ends the hold)", again, forgotAgain, tc.retry)
			}
			if tc.retry || tc.asker != "b" {
				return
			}
			// The scout tried and stays held: node events wake it again, once the interval
			// since the last wake-up has passed.
			woken = nil
			clock = clock.Add(ScoutWakeInterval - time.Second)
			r.SetNode(nil, st.MakeNode().Name("node-3").Obj())
			want := []string{"ns/g b"}
			if tc.nodeAdded {
				want = nil // woken a moment ago
				if diff := cmp.Diff(want, woken); diff != "" {
					t.Errorf("woken within the interval (-want,+got):\n%s", diff)
				}
				clock = clock.Add(time.Second)
				r.SetNode(nil, st.MakeNode().Name("node-4").Obj())
				want = []string{"ns/g b"}
			}
			if diff := cmp.Diff(want, woken); diff != "" {
				t.Errorf("woken after the scout tried (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestNodeFingerprint: what can make room for a pod moves the fingerprint (also a label
// moving from one node to another, in the sum over nodes); a heartbeat does not.
func TestNodeFingerprint(t *testing.T) {
	base := func(name string) *v1.Node {
		return st.MakeNode().Name(name).Label("rack", "r1").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourceMemory: "16Gi"}).Obj()
	}
	sum := func(nodes ...*v1.Node) uint64 {
		var s uint64
		for _, n := range nodes {
			s += NodeFingerprint(n)
		}
		return s
	}
	a, b := base("a"), base("b")
	want := sum(a, b)
	for _, tc := range []struct {
		name    string
		mutate  func(a, b *v1.Node)
		changed bool
	}{
		{name: "a heartbeat", mutate: func(a, _ *v1.Node) {
			a.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
			a.ResourceVersion = "2"
		}},
		{name: "a label", mutate: func(a, _ *v1.Node) { a.Labels["gpu"] = "h100" }, changed: true},
		{name: "a taint", mutate: func(a, _ *v1.Node) {
			a.Spec.Taints = []v1.Taint{{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule}}
		}, changed: true},
		{name: "cordoned", mutate: func(a, _ *v1.Node) { a.Spec.Unschedulable = true }, changed: true},
		{name: "allocatable", mutate: func(a, _ *v1.Node) { a.Status.Allocatable[v1.ResourceCPU] = resource.MustParse("3") }, changed: true},
		{name: "a declared feature", mutate: func(a, _ *v1.Node) { a.Status.DeclaredFeatures = []string{"InPlacePodVerticalScaling"} }, changed: true},
		{name: "allocatable written in another format", mutate: func(a, _ *v1.Node) { a.Status.Allocatable[v1.ResourceMemory] = resource.MustParse("17179869184") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := base("a"), base("b")
			tc.mutate(a, b)
			if got := sum(a, b); (got != want) != tc.changed {
				t.Errorf("fingerprint changed: %v, want %v", got != want, tc.changed)
			}
			if got := NodeCapacityChanged(base("a"), a); got != tc.changed {
				t.Errorf("NodeCapacityChanged = %v, want %v", got, tc.changed)
			}
		})
	}
	// Two taints in either order.
	one, two := v1.Taint{Key: "a", Effect: v1.TaintEffectNoSchedule}, v1.Taint{Key: "b", Value: "x", Effect: v1.TaintEffectNoExecute}
	x, y := base("a"), base("a")
	x.Spec.Taints, y.Spec.Taints = []v1.Taint{one, two}, []v1.Taint{two, one}
	if NodeFingerprint(x) != NodeFingerprint(y) {
		t.Error("the order of a node's taints moves its fingerprint")
	}
	// The same label on one node or the other.
	x, y = base("a"), base("b")
	x.Labels["gpu"] = "h100"
	moved, other := base("a"), base("b")
	other.Labels["gpu"] = "h100"
	if sum(x, y) == sum(moved, other) {
		t.Error("a label moving from one node to another leaves the fingerprint")
	}
}
