package label

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
)

// FabricNodes returns n nodes with topograph labels: 32 nodes per leaf, 16 leaves per spine,
// 5 spines per core (10,000 nodes: 313 leaves, 20 spines, 4 cores).
func fabricNodes(n int) []*v1.Node {
	nodes := make([]*v1.Node, 0, n)
	for i := range n {
		leaf, spine := i/32, i/(32*16)
		nodes = append(nodes, st.MakeNode().Name(fmt.Sprintf("gpu-%05d", i)).
			Label("fabric.topograph.run/tier-2", fmt.Sprintf("core-%d", spine/5)).
			Label("fabric.topograph.run/tier-1", fmt.Sprintf("spine-%d", spine)).
			Label("fabric.topograph.run/tier-0", fmt.Sprintf("leaf-%d", leaf)).Obj())
	}
	return nodes
}

// BenchmarkDiscover10kNodes: one discovery of the topograph preset over 10,000 labelled nodes
// (what the label source does per debounced batch of node changes).
func BenchmarkDiscover10kNodes(b *testing.B) {
	nodes := fabricNodes(10000)
	levels, _ := Preset("topograph")
	s := &Source{types: []Type{{Name: "topograph", Prefix: "topograph", Levels: levels}}, nodes: fakeNodes(nodes)}
	b.ReportAllocs()
	var res *source.Result
	for b.Loop() {
		var err error
		if res, err = s.Discover(context.Background(), false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(res.HyperNodes)), "hypernodes")
}
