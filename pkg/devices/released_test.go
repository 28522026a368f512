package devices_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/devices"
)

// TestUnreleased: a gang that evicted pods for their devices waits for their claims: counted
// while allocated and reserved for none but the evicted pods (or nobody, being released);
// not once deallocated or deleted, nor when another pod still uses the claim.
func TestUnreleased(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(dra *fakeDRA) []*v1.Pod
		want  int
	}{
		{"claim allocated, reserved for the victim", func(dra *fakeDRA) []*v1.Pod {
			v, c := claimPod("victim", 8)
			allocate(c, "node-a", span(0, 8), v)
			dra.AddClaims(c)
			return []*v1.Pod{v}
		}, 1},
		{"claim allocated, reservation already dropped", func(dra *fakeDRA) []*v1.Pod {
			v, c := claimPod("victim", 8)
			allocate(c, "node-a", span(0, 8))
			dra.AddClaims(c)
			return []*v1.Pod{v}
		}, 1},
		{"claim deallocated", func(dra *fakeDRA) []*v1.Pod {
			v, c := claimPod("victim", 8)
			dra.AddClaims(c)
			return []*v1.Pod{v}
		}, 0},
		{"claim deleted", func(dra *fakeDRA) []*v1.Pod {
			v, _ := claimPod("victim", 8)
			return []*v1.Pod{v}
		}, 0},
		{"shared claim still used by a pod that stays", func(dra *fakeDRA) []*v1.Pod {
			c := sharedClaim("shared", 4)
			v, stays := sharingPod("victim", "shared"), sharingPod("stays", "shared")
			allocate(c, "node-a", span(0, 4), v, stays)
			dra.AddClaims(c)
			return []*v1.Pod{v}
		}, 0},
		{"shared claim of two victims, counted once", func(dra *fakeDRA) []*v1.Pod {
			c := sharedClaim("shared", 4)
			a, b := sharingPod("a", "shared"), sharingPod("b", "shared")
			allocate(c, "node-a", span(0, 4), a, b)
			dra.AddClaims(c)
			return []*v1.Pod{a, b}
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dra := newFakeDRA()
			victims := tc.build(dra)
			got, err := devices.Unreleased(dra, victims)
			if err != nil || got != tc.want {
				t.Errorf("Unreleased = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}
