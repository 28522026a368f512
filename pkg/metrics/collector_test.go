package metrics

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/testutil"
)

// TestStateCollector: the gauges sum every source that is running, per reason, and drop a
// source when its context ends.
func TestStateCollector(t *testing.T) {
	c := &stateCollector{sources: map[*Source]struct{}{}}
	first, stopFirst := context.WithCancel(t.Context())
	defer stopFirst()
	c.add(first, &Source{
		GatedGangs:         func() map[string]int { return map[string]int{"PodGroupMissing": 1, "WaitingForMembers": 2} },
		ExcludedHyperNodes: func() map[string]int { return map[string]int{"Cycle": 0, "InvalidMember": 1} },
		HeldNodes:          func() int { return 16 },
		Devices:            func() map[string][2]int64 { return map[string][2]int64{"gpu.nvidia.com": {64, 24}} },
	})
	c.add(t.Context(), &Source{
		GatedGangs: func() map[string]int { return map[string]int{"PodGroupMissing": 0, "WaitingForMembers": 3} },
		HeldNodes:  func() int { return 4 },
		Devices: func() map[string][2]int64 {
			return map[string][2]int64{"gpu.nvidia.com": {16, 16}, "gpu.amd.com": {8, 0}}
		},
	})
	const excludedHeader = `# HELP hypernode_excluded_hypernodes [ALPHA] HyperNodes that topology placement does not use, by reason: the reason of the HyperNode's own problem (as in its Events) or AncestorExcluded when it lies below an excluded HyperNode.
# TYPE hypernode_excluded_hypernodes gauge
`
	const gatedHeader = `# HELP hypernode_gangs_gated [ALPHA] Gangs with members held back in PreEnqueue, by reason: InTwoPodGroups (a member also names a native pod group), PodGroupMissing, WaitingForMembers (fewer than minMember members exist), InvalidSubGroupPolicy, InvalidSubGroupMember, InvalidHoldAnnotation, WaitingForResourceClaims (a pending member's ResourceClaim from a template does not exist yet).
# TYPE hypernode_gangs_gated gauge
`
	const heldHeader = `# HELP hypernode_held_nodes [ALPHA] Nodes whose room a hold keeps for a waiting gang: pods after the gang in queue order do not take the room it needs there.
# TYPE hypernode_held_nodes gauge
`
	const devicesHeader = `# HELP hypernode_devices [ALPHA] DRA devices of the nodes' own ResourceSlices by DeviceClass and state: allocated (held by an allocated ResourceClaim) or free. A device two classes select counts in both.
# TYPE hypernode_devices gauge
`
	want := devicesHeader + `hypernode_devices{class="gpu.amd.com",state="allocated"} 0
hypernode_devices{class="gpu.amd.com",state="free"} 8
hypernode_devices{class="gpu.nvidia.com",state="allocated"} 40
hypernode_devices{class="gpu.nvidia.com",state="free"} 40
` + excludedHeader + `hypernode_excluded_hypernodes{reason="Cycle"} 0
hypernode_excluded_hypernodes{reason="InvalidMember"} 1
` + gatedHeader + `hypernode_gangs_gated{reason="PodGroupMissing"} 1
hypernode_gangs_gated{reason="WaitingForMembers"} 5
` + heldHeader + `hypernode_held_nodes 20
`
	// A collector registers once per registry: each comparison gets its own, on the same
	// sources.
	if err := testutil.CustomCollectAndCompare(&stateCollector{sources: c.sources}, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	stopFirst()
	// context.AfterFunc runs in a goroutine of its own.
	if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return c.len() == 1, nil
	}); err != nil {
		t.Fatalf("the stopped source was not dropped: %d sources", c.len())
	}
	want = devicesHeader + `hypernode_devices{class="gpu.amd.com",state="allocated"} 0
hypernode_devices{class="gpu.amd.com",state="free"} 8
hypernode_devices{class="gpu.nvidia.com",state="allocated"} 16
hypernode_devices{class="gpu.nvidia.com",state="free"} 0
` + gatedHeader + `hypernode_gangs_gated{reason="PodGroupMissing"} 0
hypernode_gangs_gated{reason="WaitingForMembers"} 3
` + heldHeader + `hypernode_held_nodes 4
`
	if err := testutil.CustomCollectAndCompare(&stateCollector{sources: c.sources}, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
