package gang

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// BenchmarkNodeFingerprints: what a held scout's cycle pays for the nodes' fingerprint at
// 10,000 nodes of 16 labels and a taint: every node hashed (the first cycle, or
// podgroup.NodeFingerprint for all), and unchanged nodes looked up (the cycles after).
func BenchmarkNodeFingerprints(b *testing.B) {
	nodes := make([]*v1.Node, 10000)
	for i := range nodes {
		w := st.MakeNode().Name(fmt.Sprintf("r%03d-n%02d", i/32, i%32)).
			Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "96", v1.ResourceMemory: "1Ti", "nvidia.com/gpu": "8", v1.ResourcePods: "110"})
		for l := range 16 {
			w = w.Label(fmt.Sprintf("example.com/label-%02d", l), fmt.Sprintf("value-%d", i%(l+2)))
		}
		nodes[i] = w.Taints([]v1.Taint{{Key: "nvidia.com/gpu", Effect: v1.TaintEffectNoSchedule}}).Obj()
	}
	infos, err := internalcache.NewSnapshot(nil, nodes).NodeInfos().List()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("hash every node", func(b *testing.B) {
		for b.Loop() {
			var sum uint64
			for _, n := range nodes {
				sum += podgroup.NodeFingerprint(n)
			}
		}
	})
	b.Run("unchanged nodes", func(b *testing.B) {
		var f nodeFingerprints
		f.sum(infos)
		for b.Loop() {
			f.sum([]fwk.NodeInfo(infos))
		}
	})
}
