// Package ufm discovers HyperNodes of an InfiniBand fabric from NVIDIA UFM: one
// GET {endpoint}/ufmRest/resources/ports with basic authentication from a Secret, TLS verified
// unless insecureSkipVerify is configured, redirects followed only to https on the endpoint's
// host and port. Hosts that share leaf switches form a leaf HyperNode; unlike Volcano, which
// always builds exactly two tiers, the switch-to-switch ports build the real tiers above (see
// Fabric.HyperNodes). UFM host names are mapped to Node names, exactly or else ignoring case.
//
// A failed request, an HTTP error, a malformed or an empty answer is an error: the manager
// reports it and changes nothing, so the last good tree stays.
package ufm

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
)

// SourceName is the UFM source's name in the configuration and in the source label.
const SourceName = "ufm"

// examplesShown bounds the host names a warning lists.
const examplesShown = 5

// Source is the UFM source.
type Source struct {
	settings *settings
	env      source.Env
	client   *http.Client

	mu sync.Mutex
	// last is the last good answer, kept so that a failure changes nothing and node changes
	// are mapped without asking UFM again.
	last *Fabric
	// shrinkingSince is when the answers began to lose more than half of last's hosts (zero
	// while they do not), shrinks how many such answers came since.
	shrinkingSince time.Time
	shrinks        int
	clock          clock.PassiveClock
}

// shrinkHold and shrinkAnswers are how long, and in how many answers in a row without a
// failure between them, the answers must keep losing more than half of the hosts before one is
// applied: UFM restarting or rediscovering the fabric answers with part of it for minutes, and
// applying that would delete most of the tree. The runner retries a refused answer after its
// back-off (5 s, doubling), so a real shrink lands a few minutes late.
const (
	shrinkHold    = 5 * time.Minute
	shrinkAnswers = 3
)

var _ source.Source = &Source{}

// New builds the UFM source from its configuration entry.
func New(entry config.Entry, env source.Env) (source.Source, field.ErrorList) {
	s, errs := parseConfig(entry)
	if len(errs) > 0 {
		return nil, errs
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = s.tls
	// One request per interval: nothing to keep open in between.
	transport.DisableKeepAlives = true
	return &Source{
		settings: s,
		env:      env,
		client:   &http.Client{Transport: transport, Timeout: s.timeout, CheckRedirect: checkRedirect},
		clock:    clock.RealClock{},
	}, nil
}

// Name implements source.Source.
func (s *Source) Name() string { return SourceName }

// InsecureWarning returns the warning to give once when TLS verification is off.
func (s *Source) InsecureWarning() *source.Warning {
	if !s.settings.insecure {
		return nil
	}
	return &source.Warning{Reason: ReasonInsecure, Message: fmt.Sprintf(
		"ufm: insecureSkipVerify is true: the certificate of %s is not verified and the credentials of Secret %s may be sent to anyone who intercepts the connection; give its CA in config.caBundle instead",
		s.settings.host, s.settings.secret)}
}

// NodeChangeMatters implements source.Source: host names map to node names, so nodes that
// join or leave matter; label changes do not.
func (s *Source) NodeChangeMatters(old, new *v1.Node) bool { return old == nil || new == nil }

// Discover implements source.Source.
func (s *Source) Discover(ctx context.Context, refresh bool) (*source.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.last
	if refresh {
		ports, err := s.fetch(ctx)
		if err == nil {
			f, err = NewFabric(ports)
		}
		if err != nil {
			// A run of partial answers must be unbroken: one after an outage starts anew.
			s.shrinkingSince, s.shrinks = time.Time{}, 0
			return nil, err
		}
	} else if f == nil {
		return nil, source.ErrNoAnswerYet
	}
	nodes, err := s.env.Nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	res, matched, err := s.build(f, nodes)
	if err != nil {
		return nil, err
	}
	if refresh {
		if err := s.checkShrinkLocked(f, matched, nodes); err != nil {
			return nil, err
		}
	}
	// Only an answer that gave a tree replaces the last good one.
	s.last = f
	return res, nil
}

// checkShrinkLocked refuses an answer that lost more than half of what the source knew until
// such answers have come for shrinkHold, at least shrinkAnswers of them: more than half of the
// last good answer's hosts, or, for the first answer since this source started (the
// controller's start, or a change of its configuration entry), more than half of the nodes
// that the HyperNodes the source owns hold (matched are the nodes the answer's hosts map to).
// s.mu must be held.
func (s *Source) checkShrinkLocked(f *Fabric, matched []string, nodes []*v1.Node) error {
	var have, had int
	var what string
	if s.last != nil {
		have, had = len(f.HostLeaves), len(s.last.HostLeaves)
		what = fmt.Sprintf("%d hosts where its last answer had %d", have, had)
	} else if held, err := s.heldNodes(nodes); err != nil {
		return err
	} else {
		have, had = 0, len(held)
		for _, n := range matched {
			if held[n] {
				have++
			}
		}
		what = fmt.Sprintf("%d of the %d nodes that the HyperNodes it built before this source started hold", have, had)
	}
	if 2*have >= had {
		s.shrinkingSince, s.shrinks = time.Time{}, 0
		return nil
	}
	now := s.clock.Now()
	if s.shrinkingSince.IsZero() {
		s.shrinkingSince = now
	}
	s.shrinks++
	lasted := now.Sub(s.shrinkingSince)
	if lasted >= shrinkHold && s.shrinks >= shrinkAnswers {
		s.shrinkingSince, s.shrinks = time.Time{}, 0
		return nil
	}
	return source.Errorf(ReasonPartialAnswer,
		"UFM reports %s: taken for a partial answer (UFM restarting or rediscovering the fabric), applied only if such answers come for %s, %d of them in a row (%s and %d so far)",
		what, shrinkHold, shrinkAnswers, lasted.Round(time.Second), s.shrinks)
}

// heldNodes are the existing nodes that the HyperNodes this source owns name as members:
// what the tree held before this source started (none without a HyperNode lister).
func (s *Source) heldNodes(nodes []*v1.Node) (map[string]bool, error) {
	if s.env.HyperNodes == nil {
		return nil, nil
	}
	owned, err := s.env.HyperNodes.List(labels.SelectorFromSet(labels.Set{source.Label: SourceName}))
	if err != nil {
		return nil, fmt.Errorf("listing HyperNodes: %w", err)
	}
	exists := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		exists[n.Name] = true
	}
	held := map[string]bool{}
	for _, hn := range owned {
		for _, m := range hn.Spec.Members {
			if m.Type == topologyv1alpha1.MemberTypeNode && m.Selector.ExactMatch != nil && exists[m.Selector.ExactMatch.Name] {
				held[m.Selector.ExactMatch.Name] = true
			}
		}
	}
	return held, nil
}

// build maps the fabric's hosts to nodes and builds the HyperNodes; matched are the nodes its
// hosts map to.
func (s *Source) build(f *Fabric, nodes []*v1.Node) (res *source.Result, matched []string, err error) {
	hosts := sortedKeys(f.HostLeaves)
	nodeOf := mapHosts(hosts, nodes)
	var unmatched []string
	for _, h := range hosts {
		if _, ok := nodeOf[h]; !ok {
			unmatched = append(unmatched, h)
		}
	}
	if len(unmatched) == len(hosts) {
		return nil, nil, source.Errorf(ReasonNoHostMatched, "none of the %d hosts UFM reports (%s) is the name of a Node, exactly or ignoring case",
			len(unmatched), examples(unmatched))
	}
	res = &source.Result{HyperNodes: f.HyperNodes(func(h string) (string, bool) {
		n, ok := nodeOf[h]
		return n, ok
	})}
	if len(unmatched) > 0 {
		res.Warnings = append(res.Warnings, source.Warning{Reason: ReasonHostsUnmatched, Message: fmt.Sprintf(
			"ufm: %d of %d hosts match no Node, exactly or ignoring case (%s); they are left out of the HyperNodes",
			len(unmatched), len(hosts), examples(unmatched))})
	}
	return res, slices.Collect(maps.Values(nodeOf)), nil
}

// mapHosts maps UFM host names to Node names: exactly; else ignoring case, when exactly one
// node matches that way and no other host claims that node (exactly or ignoring case), so
// that no node lands in two leaves.
func mapHosts(hosts []string, nodes []*v1.Node) map[string]string {
	exact := map[string]bool{}
	lower := map[string][]string{}
	for _, n := range nodes {
		exact[n.Name] = true
		l := strings.ToLower(n.Name)
		lower[l] = append(lower[l], n.Name)
	}
	out := map[string]string{}
	taken := map[string]int{}
	var rest []string
	for _, h := range hosts {
		if exact[h] {
			out[h] = h
			taken[h]++
			continue
		}
		rest = append(rest, h)
	}
	candidate := map[string]string{}
	for _, h := range rest {
		if names := lower[strings.ToLower(h)]; len(names) == 1 {
			candidate[h] = names[0]
			taken[names[0]]++
		}
	}
	for h, n := range candidate {
		if taken[n] == 1 {
			out[h] = n
		}
	}
	return out
}

func examples(names []string) string {
	if len(names) <= examplesShown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:examplesShown], ", "), len(names)-examplesShown)
}
