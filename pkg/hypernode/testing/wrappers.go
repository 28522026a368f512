// Package testing builds HyperNodes for tests, in the style of kube-scheduler's
// st.MakePod(): MakeHyperNode("s0").Tier(1).Nodes("node-0", "node-1").Obj().
package testing

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
)

// HyperNodeWrapper wraps a HyperNode under construction.
type HyperNodeWrapper struct{ topologyv1alpha1.HyperNode }

// MakeHyperNode starts a HyperNode with the given name, tier 0 and no members.
func MakeHyperNode(name string) *HyperNodeWrapper {
	return &HyperNodeWrapper{topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}

// Obj returns the HyperNode.
func (w *HyperNodeWrapper) Obj() *topologyv1alpha1.HyperNode { return &w.HyperNode }

// Tier sets spec.tier.
func (w *HyperNodeWrapper) Tier(tier int) *HyperNodeWrapper {
	w.Spec.Tier = tier
	return w
}

// TierName sets spec.tierName.
func (w *HyperNodeWrapper) TierName(name string) *HyperNodeWrapper {
	w.Spec.TierName = name
	return w
}

// Label sets a label.
func (w *HyperNodeWrapper) Label(key, value string) *HyperNodeWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[key] = value
	return w
}

// Nodes adds one exactMatch Node member per name.
func (w *HyperNodeWrapper) Nodes(names ...string) *HyperNodeWrapper {
	for _, n := range names {
		w.Spec.Members = append(w.Spec.Members, NodeMember(n))
	}
	return w
}

// NodeRegex adds a regexMatch Node member.
func (w *HyperNodeWrapper) NodeRegex(pattern string) *HyperNodeWrapper {
	return w.Members(RegexNodeMember(pattern))
}

// NodeLabels adds a labelMatch Node member with matchLabels.
func (w *HyperNodeWrapper) NodeLabels(matchLabels map[string]string) *HyperNodeWrapper {
	return w.Members(LabelNodeMember(matchLabels))
}

// Children adds one exactMatch HyperNode member per name.
func (w *HyperNodeWrapper) Children(names ...string) *HyperNodeWrapper {
	for _, n := range names {
		w.Spec.Members = append(w.Spec.Members, ChildMember(n))
	}
	return w
}

// Members adds members as given (for members the other methods do not build).
func (w *HyperNodeWrapper) Members(members ...topologyv1alpha1.MemberSpec) *HyperNodeWrapper {
	w.Spec.Members = append(w.Spec.Members, members...)
	return w
}

// NodeMember selects one node by name.
func NodeMember(name string) topologyv1alpha1.MemberSpec {
	return topologyv1alpha1.MemberSpec{Type: topologyv1alpha1.MemberTypeNode,
		Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: name}}}
}

// RegexNodeMember selects the nodes whose name matches pattern.
func RegexNodeMember(pattern string) topologyv1alpha1.MemberSpec {
	return topologyv1alpha1.MemberSpec{Type: topologyv1alpha1.MemberTypeNode,
		Selector: topologyv1alpha1.MemberSelector{RegexMatch: &topologyv1alpha1.RegexMatch{Pattern: pattern}}}
}

// LabelNodeMember selects the nodes with the given labels.
func LabelNodeMember(matchLabels map[string]string) topologyv1alpha1.MemberSpec {
	return topologyv1alpha1.MemberSpec{Type: topologyv1alpha1.MemberTypeNode,
		Selector: topologyv1alpha1.MemberSelector{LabelMatch: &metav1.LabelSelector{MatchLabels: matchLabels}}}
}

// ChildMember names a child HyperNode.
func ChildMember(name string) topologyv1alpha1.MemberSpec {
	return topologyv1alpha1.MemberSpec{Type: topologyv1alpha1.MemberTypeHyperNode,
		Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: name}}}
}

// Seed001 is the s0..s6 tree of the seed 001 example: leaves s0..s3 (tier 1) of two nodes
// each (node-0..node-7), spines s4 and s5 (tier 2), core s6 (tier 3).
func Seed001() []*topologyv1alpha1.HyperNode {
	return []*topologyv1alpha1.HyperNode{
		MakeHyperNode("s0").Tier(1).Nodes("node-0", "node-1").Obj(),
		MakeHyperNode("s1").Tier(1).Nodes("node-2", "node-3").Obj(),
		MakeHyperNode("s2").Tier(1).Nodes("node-4", "node-5").Obj(),
		MakeHyperNode("s3").Tier(1).Nodes("node-6", "node-7").Obj(),
		MakeHyperNode("s4").Tier(2).Children("s0", "s1").Obj(),
		MakeHyperNode("s5").Tier(2).Children("s2", "s3").Obj(),
		MakeHyperNode("s6").Tier(3).Children("s4", "s5").Obj(),
	}
}
