// Package source defines what a topology discovery source is for the HyperNode controller: a
// function from some view of the datacenter (node labels, InfiniBand UFM) to the HyperNodes
// that describe it. Sources are pure producers: they never write to the API. The discovery
// manager (pkg/controller/discovery) runs them and reconciles their answers.
package source

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	topologylisters "github.com/hypernode-dev/hypernode-scheduler/pkg/client/listers/topology/v1alpha1"
)

// Label marks the HyperNodes a discovery source owns: its value is the source's name
// ("label", "ufm"). A source creates, updates and deletes only HyperNodes that carry it with
// its own name.
const Label = "hypernode.dev/network-topology-source"

// PathAnnotation records, on a discovered HyperNode, what it stands for in its source's
// terms (for the label source the node label pairs of its path), so that a HyperNode whose
// name had to be shortened can still be traced back.
const PathAnnotation = "hypernode.dev/network-topology-path"

// Source discovers HyperNodes.
type Source interface {
	// Name is the source's configured name; discovered HyperNodes carry it in Label.
	Name() string
	// Discover returns the HyperNodes the source wants to exist now. With refresh the source
	// reads its external system again; without it, it may reuse its last good answer and
	// only map it to the cluster's current nodes again. An error leaves every HyperNode as it
	// is: nothing is created, changed or deleted.
	Discover(ctx context.Context, refresh bool) (*Result, error)
	// NodeChangeMatters reports whether a change of a node (old nil: added; new nil:
	// deleted) can change what Discover returns.
	NodeChangeMatters(old, new *v1.Node) bool
}

// Result is a source's answer.
type Result struct {
	// HyperNodes are the wanted HyperNodes: names, tiers, tier names, members, and the
	// PathAnnotation. Label is set by the reconciler.
	HyperNodes []*topologyv1alpha1.HyperNode
	// Warnings are things an admin should know that did not stop discovery (nodes missing
	// a label, hosts that match no node).
	Warnings []Warning
}

// Warning is one problem of an answer, reported as an Event reason and note.
type Warning struct {
	Reason  string
	Message string
}

// Env is what sources may read: nodes from the controller's informer, and Secrets by name.
type Env struct {
	Nodes corelisters.NodeLister
	// Secrets is used for Get only (the controller may read only the Secrets its
	// configuration names).
	Secrets corev1client.SecretsGetter
	// Namespace is the controller's namespace, the default namespace of a secretRef.
	Namespace string
	// HyperNodes lists the HyperNodes in the cluster, so that a source's first answer after
	// a start can be compared with the tree it built before, and a name two paths want can
	// stay with the HyperNode that holds it (nil: nothing to compare with).
	HyperNodes topologylisters.HyperNodeLister
}

// Error is a failed discovery with the Event reason that names its kind, so that each kind
// of failure is its own Event (a wrong CA and bad credentials are two different things to fix).
type Error struct {
	Reason string
	Err    error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error.
func Errorf(reason, format string, args ...any) error {
	return &Error{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// ReasonDiscoveryFailed is the reason of a discovery error that carries none of its own.
const ReasonDiscoveryFailed = "DiscoveryFailed"

// ReasonOf returns the Event reason of a discovery error.
func ReasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Reason != "" {
		return e.Reason
	}
	return ReasonDiscoveryFailed
}

// ErrNoAnswerYet is returned by Discover when asked to rebuild (no refresh) before the
// source ever had a good answer: there is nothing to reconcile, and nothing to report.
var ErrNoAnswerYet = errors.New("no answer from the source yet")
