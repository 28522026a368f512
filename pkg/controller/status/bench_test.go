package status

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/workqueue"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

// benchTree is a 10,000-node fabric as the label source builds it: 313 leaves of 32 nodes
// selected by label, 20 spines of 16 leaves, 4 cores of 5 spines.
func benchTree() ([]*v1.Node, []*topologyv1alpha1.HyperNode) {
	const n = 10000
	var nodes []*v1.Node
	for i := range n {
		nodes = append(nodes, st.MakeNode().Name(fmt.Sprintf("gpu-%05d", i)).Label("leaf", fmt.Sprint(i/32)).Obj())
	}
	var hns []*topologyv1alpha1.HyperNode
	leaves := (n + 31) / 32
	spineOf := map[int][]string{}
	for l := range leaves {
		name := fmt.Sprintf("leaf-%d", l)
		hns = append(hns, hntesting.MakeHyperNode(name).Tier(1).NodeLabels(map[string]string{"leaf": fmt.Sprint(l)}).Obj())
		spineOf[l/16] = append(spineOf[l/16], name)
	}
	coreOf := map[int][]string{}
	for s := 0; s < len(spineOf); s++ {
		name := fmt.Sprintf("spine-%d", s)
		hns = append(hns, hntesting.MakeHyperNode(name).Tier(2).Children(spineOf[s]...).Obj())
		coreOf[s/5] = append(coreOf[s/5], name)
	}
	for c := 0; c < len(coreOf); c++ {
		hns = append(hns, hntesting.MakeHyperNode(fmt.Sprintf("core-%d", c)).Tier(3).Children(coreOf[c]...).Obj())
	}
	return nodes, hns
}

func benchController() *Controller {
	return &Controller{
		queue:       workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		delay:       time.Hour,
		tree:        hypernode.NewTree(),
		generations: map[string]int64{},
		dirty:       sets.New[string](),
		written:     map[string]writeRecord{},
	}
}

// BenchmarkStatus10kTree is the status of a 10,000-node tree (337 HyperNodes) from nothing:
// every HyperNode and node event fed to the controller's tree (with the changed-HyperNode
// bookkeeping), then the status of every HyperNode computed. That is the controller's work
// after a start, without the API writes (one per HyperNode).
func BenchmarkStatus10kTree(b *testing.B) {
	nodes, hns := benchTree()
	b.ReportAllocs()
	var dirty int
	for b.Loop() {
		c := benchController()
		for _, hn := range hns {
			c.OnHyperNode(nil, hn)
		}
		for _, n := range nodes {
			c.OnNode(nil, n)
		}
		snap := c.tree.Snapshot()
		snap.RangeHyperNodes(func(info *hypernode.HyperNodeInfo) bool {
			Desired(info, 1)
			return true
		})
		dirty = c.dirty.Len()
		c.queue.ShutDown()
	}
	b.ReportMetric(float64(dirty), "writes")
}

// BenchmarkNodeJoins is one node joining a running 10,000-node tree: the tree's update and
// marking the HyperNodes whose status changes (its leaf, spine and core).
func BenchmarkNodeJoins(b *testing.B) {
	nodes, hns := benchTree()
	c := benchController()
	defer c.queue.ShutDown()
	for _, hn := range hns {
		c.OnHyperNode(nil, hn)
	}
	for _, n := range nodes {
		c.OnNode(nil, n)
	}
	joining := st.MakeNode().Name("joining").Label("leaf", "7").Obj()
	b.ReportAllocs()
	for b.Loop() {
		c.OnNode(nil, joining)
		c.OnNode(joining, nil)
	}
}
