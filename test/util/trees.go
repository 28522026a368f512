package util

import (
	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
)

// Seed004Tree is example 1 of seed 004 as HyperNodes: three spines over five blocks of
// node-0..node-11.
func Seed004Tree() []*topologyv1alpha1.HyperNode {
	block := func(name string, nodes ...string) *topologyv1alpha1.HyperNode {
		var members []topologyv1alpha1.MemberSpec
		for _, n := range nodes {
			members = append(members, hntesting.NodeMember(n))
		}
		return hntesting.MakeHyperNode(name).Tier(1).Members(members...).Obj()
	}
	return []*topologyv1alpha1.HyperNode{
		block("block-0", "node-0", "node-1", "node-2"),
		block("block-1", "node-3", "node-4"),
		block("block-2", "node-5", "node-6"),
		block("block-3", "node-7", "node-8"),
		block("block-4", "node-9", "node-10", "node-11"),
		hntesting.MakeHyperNode("spine-0").Tier(2).Children("block-0", "block-1").Obj(),
		hntesting.MakeHyperNode("spine-1").Tier(2).Children("block-2", "block-3").Obj(),
		hntesting.MakeHyperNode("spine-2").Tier(2).Children("block-4").Obj(),
	}
}
