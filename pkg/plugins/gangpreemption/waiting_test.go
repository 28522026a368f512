package gangpreemption

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// TestSharedVictimCountsForEveryGang: two gangs' preemptions chose the same pod (from
// snapshots taken before one saw the other's eviction). Its deletion counts down both
// attempts: neither gang waits for ever. Ending one attempt leaves the other's victims.
func TestSharedVictimCountsForEveryGang(t *testing.T) {
	pl := newTestPlugin(&cacheView{}, gangstate.New())
	// The two gangs, as the registry knows them.
	for _, g := range []string{"a", "b"} {
		pl.registry.SetPod(nil, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: g + "-0", UID: types.UID(g + "-0"),
			Labels: map[string]string{schedulingv1alpha1.PodGroupLabel: g}}})
	}
	pod := func(uid string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)}}
	}
	shared, onlyA, onlyB := pod("shared"), pod("only-a"), pod("only-b")
	a, b := podgroup.Key{Namespace: "ns", Name: "a"}, podgroup.Key{Namespace: "ns", Name: "b"}
	logger := klog.Background()
	pl.gangs.Lock()
	pl.startLocked(logger, a, &gangstate.Preemption{Victims: []*v1.Pod{shared, onlyA}})
	pl.startLocked(logger, b, &gangstate.Preemption{Victims: []*v1.Pod{shared}})
	pl.gangs.Unlock()

	pl.victimGone(logger, shared)
	pl.gangs.Lock()
	gotB, gotA := pl.gangs.WaitingPreemptionLocked(b), pl.gangs.WaitingPreemptionLocked(a)
	pl.gangs.Unlock()
	if gotB != nil {
		t.Errorf("gang b still waits after its only victim went")
	}
	if gotA == nil || gotA.Waiting.Len() != 1 || !gotA.Waiting.Has("only-a") {
		t.Fatalf("gang a's attempt %+v, want it waiting for only-a", gotA)
	}
	pl.victimGone(logger, onlyB) // not a victim: changes nothing
	pl.victimGone(logger, onlyA)
	waiting, draining, victims := pl.gangs.PreemptionsLeft()
	if len(waiting) != 0 || victims != 0 {
		t.Errorf("left behind: running %v, %d victims waited for", waiting, victims)
	}
	// Both gangs drain: their members wait until the scheduler's cache drops the victims.
	if diff := cmp.Diff([]podgroup.Key{a, b}, draining); diff != "" {
		t.Errorf("draining (-want,+got):\n%s", diff)
	}
}
