package gangpreemption

import (
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// TestSoonerOrdersHoldDomains is the choice of the domain a gang holds: the fewest pods in
// the way, then the least room they take, then the lowest tier (the whole cluster last), then
// the tightest domain, then the name.
func TestSoonerOrdersHoldDomains(t *testing.T) {
	choices := []*holdChoice{
		{choice: &choice{domain: domain{name: "spine-0", tier: 2}, evicted: 3, surplus: 0}, load: 1},
		{choice: &choice{domain: domain{name: "spine-1", tier: 2}, evicted: 2, surplus: 5}, load: 2},
		{choice: &choice{domain: domain{name: "spine-2", tier: 2}, evicted: 2, surplus: 5}, load: 1.5},
		{choice: &choice{domain: domain{name: "leaf-9", tier: 1}, evicted: 2, surplus: 9}, load: 1.5},
		{choice: &choice{domain: domain{name: wholeCluster}, evicted: 2, surplus: 0}, load: 1.5},
		{choice: &choice{domain: domain{name: "spine-4", tier: 2}, evicted: 2, surplus: 1}, load: 1.5},
		{choice: &choice{domain: domain{name: "spine-3", tier: 2}, evicted: 2, surplus: 1}, load: 1.5},
	}
	sort.SliceStable(choices, func(i, j int) bool { return choices[i].sooner(choices[j]) })
	var got []string
	for _, c := range choices {
		got = append(got, c.domain.name)
	}
	want := []string{"leaf-9", "spine-3", "spine-4", "spine-2", wholeCluster, "spine-1", "spine-0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order (-want,+got):\n%s", diff)
	}
}

// TestHoldOfNeedsTheMembersRequests: a hold keeps on each node the requests of the members
// placed there, counts the nodes with nothing in the way as free, and names the first pods in
// the way in order.
func TestHoldOfNeedsTheMembersRequests(t *testing.T) {
	gpus := func(n int64) v1.ResourceList {
		return v1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(n, resource.DecimalSI)}
	}
	member := func(name string) *v1.Pod {
		return st.MakePod().Namespace("ns").Name(name).Label("scheduling.x-k8s.io/pod-group", "big").Res(map[v1.ResourceName]string{"nvidia.com/gpu": "4"}).Obj()
	}
	m0, m1, m2 := member("big-0"), member("big-1"), member("big-2")
	key := podgroup.Key{Namespace: "ns", Name: "big"}
	su := &setup{gang: podgroup.Gang{Key: key, Pending: []podgroup.Member{{Pod: m1}, {Pod: m2}}}}
	sim := &simulation{pod: m0}
	victim := func(name, node string) placed {
		return placed{pod: st.MakePod().Namespace("ns").Name(name).Obj(), node: node}
	}
	c := &holdChoice{choice: &choice{domain: domain{name: "spine-1", tier: 2},
		assign:  map[string]string{"big-0": "n-1", "big-1": "n-1", "big-2": "n-2"},
		victims: []*unit{{pods: []placed{victim("job-d", "n-1"), victim("job-a", "n-1")}}, {pods: []placed{victim("job-c", "n-1"), victim("job-b", "n-1")}}},
		evicted: 4}}
	since := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	h := holdOf(su, sim, c, podgroup.GangPrecedence(key, 0, since), since)
	wantNeed := map[string]v1.ResourceList{"n-1": gpus(8), "n-2": gpus(4)}
	if diff := cmp.Diff(wantNeed, h.Need); diff != "" {
		t.Errorf("need (-want,+got):\n%s", diff)
	}
	if want := "holding spine-1 (tier 2) for this gang: 1/2 nodes free, waiting for 4 pods to finish: ns/job-a, ns/job-b, ns/job-c, +1 more"; h.Message() != want {
		t.Errorf("message %q, want %q", h.Message(), want)
	}
}

// TestNeverFinishes: a hold's drain does not wait for a DaemonSet's pod or a static pod's
// mirror (they run as long as their node); a Job's pod and a bare pod finish.
func TestNeverFinishes(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{"DaemonSet", st.MakePod().Name("ds").OwnerReference("agent", appsv1.SchemeGroupVersion.WithKind("DaemonSet")).Obj(), true},
		{"mirror", st.MakePod().Name("static").Annotation(v1.MirrorPodAnnotationKey, "x").Obj(), true},
		{"Job", st.MakePod().Name("job").OwnerReference("train", batchv1.SchemeGroupVersion.WithKind("Job")).Obj(), false},
		{"bare", st.MakePod().Name("bare").Obj(), false},
	} {
		if got := neverFinishes(tc.pod); got != tc.want {
			t.Errorf("%s: neverFinishes = %t, want %t", tc.name, got, tc.want)
		}
	}
}
