package podgroup

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// TestShapesOf: members are alike when the Filter plugins see them alike; ranks, labels and
// names do not matter, requests and node selection do.
func TestShapesOf(t *testing.T) {
	pod := func(name string, req map[v1.ResourceName]string, rank string) *st.PodWrapper {
		return st.MakePod().Namespace("ns").Name(name).UID(name).Label("rank", rank).Res(req)
	}
	gpu := map[v1.ResourceName]string{v1.ResourceCPU: "4", "nvidia.com/gpu": "8"}
	members := []Member{
		{Pod: pod("launcher", map[v1.ResourceName]string{v1.ResourceCPU: "1"}, "").Obj()},
		{Pod: pod("worker-0", gpu, "0").Obj()},
		{Pod: pod("worker-1", gpu, "1").Obj()},
		{Pod: pod("worker-a100", gpu, "2").NodeSelector(map[string]string{"gpu": "a100"}).Obj()},
		{Pod: pod("idle", nil, "").Obj()},
	}
	type view struct {
		Name, Rep string
		Members   []string
	}
	var got []view
	for _, s := range ShapesOf(members) {
		got = append(got, view{s.Name, s.Rep.Name, s.Members})
	}
	want := []view{
		{"cpu=1", "launcher", []string{"launcher"}},
		{"cpu=4,nvidia.com/gpu=8", "worker-0", []string{"worker-0", "worker-1"}},
		{"cpu=4,nvidia.com/gpu=8 (variant 2)", "worker-a100", []string{"worker-a100"}},
		{"no requests", "idle", []string{"idle"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("shapes (-want,+got):\n%s", diff)
	}
}

// TestMemberSignaturesAreMemoised: a member's shape signature is computed once per object the
// registry holds, computed again for the object an update brings, not kept for a copy the
// registry does not hold, and dropped with the member.
func TestMemberSignaturesAreMemoised(t *testing.T) {
	r := New()
	key := Key{Namespace: "ns", Name: "g"}
	a := member("a", "g")
	r.SetPod(nil, a)
	g := r.groups[key]
	if got, want := g.SignatureLocked(a), signatureOf(a); got != want || g.signatures["a"].pod != a {
		t.Fatalf("first signature %q (memo %+v), want %q memoised for the registry's object", got, g.signatures["a"], want)
	}
	bigger := a.DeepCopy()
	bigger.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}}}}
	if got := g.SignatureLocked(bigger); got != signatureOf(bigger) || g.signatures["a"].pod != a {
		t.Errorf("a copy the registry does not hold: %q, memo %+v; want its own signature and the memo unchanged", got, g.signatures["a"])
	}
	r.SetPod(a, bigger)
	if got := g.SignatureLocked(bigger); got != signatureOf(bigger) || got == signatureOf(a) {
		t.Errorf("after the update: %q, want the new object's signature", got)
	}
	r.DeletePod(bigger)
	if _, ok := g.signatures["a"]; ok {
		t.Error("the memo outlived its member")
	}
}
