package integration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

func TestHyperNodeCRDValidation(t *testing.T) {
	ctx := context.Background()
	c := newClients(t)
	node := hntesting.NodeMember
	tests := []struct {
		name      string
		hyperNode *topologyv1alpha1.HyperNode
		// wantErrs are substrings of the apiserver's error that name the field and the rule.
		wantErrs []string
	}{
		{
			// Optional, as in Volcano's API (an empty list is omitted by the client).
			name:      "valid: no members",
			hyperNode: &topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: "empty-members"}, Spec: topologyv1alpha1.HyperNodeSpec{Tier: 1, Members: []topologyv1alpha1.MemberSpec{}}},
		},
		{
			name:      "tierName longer than 253 characters",
			hyperNode: hntesting.MakeHyperNode("long-tier-name").Tier(1).TierName(strings.Repeat("t", 254)).Members(node("node-0")).Obj(),
			wantErrs:  []string{`spec.tierName: Too long: may not be more than 253 bytes`},
		},
		{
			name: "selector with no match",
			hyperNode: hntesting.MakeHyperNode("no-selector").Tier(1).Members(topologyv1alpha1.MemberSpec{
				Type: topologyv1alpha1.MemberTypeNode,
			}).Obj(),
			wantErrs: []string{`spec.members[0].selector: Invalid value: exactly one of exactMatch, regexMatch or labelMatch must be set`},
		},
		{
			name: "selector with two matches",
			hyperNode: hntesting.MakeHyperNode("two-selectors").Tier(1).Members(topologyv1alpha1.MemberSpec{
				Type: topologyv1alpha1.MemberTypeNode,
				Selector: topologyv1alpha1.MemberSelector{
					ExactMatch: &topologyv1alpha1.ExactMatch{Name: "node-0"},
					RegexMatch: &topologyv1alpha1.RegexMatch{Pattern: "^node-"},
				},
			}).Obj(),
			wantErrs: []string{`spec.members[0].selector: Invalid value: exactly one of exactMatch, regexMatch or labelMatch must be set`},
		},
		{
			name:      "empty exactMatch name",
			hyperNode: hntesting.MakeHyperNode("empty-name").Tier(1).Members(node("")).Obj(),
			wantErrs:  []string{`spec.members[0].selector.exactMatch.name: Invalid value: "": spec.members[0].selector.exactMatch.name in body should be at least 1 chars long`},
		},
		{
			name:      "exactMatch name is not a DNS subdomain",
			hyperNode: hntesting.MakeHyperNode("bad-name").Tier(1).Members(node("node-0")).Members(node("Node_1")).Obj(),
			wantErrs:  []string{`spec.members[1].selector.exactMatch.name: Invalid value: "Node_1": spec.members[1].selector.exactMatch.name in body should match`},
		},
		{
			name: "empty regex pattern",
			hyperNode: hntesting.MakeHyperNode("empty-regex").Tier(1).Members(topologyv1alpha1.MemberSpec{
				Type:     topologyv1alpha1.MemberTypeNode,
				Selector: topologyv1alpha1.MemberSelector{RegexMatch: &topologyv1alpha1.RegexMatch{}},
			}).Obj(),
			wantErrs: []string{`spec.members[0].selector.regexMatch.pattern: Invalid value: "": spec.members[0].selector.regexMatch.pattern in body should be at least 1 chars long`},
		},
		{
			name: "regexMatch on a HyperNode member",
			hyperNode: hntesting.MakeHyperNode("regex-hypernode").Tier(2).Members(topologyv1alpha1.MemberSpec{
				Type:     topologyv1alpha1.MemberTypeHyperNode,
				Selector: topologyv1alpha1.MemberSelector{RegexMatch: &topologyv1alpha1.RegexMatch{Pattern: "^s"}},
			}).Obj(),
			wantErrs: []string{`spec.members[0]: Invalid value: a member of type HyperNode must select its HyperNode by exactMatch; regexMatch and labelMatch are only allowed for members of type Node`},
		},
		{
			name: "labelMatch on a HyperNode member",
			hyperNode: hntesting.MakeHyperNode("label-hypernode").Tier(2).Members(topologyv1alpha1.MemberSpec{
				Type: topologyv1alpha1.MemberTypeHyperNode,
				Selector: topologyv1alpha1.MemberSelector{LabelMatch: &metav1.LabelSelector{
					MatchLabels: map[string]string{"rack": "r1"},
				}},
			}).Obj(),
			wantErrs: []string{`spec.members[0]: Invalid value: a member of type HyperNode must select its HyperNode by exactMatch; regexMatch and labelMatch are only allowed for members of type Node`},
		},
		{
			name:      "negative tier",
			hyperNode: hntesting.MakeHyperNode("negative-tier").Tier(-1).Members(node("node-0")).Obj(),
			wantErrs:  []string{`spec.tier: Invalid value: -1: spec.tier in body should be greater than or equal to 0`},
		},
		{
			name: "unknown member type",
			hyperNode: hntesting.MakeHyperNode("bad-type").Tier(1).Members(topologyv1alpha1.MemberSpec{
				Type:     "Rack",
				Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: "r1"}},
			}).Obj(),
			wantErrs: []string{`spec.members[0].type: Unsupported value: "Rack": supported values: "Node", "HyperNode"`},
		},
		{
			name:      "valid: each selector kind on a Node member, exactMatch on a HyperNode member",
			hyperNode: hntesting.MakeHyperNode("valid").Tier(1).Members(node("node-0")).Members(topologyv1alpha1.MemberSpec{Type: topologyv1alpha1.MemberTypeNode, Selector: topologyv1alpha1.MemberSelector{RegexMatch: &topologyv1alpha1.RegexMatch{Pattern: "^gpu-[0-9]+$"}}}).Members(topologyv1alpha1.MemberSpec{Type: topologyv1alpha1.MemberTypeNode, Selector: topologyv1alpha1.MemberSelector{LabelMatch: &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "r1"}}}}).Obj(),
		},
		{
			name:      "valid: tier 0",
			hyperNode: hntesting.MakeHyperNode("tier-zero").Members(node("node-0")).Obj(),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			created, err := c.topology.TopologyV1alpha1().HyperNodes().Create(ctx, tc.hyperNode, metav1.CreateOptions{})
			if err == nil {
				t.Cleanup(func() {
					_ = c.topology.TopologyV1alpha1().HyperNodes().Delete(ctx, created.Name, metav1.DeleteOptions{})
				})
			}
			if len(tc.wantErrs) == 0 {
				if err != nil {
					t.Fatalf("valid HyperNode rejected: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("invalid HyperNode accepted: %+v", created.Spec)
			}
			for _, want := range tc.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not contain %q:\n%v", want, err)
				}
			}
		})
	}
}

// TestHyperNodeCRDRejectsAnEmptyMembersList: members may be left out, but a list given must
// hold one, as in Volcano's CRD. The typed client omits an empty list, so the body is raw.
func TestHyperNodeCRDRejectsAnEmptyMembersList(t *testing.T) {
	c := newClients(t)
	body := []byte(`{"apiVersion":"topology.volcano.sh/v1alpha1","kind":"HyperNode","metadata":{"name":"empty-list"},"spec":{"tier":1,"members":[]}}`)
	err := c.topology.TopologyV1alpha1().RESTClient().Post().Resource("hypernodes").Body(body).Do(context.Background()).Error()
	want := `spec.members: Invalid value: 0: spec.members in body should have at least 1 items`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("creating a HyperNode with members: []: %v, want an error containing %q", err, want)
	}
}

func TestSeedHyperNodesAccepted(t *testing.T) {
	ctx := context.Background()
	c := newClients(t)
	hyperNodes, err := util.ReadHyperNodes(filepath.Join(util.RepoRoot(), "manifests", "examples", "seed-001-hypernodes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, hn := range hyperNodes {
		created, err := c.topology.TopologyV1alpha1().HyperNodes().Create(ctx, hn, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("seed HyperNode %s rejected: %v", hn.Name, err)
		}
		names = append(names, created.Name)
		t.Cleanup(func() {
			_ = c.topology.TopologyV1alpha1().HyperNodes().Delete(ctx, created.Name, metav1.DeleteOptions{})
		})
	}
	if diff := cmp.Diff([]string{"s0", "s1", "s2", "s3", "s4", "s5", "s6"}, names); diff != "" {
		t.Errorf("unexpected seed HyperNodes (-want,+got):\n%s", diff)
	}
	s6, err := c.topology.TopologyV1alpha1().HyperNodes().Get(ctx, "s6", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := topologyv1alpha1.HyperNodeSpec{Tier: 3, Members: []topologyv1alpha1.MemberSpec{hntesting.ChildMember("s4"), hntesting.ChildMember("s5")}}
	if diff := cmp.Diff(want, s6.Spec); diff != "" {
		t.Errorf("s6 round trip (-want,+got):\n%s", diff)
	}
}
