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
)

func hn(name string, tier int, tierName string, members ...topologyv1alpha1.MemberSpec) *topologyv1alpha1.HyperNode {
	return &topologyv1alpha1.HyperNode{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       topologyv1alpha1.HyperNodeSpec{Tier: tier, TierName: tierName, Members: members},
	}
}

func exact(name string) topologyv1alpha1.MemberSpec {
	return topologyv1alpha1.MemberSpec{Type: topologyv1alpha1.MemberTypeNode,
		Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: name}}}
}

func regex(pattern string) topologyv1alpha1.MemberSpec {
	return topologyv1alpha1.MemberSpec{Type: topologyv1alpha1.MemberTypeNode,
		Selector: topologyv1alpha1.MemberSelector{RegexMatch: &topologyv1alpha1.RegexMatch{Pattern: pattern}}}
}

func labelled(l map[string]string) topologyv1alpha1.MemberSpec {
	return topologyv1alpha1.MemberSpec{Type: topologyv1alpha1.MemberTypeNode,
		Selector: topologyv1alpha1.MemberSelector{LabelMatch: &metav1.LabelSelector{MatchLabels: l}}}
}

func child(name string) topologyv1alpha1.MemberSpec {
	return topologyv1alpha1.MemberSpec{Type: topologyv1alpha1.MemberTypeHyperNode,
		Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: name}}}
}

// nodes returns count unlabelled nodes named prefix-0 .. prefix-(count-1).
func nodes(prefix string, count int) map[string]labels.Set {
	out := map[string]labels.Set{}
	for i := range count {
		out[fmt.Sprintf("%s-%d", prefix, i)] = labels.Set{}
	}
	return out
}

// seed001 is the s0..s6 example of seed 001: four leaves of two nodes, two spines, one core.
func seed001() []*topologyv1alpha1.HyperNode {
	return []*topologyv1alpha1.HyperNode{
		hn("s0", 1, "", exact("node-0"), exact("node-1")),
		hn("s1", 1, "", exact("node-2"), exact("node-3")),
		hn("s2", 1, "", exact("node-4"), exact("node-5")),
		hn("s3", 1, "", exact("node-6"), exact("node-7")),
		hn("s4", 2, "", child("s0"), child("s1")),
		hn("s5", 2, "", child("s2"), child("s3")),
		hn("s6", 3, "", child("s4"), child("s5")),
	}
}

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
