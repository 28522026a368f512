package gangpreemption

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// recountScope says which nodes of a domain may count the members differently once a victim
// unit is given back: the unit's own nodes, and, through a required anti-affinity (the
// members' or the unit's pods'), the nodes sharing that term's topology value with one of
// them. InterPodAffinity counts anti-affinity per topology value, so no other node's answer
// moves; with the usual hostname key that is the unit's nodes alone. The members' required
// affinity or DoNotSchedule spread make every node's answer depend on the whole cluster (the
// "first pod of its kind" rule, the global minimum of a spread): every node.
type recountScope struct {
	all bool
	// memberKeys are the topology keys of the members' required anti-affinity terms.
	memberKeys []string
	clones     map[string]fwk.NodeInfo
	// byValue groups the domain's nodes by topology key and value, built for a key when first
	// needed.
	byValue map[string]map[string][]string
}

func newRecountScope(views []view, clones map[string]fwk.NodeInfo) *recountScope {
	r := &recountScope{clones: clones, byValue: map[string]map[string][]string{}}
	for _, v := range views {
		spec := v.pod.Spec
		if a := spec.Affinity; a != nil {
			if a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
				r.all = true
			}
			r.memberKeys = appendAntiAffinityKeys(r.memberKeys, a)
		}
		for _, c := range spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable == v1.DoNotSchedule {
				r.all = true
			}
		}
	}
	return r
}

// visit calls f for each node of the domain whose count the unit's pods in it (on) can
// change, possibly more than once.
func (r *recountScope) visit(u *unit, on []placed, f func(node string)) {
	if r.all {
		for name := range r.clones {
			f(name)
		}
		return
	}
	keys := slices.Clip(r.memberKeys)
	for _, p := range u.pods {
		if a := p.pod.Spec.Affinity; a != nil {
			keys = appendAntiAffinityKeys(keys, a)
		}
	}
	for _, p := range on {
		f(p.node)
		labels := r.clones[p.node].Node().Labels
		for _, key := range keys {
			if value, ok := labels[key]; ok {
				for _, name := range r.nodesWith(key)[value] {
					f(name)
				}
			}
		}
	}
}

func (r *recountScope) nodesWith(key string) map[string][]string {
	if groups, ok := r.byValue[key]; ok {
		return groups
	}
	groups := map[string][]string{}
	for name, ni := range r.clones {
		if value, ok := ni.Node().Labels[key]; ok {
			groups[value] = append(groups[value], name)
		}
	}
	r.byValue[key] = groups
	return groups
}

// appendAntiAffinityKeys appends the topology keys of an affinity's required anti-affinity
// terms (keys may repeat).
func appendAntiAffinityKeys(keys []string, a *v1.Affinity) []string {
	if a.PodAntiAffinity == nil {
		return keys
	}
	for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		keys = append(keys, term.TopologyKey)
	}
	return keys
}
