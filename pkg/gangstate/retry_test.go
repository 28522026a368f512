package gangstate

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// TestRetryGate walks a gang of three members through a hold: who is held back behind whom,
// what ends a hold, and who replaces a scout that went away.
func TestRetryGate(t *testing.T) {
	key := Key{Namespace: "ns", Name: "g"}
	type gate struct {
		Pod     string
		Retried string
		Held    bool
	}
	// check asks RetryGate (which may make the asker the scout) for each pod in turn.
	check := func(r *both, pods ...string) []gate {
		var out []gate
		for _, p := range pods {
			retried, held := r.RetryGate(member(p, "g"))
			out = append(out, gate{p, retried, held})
		}
		return out
	}
	bound := func(name string) *v1.Pod {
		p := member(name, "g")
		p.Spec.NodeName = "node-1"
		return p
	}
	for _, tc := range []struct {
		name string
		// setup runs after a, b and c exist; it returns the pods to ask about, in order.
		setup      func(r *both) []string
		want       []gate
		wantNotify int
	}{
		{
			name:  "no hold: nobody is held",
			setup: func(*both) []string { return []string{"a", "b", "c"} },
			want:  []gate{{"a", "", false}, {"b", "", false}, {"c", "", false}},
		},
		{
			name: "held behind the scout",
			setup: func(r *both) []string {
				r.HoldForRetry(key, "b")
				return []string{"a", "b", "c"}
			},
			want: []gate{{"a", "b", true}, {"b", "", false}, {"c", "b", true}},
		},
		{
			name: "released: nobody is held",
			setup: func(r *both) []string {
				r.HoldForRetry(key, "b")
				if !r.ReleaseRetry(key) || r.ReleaseRetry(key) {
					t.Error("ReleaseRetry: want true once, then false")
				}
				return []string{"a", "c"}
			},
			want: []gate{{"a", "", false}, {"c", "", false}},
		},
		{
			name: "the scout was deleted: the first member to ask replaces it",
			setup: func(r *both) []string {
				r.HoldForRetry(key, "b")
				r.DeletePod(member("b", "g"))
				return []string{"c", "a", "c"}
			},
			want:       []gate{{"c", "", false}, {"a", "c", true}, {"c", "", false}},
			wantNotify: 1,
		},
		{
			name: "the scout was bound elsewhere: the hold ends",
			setup: func(r *both) []string {
				r.HoldForRetry(key, "b")
				r.SetPod(member("b", "g"), bound("b"))
				return []string{"a", "c"}
			},
			want:       []gate{{"a", "", false}, {"c", "", false}},
			wantNotify: 1,
		},
		{
			name: "the PodGroup's spec changed: the hold ends",
			setup: func(r *both) []string {
				r.HoldForRetry(key, "b")
				r.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 2}})
				return []string{"a", "c"}
			},
			want:       []gate{{"a", "", false}, {"c", "", false}},
			wantNotify: 1,
		},
		{
			name: "a deleted non-scout notifies nobody",
			setup: func(r *both) []string {
				r.HoldForRetry(key, "b")
				r.DeletePod(member("c", "g"))
				return []string{"a"}
			},
			want: []gate{{"a", "b", true}},
		},
		{
			name: "blocked: held behind the blocker, without a hold",
			setup: func(r *both) []string {
				r.SetBlocked(key, Blocker{UID: "c", Name: "c", Reason: "2 node(s) didn't match Pod's node affinity/selector"})
				return []string{"a", "b", "c"}
			},
			want: []gate{{"a", "c", true}, {"b", "c", true}, {"c", "", false}},
		},
		{
			name: "blocked and held: the blocker comes first",
			setup: func(r *both) []string {
				r.HoldForRetry(key, "b")
				r.SetBlocked(key, Blocker{UID: "c", Name: "c", Reason: "taint"})
				return []string{"a", "b"}
			},
			want: []gate{{"a", "c", true}, {"b", "c", true}},
		},
		{
			name: "a member created after the hold began passes once: it has no condition yet",
			setup: func(r *both) []string {
				r.HoldForRetry(key, "b")
				r.SetBlocked(key, Blocker{UID: "c", Name: "c", Reason: "taint"})
				r.SetPod(nil, member("d", "g"))
				return []string{"d", "a"}
			},
			want: []gate{{"d", "", false}, {"a", "c", true}},
		},
		{
			name: "after its first cycle it is held",
			setup: func(r *both) []string {
				r.HoldForRetry(key, "b")
				r.SetPod(nil, member("d", "g"))
				r.MarkAttempted(member("d", "g"))
				return []string{"d"}
			},
			want: []gate{{"d", "b", true}},
		},
		{
			name: "the blocker reserves: it fits after all, nobody is held behind it",
			setup: func(r *both) []string {
				r.SetBlocked(key, Blocker{UID: "c", Name: "c", Reason: "taint"})
				r.Reserve(member("c", "g"), "node-1")
				if b := r.Blocker(key); b != nil {
					t.Errorf("blocker %s after it reserved", b.Name)
				}
				return []string{"a", "b"}
			},
			want:       []gate{{"a", "", false}, {"b", "", false}},
			wantNotify: 1,
		},
		{
			name: "a node change clears the blocker; its deletion then lets the members held for it try",
			setup: func(r *both) []string {
				r.SetBlocked(key, Blocker{UID: "c", Name: "c", Reason: "taint"})
				r.SetNode(nil, st.MakeNode().Name("node-9").Obj())
				if b := r.Blocker(key); b != nil {
					t.Errorf("blocker %s after a node was added", b.Name)
				}
				r.DeletePod(member("c", "g"))
				r.DeletePod(member("c", "g")) // once
				return []string{"a", "b"}
			},
			want:       []gate{{"a", "", false}, {"b", "", false}},
			wantNotify: 1,
		},
		{
			name: "a blocker that is not the scout is never held behind it",
			setup: func(r *both) []string {
				r.HoldForRetry(key, "b")
				r.SetBlocked(key, Blocker{UID: "c", Name: "c", Reason: "taint"})
				return []string{"c"}
			},
			want: []gate{{"c", "", false}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newBoth()
			// minMember 3: the gang cannot do without any member, so one that fits no node
			// blocks it.
			r.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 3}})
			for _, p := range []string{"a", "b", "c"} {
				r.SetPod(nil, member(p, "g"))
				r.MarkAttempted(member(p, "g"))
			}
			notified := 0
			r.OnGroupChange(func(Key, bool) { notified++ })
			pods := tc.setup(r)
			if diff := cmp.Diff(tc.want, check(r, pods...)); diff != "" {
				t.Errorf("RetryGate (-want,+got):\n%s", diff)
			}
			for _, g := range tc.want {
				if got := r.Held(member(g.Pod, "g")); got != g.Held {
					t.Errorf("Held(%s) = %v, want %v", g.Pod, got, g.Held)
				}
			}
			if notified != tc.wantNotify {
				t.Errorf("%d notifications, want %d", notified, tc.wantNotify)
			}
		})
	}
}

// TestRetryGateClearsAHeldMembersRequeueClaim: a member that a cluster event requeued for its
// gang and that is then held never runs the attempt that ends the claim; holding it ends the
// claim, so the next event can requeue the scout.
func TestRetryGateClearsAHeldMembersRequeueClaim(t *testing.T) {
	r := newBoth()
	key := Key{Namespace: "ns", Name: "g"}
	for _, p := range []string{"a", "b"} {
		r.SetPod(nil, member(p, "g"))
		r.MarkAttempted(member(p, "g"))
	}
	now := time.Now()
	if !r.ClaimRequeue(key, "a", now) {
		t.Fatal("a: first claim refused")
	}
	r.HoldForRetry(key, "b")
	if r.ClaimRequeue(key, "b", now) {
		t.Fatal("b: claimed while a's claim runs")
	}
	if _, held := r.RetryGate(member("a", "g")); !held {
		t.Fatal("a: not held")
	}
	if !r.ClaimRequeue(key, "b", now) {
		t.Error("b: the scout cannot claim after a was held")
	}
}

func TestRetryMemberAndGateProfiles(t *testing.T) {
	r := newBoth()
	key := Key{Namespace: "ns", Name: "g"}
	if r.RetryMember(key) != nil {
		t.Error("RetryMember of an unknown gang: want nil")
	}
	for _, p := range []string{"a", "b", "c"} {
		r.SetPod(nil, member(p, "g"))
	}
	if got := r.RetryMember(key).Name; got != "a" {
		t.Errorf("without a hold: RetryMember = %s, want a (first pending by name)", got)
	}
	r.HoldForRetry(key, "c")
	if got := r.RetryMember(key).Name; got != "c" {
		t.Errorf("held: RetryMember = %s, want the scout c", got)
	}
	if r.RetryGateEnabled("hypernode-scheduler") {
		t.Error("gate enabled before EnableRetryGate")
	}
	r.EnableRetryGate("hypernode-scheduler")
	if !r.RetryGateEnabled("hypernode-scheduler") || r.RetryGateEnabled("default-scheduler") {
		t.Error("EnableRetryGate: want exactly hypernode-scheduler enabled")
	}
}

// both is a gang state and its registry, for tests that drive the data and ask the state.
type both struct {
	*Tracker
	*podgroup.Registry
}

func newBoth() *both {
	t := New()
	return &both{Tracker: t, Registry: t.Registry()}
}
