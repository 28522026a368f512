package composition

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"

	"github.com/google/go-cmp/cmp"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/yaml"
)

// set is a PluginSet enabling the named plugins in this order.
func set(names ...string) config.PluginSet {
	var s config.PluginSet
	for _, n := range names {
		s.Enabled = append(s.Enabled, config.Plugin{Name: n})
	}
	return s
}

// shipped is the plugins of manifests/scheduler/config.yaml as kube-scheduler expands them
// (default plugins first, then multiPoint's; the explicit preFilter and postFilter lists
// before the rest), the extension points the check reads.
func shipped() *config.Plugins {
	return &config.Plugins{
		QueueSort:  set("GangQueueSort"),
		PreEnqueue: set("SchedulingGates", "Gang", "GangRetryGate", "GangPreemption"),
		PreFilter:  set("Gang", "GangPreemption", "NodeAffinity", "NodePorts", "NodeResourcesFit", "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "PodTopologySpread", "InterPodAffinity", "DynamicResources", "NetworkTopologyAware"),
		Filter:     set("NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit", "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "PodTopologySpread", "InterPodAffinity", "DynamicResources", "NetworkTopologyAware"),
		PostFilter: set("NetworkTopologyAware", "GangPreemption", "Gang"),
		Reserve:    set("VolumeBinding", "DynamicResources", "Gang", "NetworkTopologyAware"),
		PreScore:   set("TaintToleration", "NodeAffinity", "NodeResourcesFit", "VolumeBinding", "PodTopologySpread", "InterPodAffinity", "NodeResourcesBalancedAllocation", "NetworkTopologyAware"),
		Score:      set("TaintToleration", "NodeAffinity", "NodeResourcesFit", "VolumeBinding", "PodTopologySpread", "InterPodAffinity", "NodeResourcesBalancedAllocation", "ImageLocality", "NetworkTopologyAware"),
		Permit:     set("Gang"),
		PreBind:    set("VolumeBinding", "DynamicResources", "Gang"),
		PostBind:   set("Gang"),
		// With the native pod groups' gates (the shipped sections; without the gates the
		// framework lists these plugins too).
		PlacementGenerate:  set("NetworkTopologyAware"),
		PlacementScore:     set("NodeResourcesFit", "NetworkTopologyAware"),
		PodGroupPostFilter: set("GangPreemption", "DynamicResources"),
	}
}

func TestProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		// native: with the gate GenericWorkload on.
		native bool
		edit   func(p *config.Plugins)
		want   []string
	}{
		{name: "the shipped configuration"},
		{name: "the minimal profile multiPoint [Gang, NetworkTopologyAware]", edit: func(p *config.Plugins) {
			p.QueueSort = set("PrioritySort")
			p.PreFilter = set("NodeAffinity", "NodeResourcesFit", "DynamicResources", "Gang", "NetworkTopologyAware")
			p.PostFilter = set("DefaultPreemption", "Gang", "NetworkTopologyAware")
			p.PreEnqueue = set("SchedulingGates", "Gang")
		}, want: []string{
			"DefaultPreemption runs with Gang (kube-scheduler enables it unless it is disabled): it preempts for one gang member at a time and evicts pods for a gang that still cannot run, or finds nothing worth evicting for a gang that would fit after one eviction; disable DefaultPreemption and enable GangPreemption",
			"NetworkTopologyAware's PostFilter runs after Gang's: a member whose planned node was taken would release its gang's waiting members before it is moved to a free node of the domain; name NetworkTopologyAware before Gang under postFilter: enabled",
		}},
		{name: "DefaultPreemption next to GangPreemption", edit: func(p *config.Plugins) {
			p.PostFilter = set("NetworkTopologyAware", "GangPreemption", "Gang", "DefaultPreemption")
		}, want: []string{
			"DefaultPreemption runs with Gang (kube-scheduler enables it unless it is disabled): it preempts for one gang member at a time and evicts pods for a gang that still cannot run, or finds nothing worth evicting for a gang that would fit after one eviction; disable DefaultPreemption and enable GangPreemption",
		}},
		{name: "multiPoint alone: GangPreemption's PreFilter after NetworkTopologyAware's, PostFilters in multiPoint order", edit: func(p *config.Plugins) {
			p.PreFilter = set("NodeResourcesFit", "Gang", "NetworkTopologyAware", "GangPreemption")
			p.PostFilter = set("Gang", "NetworkTopologyAware", "GangPreemption")
		}, want: []string{
			"GangPreemption's PreFilter runs after NetworkTopologyAware's: a gang would be planned on a snapshot that still holds the pods evicted for it; name GangPreemption before NetworkTopologyAware under preFilter: enabled",
			"NetworkTopologyAware's PostFilter runs after Gang's: a member whose planned node was taken would release its gang's waiting members before it is moved to a free node of the domain; name NetworkTopologyAware before Gang under postFilter: enabled",
			"GangPreemption's PostFilter runs after Gang's: a gang's waiting members would be released before preemption makes room for them; name GangPreemption before Gang under postFilter: enabled",
		}},
		{name: "Gang's PreFilter after NetworkTopologyAware's", edit: func(p *config.Plugins) {
			p.PreFilter = set("GangPreemption", "NetworkTopologyAware", "Gang")
		}, want: []string{
			"Gang's PreFilter runs after NetworkTopologyAware's: a gang would be planned before Gang has checked that it can be scheduled (its members, its blocker); name Gang before NetworkTopologyAware under preFilter: enabled",
		}},
		{name: "GangPreemption's PostFilter before NetworkTopologyAware's", edit: func(p *config.Plugins) {
			p.PostFilter = set("GangPreemption", "NetworkTopologyAware", "Gang")
		}, want: []string{
			"NetworkTopologyAware's PostFilter runs after GangPreemption's: pods would be evicted for a member that could move to a free node of its gang's domain; name NetworkTopologyAware before GangPreemption under postFilter: enabled",
		}},
		{name: "DynamicResources' PodGroupPostFilter before GangPreemption's, native pod groups off: not checked", edit: func(p *config.Plugins) {
			p.PodGroupPostFilter = set("DynamicResources", "GangPreemption")
		}},
		{name: "DynamicResources' PodGroupPostFilter before GangPreemption's", native: true, edit: func(p *config.Plugins) {
			p.PodGroupPostFilter = set("DynamicResources", "GangPreemption")
		}, want: []string{
			"GangPreemption's PodGroupPostFilter runs after DynamicResources's: a native pod group that NetworkTopologyAware could not place would get DynamicResources' error (its state is missing: no member ran PreFilter) instead of the preemption's decision; name GangPreemption before DynamicResources under podGroupPostFilter: enabled",
		}},
		{name: "GangRetryGate without Gang", edit: func(p *config.Plugins) {
			*p = config.Plugins{QueueSort: set("PrioritySort"), PreEnqueue: set("SchedulingGates", "GangRetryGate"), PostFilter: set("DefaultPreemption")}
		}, want: []string{
			"GangRetryGate is enabled without Gang: it holds back the members of gangs that Gang schedules, and nothing would release them; enable Gang",
		}},
		{name: "NetworkTopologyAware and GangPreemption without Gang", edit: func(p *config.Plugins) {
			*p = config.Plugins{QueueSort: set("PrioritySort"), PreEnqueue: set("GangPreemption"), PreFilter: set("GangPreemption", "NetworkTopologyAware"),
				Filter: set("NetworkTopologyAware"), PostFilter: set("NetworkTopologyAware", "GangPreemption"),
				Reserve: set("NetworkTopologyAware"), PreScore: set("NetworkTopologyAware"), Score: set("NetworkTopologyAware")}
		}, want: []string{
			"NetworkTopologyAware is enabled without Gang: its gangs' members would bind one by one as they are placed, not all or nothing; enable Gang",
			"GangPreemption is enabled without Gang: it would evict pods for gangs whose members then bind one by one; enable Gang",
		}},
		{name: "Gang alone, without preemption: safe", edit: func(p *config.Plugins) {
			*p = config.Plugins{QueueSort: set("GangQueueSort"), PreEnqueue: set("Gang"), PreFilter: set("Gang"), PostFilter: set("Gang"),
				Reserve: set("Gang"), Permit: set("Gang"), PreBind: set("Gang"), PostBind: set("Gang")}
		}},
		{name: "Gang disabled at Permit alone", edit: func(p *config.Plugins) {
			p.Permit = config.PluginSet{}
		}, want: []string{
			"Gang is disabled at Permit: each of its extension points (PreEnqueue, PreFilter, PostFilter, Reserve, Permit, PreBind, PostBind) relies on the others; enable it at all of them (multiPoint does)",
		}},
		{name: "NetworkTopologyAware disabled at Filter alone", edit: func(p *config.Plugins) {
			p.Filter = set("NodeResourcesFit")
		}, want: []string{
			"NetworkTopologyAware is disabled at Filter: each of its extension points (PreFilter, Filter, PostFilter, Reserve, PreScore, Score) relies on the others; enable it at all of them (multiPoint does)",
		}},
		{name: "none of this project's gang plugins", edit: func(p *config.Plugins) {
			*p = config.Plugins{QueueSort: set("PrioritySort"), PreFilter: set("NodeResourcesFit"), PostFilter: set("DefaultPreemption")}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.GenericWorkload, tc.native)
			p := shipped()
			if tc.edit != nil {
				tc.edit(p)
			}
			if diff := cmp.Diff(tc.want, Problems(p)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestErrorPrintsTheFix: the error names the profile and every problem, then the block to use.
func TestErrorPrintsTheFix(t *testing.T) {
	err := Error("ml", []string{"one", "two"})
	want := `profile "ml" composes hypernode-scheduler's plugins unsafely:
  - one
  - two
Give the profile these plugins (manifests/scheduler/config.yaml; docs/user-guide.md, "Custom configurations"):
    plugins:
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
        - name: GangPreemption`
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
	if Error("ml", nil) != nil {
		t.Error("an error without problems")
	}
}

// TestRecommendedIsTheShippedBlock: the fix the error prints is manifests/scheduler/config.yaml's
// plugins block, value for value.
func TestRecommendedIsTheShippedBlock(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "..", "manifests", "scheduler", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Profiles []map[string]any `json:"profiles"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil || len(cfg.Profiles) != 1 {
		t.Fatalf("manifests/scheduler/config.yaml: %v, %d profiles", err, len(cfg.Profiles))
	}
	var recommended map[string]any
	if err := yaml.Unmarshal([]byte(Recommended), &recommended); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(recommended["plugins"], cfg.Profiles[0]["plugins"]); diff != "" {
		t.Errorf("Recommended against the shipped plugins (-Recommended +shipped):\n%s", diff)
	}
}
