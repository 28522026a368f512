package gangpreemption

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// recountScope says which nodes of a domain may count the members differently once a victim
// unit is given back: the unit's own nodes, and, through a required anti-affinity (the
// members' or the unit's pods'), the nodes sharing that term's topology value with one of
// them. InterPodAffinity counts anti-affinity per topology value, so no other node's answer
// moves; with the usual hostname key that is the unit's nodes alone. Every node when the
// members' answer on one node depends on pods anywhere: their required affinity (the "first
// pod of its kind" rule), a DoNotSchedule spread (the global minimum; the profile's default
// constraints too), or a unit's pod holding a claim a member mounts (VolumeRestrictions
// refuses every node while a ReadWriteOncePod claim is in use).
type recountScope struct {
	all bool
	// memberKeys are the topology keys of the members' required anti-affinity terms;
	// memberClaims the names of the claims they mount (VolumeRestrictions compares names).
	memberKeys   []string
	memberClaims sets.Set[string]
	clones       map[string]fwk.NodeInfo
	// byValue groups the domain's nodes by topology key and value, built for a key when first
	// needed.
	byValue map[string]map[string][]string
}

// spreadStateKey is where PodTopologySpread's PreFilter keeps its state, written only when the
// pod has DoNotSchedule constraints, its own or the profile's defaults.
const spreadStateKey fwk.StateKey = "PreFilter" + names.PodTopologySpread

func newRecountScope(views []view, clones map[string]fwk.NodeInfo) *recountScope {
	r := &recountScope{clones: clones, memberClaims: sets.New[string](), byValue: map[string]map[string][]string{}}
	for _, v := range views {
		spec := v.pod.Spec
		if a := spec.Affinity; a != nil {
			if a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
				r.all = true
			}
			r.memberKeys = appendAntiAffinityKeys(r.memberKeys, a)
		}
		if _, err := v.state.Read(spreadStateKey); err == nil {
			r.all = true
		}
		for _, c := range spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable == v1.DoNotSchedule {
				r.all = true
			}
		}
		r.memberClaims.Insert(claimNames(v.pod)...)
	}
	return r
}

// visit calls f for each node of the domain whose count the unit's pods in the domain can
// change, possibly more than once (its pods elsewhere were neither taken off nor given back).
func (r *recountScope) visit(u *unit, f func(node string)) {
	if r.all || r.mountsAMemberClaim(u) {
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
	for _, p := range u.pods {
		ni, ok := r.clones[p.node]
		if !ok {
			continue
		}
		f(p.node)
		labels := ni.Node().Labels
		for _, key := range keys {
			if value, ok := labels[key]; ok {
				for _, name := range r.nodesWith(key)[value] {
					f(name)
				}
			}
		}
	}
}

// mountsAMemberClaim reports whether a pod of the unit mounts a claim a member mounts.
func (r *recountScope) mountsAMemberClaim(u *unit) bool {
	for _, p := range u.pods {
		for _, name := range claimNames(p.pod) {
			if r.memberClaims.Has(name) {
				return true
			}
		}
	}
	return false
}

// claimNames are the names of the PersistentVolumeClaims a pod mounts.
func claimNames(p *v1.Pod) []string {
	var out []string
	for _, vol := range p.Spec.Volumes {
		if vol.PersistentVolumeClaim != nil {
			out = append(out, vol.PersistentVolumeClaim.ClaimName)
		}
	}
	return out
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
