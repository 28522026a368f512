package config

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// nodeLabelsKey is the top-level key of the node labels section.
const nodeLabelsKey = "nodeLabels"

// DefaultWritesPerSecond bounds the node label writes when writesPerSecond is absent: a
// first publish on 10,000 nodes takes 200 s, and the apiserver sees 50 small patches a
// second at most.
const DefaultWritesPerSecond = 50.0

// NodeLabels turns on the HyperNode tree as node labels (pkg/controller/nodelabels): every
// node in a usable leaf gets hypernode.dev/tier-<tier> = its HyperNode at that tier.
type NodeLabels struct {
	// Enabled publishes the labels; false (the default) removes the labels the controller
	// wrote, and only those.
	Enabled bool `json:"enabled"`
	// WritesPerSecond bounds the node writes (one patch per node whose labels change);
	// DefaultWritesPerSecond when absent. Nil only before defaulting.
	WritesPerSecond *float64 `json:"writesPerSecond,omitempty"`
}

// Rate is the defaulted writesPerSecond.
func (n NodeLabels) Rate() float64 {
	if n.WritesPerSecond == nil {
		return DefaultWritesPerSecond
	}
	return *n.WritesPerSecond
}

// String describes the setting for Events and logs.
func (n NodeLabels) String() string {
	if !n.Enabled {
		return "off"
	}
	return fmt.Sprintf("on (at most %g node writes per second)", n.Rate())
}

// DefaultNodeLabels is the setting of a configuration without nodeLabels: off.
func DefaultNodeLabels() NodeLabels {
	rate := DefaultWritesPerSecond
	return NodeLabels{WritesPerSecond: &rate}
}

// parseNodeLabels decodes the nodeLabels section strictly; absent or null is the default.
func parseNodeLabels(raw json.RawMessage) (NodeLabels, field.ErrorList) {
	path := field.NewPath(nodeLabelsKey)
	var out NodeLabels
	if errs := DecodeStrict(raw, &out, path); len(errs) > 0 {
		return DefaultNodeLabels(), errs
	}
	if out.WritesPerSecond == nil {
		out.WritesPerSecond = DefaultNodeLabels().WritesPerSecond
	}
	if rate := *out.WritesPerSecond; !(rate > 0) {
		return out, field.ErrorList{field.Invalid(path.Child("writesPerSecond"), rate, "must be a positive number of node writes per second")}
	}
	return out, nil
}
