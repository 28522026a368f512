package hypernode

import (
	"fmt"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

// Benchmark topology: 10,000 nodes in 320 leaves of 32 nodes (the last leaf holds 16), 20
// tier-2 HyperNodes of 16 leaves, one tier-3 root: the scale of the use case.
const (
	benchNodes        = 10000
	benchNodesPerLeaf = 32
	benchLeavesPerTor = 16
)

// benchNodeName names nodes after their rack, as datacenters do: r012-n05.
func benchNodeName(i int) string {
	return fmt.Sprintf("r%03d-n%02d", i/benchNodesPerLeaf, i%benchNodesPerLeaf)
}

func benchLeafCount() int { return (benchNodes + benchNodesPerLeaf - 1) / benchNodesPerLeaf }

// benchWorld returns the nodes and HyperNodes of the benchmark tree. Leaves select their
// nodes by exactMatch members ("exact"), one anchored regular expression per rack ("regex"),
// the same without ^ ("regex-unanchored"), or a rack label ("label").
func benchWorld(selector string) (map[string]labels.Set, []*topologyv1alpha1.HyperNode) {
	nodesByName := make(map[string]labels.Set, benchNodes)
	for i := range benchNodes {
		nodesByName[benchNodeName(i)] = labels.Set{"example.com/rack": fmt.Sprintf("leaf-%d", i/benchNodesPerLeaf)}
	}
	var hns []*topologyv1alpha1.HyperNode
	leaves := benchLeafCount()
	for l := range leaves {
		var members []topologyv1alpha1.MemberSpec
		switch selector {
		case "regex":
			members = append(members, hntesting.RegexNodeMember(fmt.Sprintf("^r%03d-n[0-9]+$", l)))
		case "regex-unanchored":
			// Volcano's regexMatch is unanchored; many users write patterns without ^.
			members = append(members, hntesting.RegexNodeMember(fmt.Sprintf("r%03d-n[0-9]+$", l)))
		case "label":
			members = append(members, hntesting.LabelNodeMember(map[string]string{"example.com/rack": fmt.Sprintf("leaf-%d", l)}))
		default:
			for i := l * benchNodesPerLeaf; i < min((l+1)*benchNodesPerLeaf, benchNodes); i++ {
				members = append(members, hntesting.NodeMember(benchNodeName(i)))
			}
		}
		hns = append(hns, hntesting.MakeHyperNode(fmt.Sprintf("leaf-%d", l)).Tier(1).TierName("leaf").Members(members...).Obj())
	}
	tors := (leaves + benchLeavesPerTor - 1) / benchLeavesPerTor
	var torMembers []topologyv1alpha1.MemberSpec
	for tIdx := range tors {
		var members []topologyv1alpha1.MemberSpec
		for l := tIdx * benchLeavesPerTor; l < min((tIdx+1)*benchLeavesPerTor, leaves); l++ {
			members = append(members, hntesting.ChildMember(fmt.Sprintf("leaf-%d", l)))
		}
		name := fmt.Sprintf("spine-%d", tIdx)
		hns = append(hns, hntesting.MakeHyperNode(name).Tier(2).TierName("spine").Members(members...).Obj())
		torMembers = append(torMembers, hntesting.ChildMember(name))
	}
	hns = append(hns, hntesting.MakeHyperNode("core").Tier(3).TierName("core").Members(torMembers...).Obj())
	return nodesByName, hns
}

var benchSelectors = []string{"exact", "regex", "regex-unanchored", "label"}

func BenchmarkBuild(b *testing.B) {
	for _, selector := range benchSelectors {
		b.Run(selector, func(b *testing.B) {
			nodesByName, hns := benchWorld(selector)
			b.ReportAllocs()
			for b.Loop() {
				Build(nodesByName, hns)
			}
		})
	}
}

func BenchmarkNodeLabelChange(b *testing.B) {
	for _, selector := range benchSelectors {
		b.Run(selector, func(b *testing.B) {
			nodesByName, hns := benchWorld(selector)
			tree := Build(nodesByName, hns)
			// Move a node between two racks and back: two leaves change each time.
			name := benchNodeName(100)
			a := labels.Set{"example.com/rack": "leaf-3"}
			c := labels.Set{"example.com/rack": "leaf-4"}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%2 == 0 {
					tree.SetNode(name, c)
				} else {
					tree.SetNode(name, a)
				}
				i++
			}
		})
	}
}

func BenchmarkNodeAddDelete(b *testing.B) {
	for _, selector := range benchSelectors {
		b.Run(selector, func(b *testing.B) {
			nodesByName, hns := benchWorld(selector)
			tree := Build(nodesByName, hns)
			name := benchNodeName(5000)
			l := nodesByName[name]
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%2 == 0 {
					tree.DeleteNode(name)
				} else {
					tree.SetNode(name, l)
				}
				i++
			}
		})
	}
}

func BenchmarkHyperNodeUpdate(b *testing.B) {
	for _, selector := range benchSelectors {
		b.Run(selector+"/leaf", func(b *testing.B) {
			nodesByName, hns := benchWorld(selector)
			tree := Build(nodesByName, hns)
			leaf := hns[7]
			other := leaf.DeepCopy()
			other.Spec.TierName = "rack"
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%2 == 0 {
					tree.SetHyperNode(other)
				} else {
					tree.SetHyperNode(leaf)
				}
				i++
			}
		})
	}
	b.Run("exact/core", func(b *testing.B) {
		nodesByName, hns := benchWorld("exact")
		tree := Build(nodesByName, hns)
		core := hns[len(hns)-1]
		renamed := core.DeepCopy()
		renamed.Spec.TierName = "datacenter"
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if i%2 == 0 {
				tree.SetHyperNode(renamed)
			} else {
				tree.SetHyperNode(core)
			}
			i++
		}
	})
	b.Run("exact/spine", func(b *testing.B) {
		nodesByName, hns := benchWorld("exact")
		tree := Build(nodesByName, hns)
		var spine *topologyv1alpha1.HyperNode
		for _, h := range hns {
			if h.Name == "spine-3" {
				spine = h
			}
		}
		// Drop the spine's last leaf and add it back.
		smaller := spine.DeepCopy()
		smaller.Spec.Members = smaller.Spec.Members[:len(smaller.Spec.Members)-1]
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if i%2 == 0 {
				tree.SetHyperNode(smaller)
			} else {
				tree.SetHyperNode(spine)
			}
			i++
		}
	})
}

func BenchmarkReads(b *testing.B) {
	nodesByName, hns := benchWorld("exact")
	tree := Build(nodesByName, hns)
	cache := NewCache(testLogger(b), nil)
	cache.tree = tree
	cache.current.Store(tree.Snapshot())
	b.Run("snapshot", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = cache.Snapshot()
		}
	})
	s := tree.Snapshot()
	b.Run("leafOf", func(b *testing.B) {
		name := benchNodeName(4321)
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := s.LeafOf(name); !ok {
				b.Fatal("no leaf")
			}
		}
	})
	b.Run("lca-with-root", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := s.LCA("leaf-3", VirtualRootName); !ok {
				b.Fatal("no lca")
			}
		}
	})
	b.Run("lca", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := s.LCA("leaf-3", "leaf-300"); !ok {
				b.Fatal("no lca")
			}
		}
	})
}

// BenchmarkRetainedMemory reports the heap a built tree keeps alive (its indexes and the
// published snapshot), measured after a forced garbage collection.
func BenchmarkRetainedMemory(b *testing.B) {
	for _, selector := range benchSelectors {
		b.Run(selector, func(b *testing.B) {
			nodesByName, hns := benchWorld(selector)
			var retained uint64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				tree := Build(nodesByName, hns)
				runtime.GC()
				runtime.ReadMemStats(&after)
				retained = after.HeapAlloc - before.HeapAlloc
				runtime.KeepAlive(tree)
			}
			b.ReportMetric(float64(retained)/(1<<20), "retained-MiB")
		})
	}
}
