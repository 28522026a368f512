package podgroup

import (
	"encoding/json"
	"fmt"
	"maps"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
)

// Native is what a native (scheduling.k8s.io) pod group says about its placement.
type Native struct {
	Key Key
	// Annotations are the group's (a PodGroup's, or a CompositePodGroup's); our constraint
	// and sub-group annotations are read from them as from a scheduler-plugins PodGroup's.
	Annotations map[string]string
	// TopologyKey is schedulingConstraints.topology[0].key ("" for none).
	TopologyKey string
	// MinCount is the gang policy's minCount (0: the basic policy, no gang).
	MinCount int
}

// NativeGang builds the view of a native pod group from its pods: those with a node are
// placed. The job's constraint is its hypernode.dev/network-topology annotation, else a
// tier label topology key (hard at that tier), else defaultTopology; a topology key of
// another form is ForeignKey's, not a constraint of ours.
func NativeGang(n Native, pods []*v1.Pod, defaultTopology *NetworkTopology) Gang {
	topology, topologyErr := ParseNetworkTopology(n.Annotations)
	if topology == nil && topologyErr == nil && n.TopologyKey != "" {
		if tier, ok := hypernode.ParseTierLabelKey(n.TopologyKey); ok {
			topology = &NetworkTopology{Mode: ModeHard, HighestTierAllowed: &tier}
		}
	}
	policies, policyErr := ParseSubGroupPolicies(n.Annotations, topology)
	info := Info{Topology: topology, TopologyErr: topologyErr, SubGroupPolicies: policies, SubGroupErr: policyErr, MinCount: n.MinCount}
	if topology == nil && topologyErr == nil && n.TopologyKey == "" && defaultTopology != nil && policyErr == nil && !info.PlacedByTopology() {
		info.Topology, info.TopologyDefault = defaultTopology.clone(), true
	}
	return withPods(Gang{Key: n.Key, Info: info}, pods)
}

// GangOf returns the gang a pod is a member of: its PodGroup label's, or its native pod
// group's (native); two pods are in the same gang when both results are equal.
func GangOf(p *v1.Pod) (key Key, native, ok bool) {
	if key, ok := KeyOf(p); ok {
		return key, false, true
	}
	if sg := p.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
		return Key{Namespace: p.Namespace, Name: *sg.PodGroupName}, true, true
	}
	return Key{}, false, false
}

// ForeignKey returns the topology key of a native pod group that is not ours to resolve (not
// a tier label, and no constraint annotation overrides it): its domains are the nodes'
// values of that label, as upstream's TopologyPlacementGenerator reads it.
func (n Native) ForeignKey() (string, bool) {
	if n.TopologyKey == "" {
		return "", false
	}
	if _, annotated := n.Annotations[NetworkTopologyAnnotation]; annotated {
		return "", false
	}
	if _, ok := hypernode.ParseTierLabelKey(n.TopologyKey); ok {
		return "", false
	}
	return n.TopologyKey, true
}

// String names the group in messages.
func (n Native) String() string { return fmt.Sprintf("pod group %s", n.Key) }

// NativeOf reads what a native PodGroup object says about its placement.
func NativeOf(pg *schedulingv1beta1.PodGroup) Native {
	n := Native{Key: Key{Namespace: pg.Namespace, Name: pg.Name}, Annotations: pg.Annotations}
	if c := pg.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
		n.TopologyKey = c.Topology[0].Key
	}
	if g := pg.Spec.SchedulingPolicy.Gang; g != nil {
		n.MinCount = int(g.MinCount)
	}
	return n
}

// View is a native pod group in the shape of a scheduler-plugins PodGroup, for the tools that
// analyse PodGroups (kubectl hypernode explain and plan): its annotations, minCount as
// minMember, and a tier label topology key as the hard constraint annotation it means
// (NativeGang reads the same). It also reports whether the topology key is foreign: the
// scheduler then places the group by that label's values, which the view does not carry.
func (n Native) View() (view *schedulingv1alpha1.PodGroup, foreign bool) {
	view = &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: n.Key.Namespace, Name: n.Key.Name,
		Annotations: maps.Clone(n.Annotations)}}
	view.Spec.MinMember = int32(n.MinCount)
	if _, ok := n.ForeignKey(); ok {
		return view, true
	}
	if _, annotated := n.Annotations[NetworkTopologyAnnotation]; !annotated && n.TopologyKey != "" {
		tier, _ := hypernode.ParseTierLabelKey(n.TopologyKey)
		raw, _ := json.Marshal(NetworkTopology{Mode: ModeHard, HighestTierAllowed: &tier})
		if view.Annotations == nil {
			view.Annotations = map[string]string{}
		}
		view.Annotations[NetworkTopologyAnnotation] = string(raw)
	}
	return view, false
}
