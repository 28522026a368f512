// Package composition refuses, when the scheduler starts, a profile that composes this
// project's plugins unsafely: the gang plugins depend on each other, on kube-scheduler's
// per-pod preemption being off, and on the order of two extension points. (GangQueueSort is
// not required: without it a gang's members interleave with other pods, which costs time,
// not correctness.)
// A profile that gets one of them wrong would start and then evict for nothing or release
// gangs it could have placed; instead the scheduler does not start, and says what to write.
package composition

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/features"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/names"
)

// Recommended is the plugins block of manifests/scheduler/config.yaml (a test keeps them
// equal): every plugin of this project, composed safely.
const Recommended = `plugins:
  queueSort:
    enabled:
    - name: GangQueueSort
    disabled:
    - name: "*"
  multiPoint:
    enabled:
    - name: Gang
    - name: NetworkTopologyAware
    - name: GangRetryGate
    - name: GangPreemption
    disabled:
    - name: DefaultPreemption
  preFilter:
    enabled:
    - name: Gang
    - name: GangPreemption
  postFilter:
    enabled:
    - name: NetworkTopologyAware
    - name: GangPreemption
  placementGenerate:
    enabled:
    - name: NetworkTopologyAware
    disabled:
    - name: TopologyPlacementGenerator
  placementScore:
    enabled:
    - name: NetworkTopologyAware
      weight: 10
  podGroupPostFilter:
    enabled:
    - name: GangPreemption
`

// lister is the part of kube-scheduler's framework the check reads: the profile's plugins
// per extension point, in the order they run.
type lister interface {
	ListPlugins() *config.Plugins
	ProfileName() string
}

// checked are the profiles (frameworks) already checked: each is reported once, by the first
// of its plugins that asks.
var checked sync.Map

// Check returns why the profile of handle composes this project's plugins unsafely, with the
// plugins block to use; nil when it is safe, already reported, or handle cannot list its
// plugins (a test's fake). Plugins call it from EventsToRegister, which kube-scheduler calls
// once the profile is built and whose error stops the scheduler from starting.
func Check(handle fwk.Handle) error {
	l, ok := handle.(lister)
	if !ok {
		return nil
	}
	if _, done := checked.LoadOrStore(handle, struct{}{}); done {
		return nil
	}
	return Error(l.ProfileName(), Problems(l.ListPlugins()))
}

// Error is the error for the profile's problems (nil for none).
func Error(profile string, problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "profile %q composes hypernode-scheduler's plugins unsafely:\n", profile)
	for _, p := range problems {
		fmt.Fprintf(&b, "  - %s\n", p)
	}
	b.WriteString("Give the profile these plugins (manifests/scheduler/config.yaml; docs/user-guide.md, \"Custom configurations\"):\n")
	for _, line := range strings.Split(strings.TrimSuffix(Recommended, "\n"), "\n") {
		b.WriteString("    " + line + "\n")
	}
	return fmt.Errorf("%s", strings.TrimSuffix(b.String(), "\n"))
}

// Problems lists what is unsafe in a profile's plugins (per extension point, in their order),
// if it enables any of this project's plugins that schedule gangs.
func Problems(p *config.Plugins) []string {
	enabled := func(set config.PluginSet, name string) bool {
		return slices.ContainsFunc(set.Enabled, func(pl config.Plugin) bool { return pl.Name == name })
	}
	anywhere := func(name string) bool {
		for _, set := range []config.PluginSet{p.PreEnqueue, p.PreFilter, p.Filter, p.PostFilter, p.Reserve, p.PreScore, p.Score, p.Permit, p.PreBind, p.PostBind} {
			if enabled(set, name) {
				return true
			}
		}
		return false
	}
	gang := anywhere(names.Gang)
	var out []string
	// A plugin enabled at some of its extension points is enabled at all of them: each one
	// is half of a protocol with the others (Gang's Reserve and Permit, NTA's PreFilter and
	// Filter), and a single disabled line would break it silently.
	for _, w := range []struct {
		name   string
		points []string
	}{
		{names.Gang, []string{"PreEnqueue", "PreFilter", "PostFilter", "Reserve", "Permit", "PreBind", "PostBind"}},
		{names.NetworkTopologyAware, []string{"PreFilter", "Filter", "PostFilter", "Reserve", "PreScore", "Score"}},
		{names.GangPreemption, []string{"PreEnqueue", "PreFilter", "PostFilter"}},
	} {
		if !anywhere(w.name) {
			continue
		}
		var missing []string
		for _, point := range w.points {
			if !enabled(pointSet(p, point), w.name) {
				missing = append(missing, point)
			}
		}
		if len(missing) > 0 {
			out = append(out, fmt.Sprintf("%s is disabled at %s: each of its extension points (%s) relies on the others; "+
				"enable it at all of them (multiPoint does)", w.name, strings.Join(missing, ", "), strings.Join(w.points, ", ")))
		}
	}
	for _, dep := range []struct{ name, without string }{
		{names.NetworkTopologyAware, "its gangs' members would bind one by one as they are placed, not all or nothing"},
		{names.GangPreemption, "it would evict pods for gangs whose members then bind one by one"},
		{names.GangRetryGate, "it holds back the members of gangs that Gang schedules, and nothing would release them"},
	} {
		if !gang && anywhere(dep.name) {
			out = append(out, fmt.Sprintf("%s is enabled without Gang: %s; enable Gang", dep.name, dep.without))
		}
	}
	if !gang {
		return out
	}
	if enabled(p.PostFilter, names.DefaultPreemption) {
		out = append(out, "DefaultPreemption runs with Gang (kube-scheduler enables it unless it is disabled): it preempts for one gang "+
			"member at a time and evicts pods for a gang that still cannot run, or finds nothing worth evicting for a gang that "+
			"would fit after one eviction; disable DefaultPreemption and enable GangPreemption")
	}
	before := func(set config.PluginSet, first, second string) bool {
		i := slices.IndexFunc(set.Enabled, func(pl config.Plugin) bool { return pl.Name == first })
		j := slices.IndexFunc(set.Enabled, func(pl config.Plugin) bool { return pl.Name == second })
		return i < 0 || j < 0 || i < j
	}
	for _, o := range []struct {
		point         string
		set           config.PluginSet
		first, second string
		why           string
	}{
		{"PreFilter", p.PreFilter, names.Gang, names.NetworkTopologyAware,
			"a gang would be planned before Gang has checked that it can be scheduled (its members, its blocker)"},
		{"PreFilter", p.PreFilter, names.GangPreemption, names.NetworkTopologyAware,
			"a gang would be planned on a snapshot that still holds the pods evicted for it"},
		{"PostFilter", p.PostFilter, names.NetworkTopologyAware, names.GangPreemption,
			"pods would be evicted for a member that could move to a free node of its gang's domain"},
		{"PostFilter", p.PostFilter, names.NetworkTopologyAware, names.Gang,
			"a member whose planned node was taken would release its gang's waiting members before it is moved to a free node of the domain"},
		{"PostFilter", p.PostFilter, names.GangPreemption, names.Gang,
			"a gang's waiting members would be released before preemption makes room for them"},
		{"PodGroupPostFilter", p.PodGroupPostFilter, names.GangPreemption, dynamicResources,
			"a native pod group that NetworkTopologyAware could not place would get DynamicResources' error (its state is missing: no member ran PreFilter) instead of the preemption's decision"},
	} {
		if o.point == "PodGroupPostFilter" && !utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) {
			// Native pod groups only: a profile written before them must still start.
			continue
		}
		if !before(o.set, o.first, o.second) {
			out = append(out, fmt.Sprintf("%s's %s runs after %s's: %s; name %s before %s under %s: enabled",
				o.first, o.point, o.second, o.why, o.first, o.second, lowerFirst(o.point)))
		}
	}
	return out
}

// dynamicResources is kube-scheduler's DRA plugin, which also runs at PodGroupPostFilter.
const dynamicResources = "DynamicResources"

// pointSet is the profile's plugins at the extension point named point.
func pointSet(p *config.Plugins, point string) config.PluginSet {
	return map[string]config.PluginSet{
		"PreEnqueue": p.PreEnqueue, "PreFilter": p.PreFilter, "Filter": p.Filter, "PostFilter": p.PostFilter,
		"Reserve": p.Reserve, "PreScore": p.PreScore, "Score": p.Score, "Permit": p.Permit, "PreBind": p.PreBind, "PostBind": p.PostBind,
	}[point]
}

// lowerFirst is the YAML key of an extension point (PreFilter: preFilter).
func lowerFirst(s string) string { return strings.ToLower(s[:1]) + s[1:] }
