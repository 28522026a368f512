package label

import (
	"encoding/json"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
)

// Config is the label source's `config`: Volcano's networkTopologyTypes unchanged, plus
// presets for the label schemes clusters already carry.
//
//	config:
//	  networkTopologyTypes:
//	    my-fabric:                       # a type: its HyperNode names start with my-fabric.
//	    - nodeLabel: example.com/spine   # from the top tier down
//	    - nodeLabel: example.com/leaf
//	    - nodeLabel: kubernetes.io/hostname   # the node level: not a HyperNode
//	  presets: [topograph, gke]
type Config struct {
	NetworkTopologyTypes map[string][]NodeLabel `json:"networkTopologyTypes,omitempty"`
	Presets              []string               `json:"presets,omitempty"`
}

// NodeLabel is one level of a type.
type NodeLabel struct {
	NodeLabel string `json:"nodeLabel"`
	// TierName names the level's tier; the label key when unset (what Volcano uses, so
	// that jobs which name a tier keep working).
	TierName string `json:"tierName,omitempty"`
}

// maxTypeNameLength is Volcano's limit; type names start every HyperNode name of the type.
const maxTypeNameLength = 20

// Type is a topology type ready to discover: its name prefix and levels, top first.
type Type struct {
	// Name is the configured type or preset name; Prefix its DNS-label form, the first part
	// of every HyperNode name of the type.
	Name, Prefix string
	Levels       []Level
}

// ParseConfig decodes and validates the label source's config into its types, sorted by name.
func ParseConfig(raw json.RawMessage, path *field.Path) ([]Type, field.ErrorList) {
	var cfg Config
	if errs := config.DecodeStrict(raw, &cfg, path); len(errs) > 0 {
		return nil, errs
	}
	var errs field.ErrorList
	var types []Type
	prefixes := map[string]string{}
	addPrefix := func(p *field.Path, name string) (string, bool) {
		prefix := source.Sanitize(name)
		if other, ok := prefixes[prefix]; ok {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("%s (its HyperNode names would start like those of %s: %s.)", name, other, prefix)))
			return "", false
		}
		prefixes[prefix] = name
		return prefix, true
	}
	presetPath := path.Child("presets")
	for i, name := range cfg.Presets {
		levels, ok := presets[name]
		if !ok {
			errs = append(errs, field.NotSupported(presetPath.Index(i), name, PresetNames()))
			continue
		}
		if prefix, ok := addPrefix(presetPath.Index(i), name); ok {
			types = append(types, Type{Name: name, Prefix: prefix, Levels: levels})
		}
	}
	typesPath := path.Child("networkTopologyTypes")
	for _, name := range sortedKeys(cfg.NetworkTopologyTypes) {
		p := typesPath.Key(name)
		if name == "" || len(name) > maxTypeNameLength {
			errs = append(errs, field.Invalid(p, name, fmt.Sprintf("a type name has 1 to %d characters", maxTypeNameLength)))
			continue
		}
		levels, levelErrs := parseLevels(cfg.NetworkTopologyTypes[name], p)
		if len(levelErrs) > 0 {
			errs = append(errs, levelErrs...)
			continue
		}
		if prefix, ok := addPrefix(p, name); ok {
			types = append(types, Type{Name: name, Prefix: prefix, Levels: levels})
		}
	}
	if len(cfg.Presets) == 0 && len(cfg.NetworkTopologyTypes) == 0 {
		errs = append(errs, field.Required(path, fmt.Sprintf("configure networkTopologyTypes or presets (%v)", PresetNames())))
	}
	sort.Slice(types, func(i, j int) bool { return types[i].Prefix < types[j].Prefix })
	return types, errs
}

// parseLevels turns Volcano's list (top tier first, kubernetes.io/hostname last for the node
// level) into levels. Volcano drops the last entry whatever it is; here only a trailing
// kubernetes.io/hostname is dropped, so a list without it keeps its lowest level.
func parseLevels(labels []NodeLabel, path *field.Path) ([]Level, field.ErrorList) {
	var errs field.ErrorList
	if n := len(labels); n > 0 && labels[n-1].NodeLabel == v1.LabelHostname {
		labels = labels[:n-1]
	}
	if len(labels) == 0 {
		return nil, field.ErrorList{field.Required(path, "list at least one node label above "+v1.LabelHostname)}
	}
	seen := sets.New[string]()
	var levels []Level
	for i, l := range labels {
		p := path.Index(i).Child("nodeLabel")
		switch {
		case l.NodeLabel == v1.LabelHostname:
			errs = append(errs, field.Invalid(p, l.NodeLabel, "kubernetes.io/hostname denotes the node level and may only be the last entry"))
		case seen.Has(l.NodeLabel):
			errs = append(errs, field.Duplicate(p, l.NodeLabel))
		default:
			for _, msg := range validation.IsQualifiedName(l.NodeLabel) {
				errs = append(errs, field.Invalid(p, l.NodeLabel, msg))
			}
		}
		seen.Insert(l.NodeLabel)
		tierName := l.TierName
		if tierName == "" {
			tierName = l.NodeLabel
		}
		levels = append(levels, Level{Key: l.NodeLabel, TierName: tierName})
	}
	return levels, errs
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortStrings(s []string) { sort.Strings(s) }
