package hypernode

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

func withUID(h *topologyv1alpha1.HyperNode) *topologyv1alpha1.HyperNode {
	h.UID = types.UID("uid-" + h.Name)
	return h
}

func drain(ch chan string) []string {
	var out []string
	for {
		select {
		case e := <-ch:
			out = append(out, e)
		default:
			return out
		}
	}
}

// TestCacheEvents checks the Events the cache records: the excluding problem names the
// reason and makes it a Warning, informational problems are Normal, a fix is reported as
// TopologyValid, and nothing is recorded during the initial sync except, at its end, the
// problems that remain.
func TestCacheEvents(t *testing.T) {
	recorder := &events.FakeRecorder{Events: make(chan string, 100)}
	c := NewCache(testLogger(t), recorder)
	for _, name := range []string{"node-0", "node-1", "node-2", "node-3"} {
		c.SetNode(st.MakeNode().Name(name).Obj())
	}

	// During the initial lists a parent can arrive before its children: no Event.
	c.quiet = true
	c.SetHyperNode(withUID(hntesting.MakeHyperNode("spine").Tier(2).Children("s0", "s1").Obj()))
	c.SetHyperNode(withUID(hntesting.MakeHyperNode("s0").Tier(1).Nodes("node-0", "node-1").Obj()))
	c.SetHyperNode(withUID(hntesting.MakeHyperNode("s1").Tier(1).Nodes("node-2", "node-3").Obj()))
	// A real problem present at the end of the sync is reported then.
	c.SetHyperNode(withUID(hntesting.MakeHyperNode("broken").Tier(1).NodeRegex("([").Obj()))
	if got := drain(recorder.Events); len(got) != 0 {
		t.Fatalf("Events during the initial sync: %v", got)
	}
	c.endQuiet()
	want := []string{
		"Warning InvalidMember HyperNode broken: member 0: regexMatch pattern \"([\" does not compile: error parsing regexp: missing closing ]: `[`; it and everything below it are excluded from topology placement",
	}
	if diff := cmp.Diff(want, drain(recorder.Events)); diff != "" {
		t.Errorf("Events at the end of the sync (-want,+got):\n%s", diff)
	}

	// A parent tier that is too low: the parent gets a Warning named after the excluding
	// problem (not the alphabetically first one), the children a Normal one.
	c.SetHyperNode(withUID(hntesting.MakeHyperNode("spine").Tier(1).Children("s0", "s1", "s9").Obj()))
	got := drain(recorder.Events)
	want = []string{
		"Normal TierOrder HyperNode s0: its parent spine has tier 1, not greater than its own tier 1; spine and everything below it are excluded",
		"Normal TierOrder HyperNode s1: its parent spine has tier 1, not greater than its own tier 1; spine and everything below it are excluded",
		"Warning TierOrder HyperNode spine: member HyperNode(s) s9 do not exist; placement uses the members that exist; its tier 1 is not greater than the tier 1 of its member s0; it and everything below it are excluded from topology placement; its tier 1 is not greater than the tier 1 of its member s1; it and everything below it are excluded from topology placement",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Events of a tier-order problem (-want,+got):\n%s", diff)
	}

	c.SetHyperNode(withUID(hntesting.MakeHyperNode("spine").Tier(2).Children("s0", "s1").Obj()))
	want = []string{
		"Normal TopologyValid HyperNode s0: its topology problems are resolved; placement uses it again",
		"Normal TopologyValid HyperNode s1: its topology problems are resolved; placement uses it again",
		"Normal TopologyValid HyperNode spine: its topology problems are resolved; placement uses it again",
	}
	if diff := cmp.Diff(want, drain(recorder.Events)); diff != "" {
		t.Errorf("Events of the fix (-want,+got):\n%s", diff)
	}
	if got := c.Snapshot().Candidates(1); !cmp.Equal(got, []string{"s0", "s1"}) {
		t.Errorf("tier 1 candidates after the fix = %v", got)
	}
}

// TestListenersNeverGoBack: the node and HyperNode informers change the tree concurrently, so
// a change's delivery may come after a later change's; the listeners then do not get the
// older snapshot.
func TestListenersNeverGoBack(t *testing.T) {
	c := NewCache(klog.Background(), nil)
	var got []uint64
	c.OnChange(func(s *Snapshot) { got = append(got, s.Generation()) })
	c.SetNode(st.MakeNode().Name("node-0").Obj())
	older := c.Snapshot()
	c.SetNode(st.MakeNode().Name("node-1").Obj())
	newer := c.Snapshot()
	// The older change's delivery, late.
	c.deliver(older, c.listeners)
	if diff := cmp.Diff([]uint64{older.Generation(), newer.Generation()}, got); diff != "" {
		t.Errorf("generations delivered (-want,+got):\n%s", diff)
	}
}
