package hypernode

import (
	"fmt"
	"sort"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

// nodes returns count unlabelled nodes named prefix-0 .. prefix-(count-1).
func nodes(prefix string, count int) map[string]labels.Set {
	out := map[string]labels.Set{}
	for i := range count {
		out[fmt.Sprintf("%s-%d", prefix, i)] = labels.Set{}
	}
	return out
}

// seed001 is the s0..s6 example of seed 001: four leaves of two nodes, two spines, one core.
func seed001() []*topologyv1alpha1.HyperNode { return hntesting.Seed001() }

// view is a canonical, comparable rendering of a snapshot.
type view struct {
	HyperNodes   map[string]HyperNodeInfo
	NodeLeaf     map[string]string
	Candidates   map[int][]string
	Tiers        []int
	TierNames    map[string][]int
	RootChildren []string
	RootTier     int
	NodeCount    int
}

func viewOf(s *Snapshot) view {
	v := view{
		HyperNodes:   map[string]HyperNodeInfo{},
		NodeLeaf:     map[string]string{},
		Candidates:   map[int][]string{},
		Tiers:        append([]int{}, s.Tiers()...),
		TierNames:    map[string][]int{},
		RootChildren: append([]string{}, s.Root().Children...),
		RootTier:     s.RootTier(),
		NodeCount:    s.NodeCount(),
	}
	s.RangeHyperNodes(func(i *HyperNodeInfo) bool {
		v.HyperNodes[i.Name] = *i
		return true
	})
	s.nodeLeaf.Range(func(n, l string) bool {
		v.NodeLeaf[n] = l
		return true
	})
	for tier, names := range s.candidates {
		v.Candidates[tier] = names
	}
	for name, tiers := range s.tierNames {
		v.TierNames[name] = tiers
	}
	sort.Ints(v.Tiers)
	return v
}

func metav1LabelRequirement(key, value string) metav1.LabelSelectorRequirement {
	return metav1.LabelSelectorRequirement{Key: key, Operator: metav1.LabelSelectorOpIn, Values: []string{value}}
}

func testLogger(tb testing.TB) klog.Logger { return ktesting.NewLogger(tb, ktesting.NewConfig()) }
