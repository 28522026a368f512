package gangpreemption

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/gangstate"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// sortedKeys returns the map's keys in order.
func sortedKeys(m map[podgroup.Key]*attempt) []podgroup.Key {
	keys := make([]podgroup.Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y podgroup.Key) int { return strings.Compare(x.String(), y.String()) })
	return keys
}

// TestSharedVictimCountsForEveryGang: two gangs' preemptions chose the same pod (from
// snapshots taken before one saw the other's eviction). Its deletion counts down both
// attempts: neither gang waits for ever. Ending one attempt leaves the other's victims.
func TestSharedVictimCountsForEveryGang(t *testing.T) {
	pl := newTestPlugin(&cacheView{}, gangstate.New())
	pod := func(uid string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)}}
	}
	shared, onlyA, onlyB := pod("shared"), pod("only-a"), pod("only-b")
	a, b := podgroup.Key{Namespace: "ns", Name: "a"}, podgroup.Key{Namespace: "ns", Name: "b"}
	logger := klog.Background()
	pl.mu.Lock()
	pl.startLocked(logger, a, &attempt{victims: []*v1.Pod{shared, onlyA}})
	pl.startLocked(logger, b, &attempt{victims: []*v1.Pod{shared}})
	pl.mu.Unlock()

	pl.victimGone(logger, shared)
	if _, waiting := pl.running[b]; waiting {
		t.Errorf("gang b still waits after its only victim went")
	}
	if got := pl.running[a]; got == nil || got.waiting.Len() != 1 || !got.waiting.Has("only-a") {
		t.Fatalf("gang a's attempt %+v, want it waiting for only-a", got)
	}
	pl.victimGone(logger, onlyB) // not a victim: changes nothing
	pl.victimGone(logger, onlyA)
	if len(pl.running) != 0 || len(pl.victimOf) != 0 {
		t.Errorf("left behind: running %v, victimOf %v", pl.running, pl.victimOf)
	}
	// Both gangs drain: their members wait until the scheduler's cache drops the victims.
	if diff := cmp.Diff([]podgroup.Key{a, b}, sortedKeys(pl.draining)); diff != "" {
		t.Errorf("draining (-want,+got):\n%s", diff)
	}
}
