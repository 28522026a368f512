// Package config is the HyperNode controller's discovery configuration: the ConfigMap key
// hypernode-controller.conf, in Volcano's networkTopologyDiscovery format unchanged, so that a
// Volcano user copies theirs:
//
//	networkTopologyDiscovery:
//	- source: ufm
//	  enabled: true
//	  interval: 10m
//	  credentials:
//	    secretRef:
//	      name: ufm-credentials
//	      namespace: hypernode-system
//	  config:
//	    endpoint: https://ufm.example.com
//	- source: label
//	  enabled: true
//	  config:
//	    presets: [topograph]
//	nodeLabels:
//	  enabled: true
//	  writesPerSecond: 50
//
// Parse decodes it strictly per entry: a mistake in one entry is reported with its field path
// and does not stop the other entries. Each source decodes and validates its own `config`.
// nodeLabels, the tree published as node labels, is this project's own section (NodeLabels).
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// Key is the ConfigMap key that holds the configuration.
const Key = "hypernode-controller.conf"

// DefaultInterval is the time between two discoveries of a source that sets no interval
// (Volcano's default).
const DefaultInterval = time.Hour

// MinInterval bounds how often a source may ask its external system.
const MinInterval = 10 * time.Second

// Configuration is the whole configuration.
type Configuration struct {
	NetworkTopologyDiscovery []DiscoveryConfig `json:"networkTopologyDiscovery"`
	NodeLabels               *NodeLabels       `json:"nodeLabels,omitempty"`
}

// DiscoveryConfig configures one discovery source.
type DiscoveryConfig struct {
	// Source names the source: "label" or "ufm". Discovered HyperNodes carry it in the label
	// hypernode.dev/network-topology-source.
	Source string `json:"source"`
	// Enabled turns the source on. A disabled or removed source stops; its HyperNodes stay.
	Enabled bool `json:"enabled"`
	// Interval is the time between two discoveries (a Go duration such as 10m, at least
	// MinInterval); DefaultInterval when absent. Nil only before Default: an interval that
	// is given, 0s included, is validated as given.
	Interval *Duration `json:"interval,omitempty"`
	// Credentials name the Secret that holds the source's credentials.
	Credentials *Credentials `json:"credentials,omitempty"`
	// Config is the source's own configuration, decoded by the source.
	Config json.RawMessage `json:"config,omitempty"`
}

// Credentials of a source.
type Credentials struct {
	SecretRef *SecretRef `json:"secretRef,omitempty"`
}

// SecretRef names a Secret; the namespace defaults to the controller's.
type SecretRef struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// String renders namespace/name.
func (r SecretRef) String() string { return r.Namespace + "/" + r.Name }

// Duration is a time.Duration written as a Go duration string ("10m", "1h30m").
type Duration struct{ time.Duration }

// UnmarshalJSON accepts a duration string only: a bare number would be nanoseconds, which is
// never what was meant.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("interval: %s is not a duration; write it as a string such as 10m or 1h", b)
	}
	parsed, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("interval: %q is not a duration (such as 10m or 1h): %v", s, err)
	}
	d.Duration = parsed
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// Entry is one item of networkTopologyDiscovery, defaulted, with the problems found in it.
type Entry struct {
	DiscoveryConfig
	// Path is the entry's field path, for messages.
	Path *field.Path
	// Errs are the problems of the entry; a source with problems is not started.
	Errs field.ErrorList
}

// Parsed is a parsed configuration.
type Parsed struct {
	Entries []Entry
	// Warnings are parts of the configuration that are ignored (unknown top-level keys).
	Warnings []string
	// NodeLabels is the nodeLabels section, defaulted (DefaultNodeLabels when absent); with
	// NodeLabelsErrs, it is not to be applied.
	NodeLabels     NodeLabels
	NodeLabelsErrs field.ErrorList
}

// Parse decodes the configuration text. A document that is not YAML, or whose
// networkTopologyDiscovery is not a list, is an error: nothing of it can be trusted. Problems
// of single entries are in their Entry.
func Parse(text, defaultNamespace string) (*Parsed, error) {
	data, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("%s is not valid YAML: %w", Key, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("%s must be a YAML mapping with the keys networkTopologyDiscovery and nodeLabels: %w", Key, err)
	}
	out := &Parsed{}
	out.NodeLabels, out.NodeLabelsErrs = parseNodeLabels(top[nodeLabelsKey])
	for key := range top {
		if key != "networkTopologyDiscovery" && key != nodeLabelsKey {
			out.Warnings = append(out.Warnings, fmt.Sprintf("%s: the key %q is not read by the HyperNode controller and is ignored", Key, key))
		}
	}
	var items []json.RawMessage
	if raw, ok := top["networkTopologyDiscovery"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, fmt.Errorf("%s: networkTopologyDiscovery must be a list of sources: %w", Key, err)
		}
	}
	list := field.NewPath("networkTopologyDiscovery")
	for i, raw := range items {
		e := Entry{Path: list.Index(i)}
		e.Errs = DecodeStrict(raw, &e.DiscoveryConfig, e.Path)
		if len(e.Errs) == 0 {
			e.Default(defaultNamespace)
			e.Errs = e.Validate()
		}
		out.Entries = append(out.Entries, e)
	}
	return out, nil
}

// Default fills in an absent interval and the Secret's namespace.
func (e *Entry) Default(defaultNamespace string) {
	if e.Interval == nil {
		e.Interval = &Duration{DefaultInterval}
	}
	if e.Credentials != nil && e.Credentials.SecretRef != nil && e.Credentials.SecretRef.Namespace == "" {
		e.Credentials.SecretRef.Namespace = defaultNamespace
	}
}

// Validate checks the fields every source shares, after Default.
func (e *Entry) Validate() field.ErrorList {
	var errs field.ErrorList
	if e.Source == "" {
		errs = append(errs, field.Required(e.Path.Child("source"), "name the source, e.g. label or ufm"))
	}
	switch {
	case e.Interval == nil:
		errs = append(errs, field.Required(e.Path.Child("interval"), "Default sets it when absent"))
	case e.Interval.Duration < MinInterval:
		errs = append(errs, field.Invalid(e.Path.Child("interval"), e.Interval.String(), fmt.Sprintf("must be at least %s", MinInterval)))
	}
	if e.Credentials != nil {
		p := e.Path.Child("credentials", "secretRef")
		switch ref := e.Credentials.SecretRef; {
		case ref == nil:
			errs = append(errs, field.Required(p, "credentials need a secretRef"))
		default:
			for _, msg := range apivalidation.NameIsDNSSubdomain(ref.Name, false) {
				errs = append(errs, field.Invalid(p.Child("name"), ref.Name, msg))
			}
			for _, msg := range apivalidation.ValidateNamespaceName(ref.Namespace, false) {
				errs = append(errs, field.Invalid(p.Child("namespace"), ref.Namespace, msg))
			}
		}
	}
	return errs
}

// DecodeStrict decodes a JSON object into out, refusing unknown fields, and reports the
// problems with their field paths under path.
func DecodeStrict(raw json.RawMessage, out any, path *field.Path) field.ErrorList {
	if isNull(raw) {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(out)
	if err == nil {
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr):
		p := path
		if typeErr.Field != "" {
			p = path.Child(typeErr.Field)
		}
		return field.ErrorList{field.Invalid(p, typeErr.Value, fmt.Sprintf("must be a %s", jsonKind(typeErr.Type.Kind().String())))}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return field.ErrorList{field.Forbidden(path.Child(name), "unknown field")}
	default:
		// The message of a field's own decoder names the field (see Duration).
		return field.ErrorList{field.Invalid(path, field.OmitValueType{}, err.Error())}
	}
}

// jsonKind names a Go kind as the YAML author sees it.
func jsonKind(kind string) string {
	switch kind {
	case "bool":
		return "YAML bool (true or false, unquoted)"
	case "string":
		return "string"
	case "slice":
		return "list"
	case "map", "struct":
		return "mapping"
	case "int", "int32", "int64", "float64":
		return "number"
	}
	return kind
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}
