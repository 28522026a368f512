// Package discovery runs the HyperNode controller's discovery sources: it reads their
// configuration from a ConfigMap (Volcano's format, pkg/controller/discovery/config), starts,
// restarts and stops one runner per enabled source as the ConfigMap changes, and reconciles
// each source's answer into HyperNodes it owns (Reconciler). Problems are Events on the
// ConfigMap and log lines; a source that fails keeps its HyperNodes as they are, and a problem
// in one source's configuration does not stop the others.
package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	topologyclient "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned"
	topologyinformers "github.com/hypernode-dev/hypernode-scheduler/pkg/client/informers/externalversions/topology/v1alpha1"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/label"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/ufm"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/eventlog"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/informerutil"
)

// Event reasons about the configuration.
const (
	ReasonConfigMissing = "ConfigMissing"
	ReasonInvalidConfig = "InvalidConfig"
	ReasonConfigWarning = "ConfigWarning"
	ReasonConfigLoaded  = "ConfigLoaded"
	ReasonSourceStopped = "SourceStopped"
	ReasonDiscovered    = "Discovered"
	ReasonRecovered     = "DiscoveryRecovered"
)

// Factory builds a source from its configuration entry.
type Factory func(config.Entry, source.Env) (source.Source, field.ErrorList)

// Factories are the sources the controller knows, by name.
var Factories = map[string]Factory{
	label.SourceName: label.New,
	ufm.SourceName:   ufm.New,
}

// Options configure a Manager.
type Options struct {
	// Namespace and ConfigMap name the configuration; Namespace is also the default
	// namespace of a credentials Secret.
	Namespace, ConfigMap string
	Client               topologyclient.Interface
	Env                  source.Env
	Events               *eventlog.Recorder
	// NodeLabels, if set, is given the nodeLabels section of every configuration that has
	// no error in it (and the default, off, when the ConfigMap does not exist).
	NodeLabels NodeLabelsConfigurer
	// Timing; zero values take the defaults.
	Timing Timing
}

// NodeLabelsConfigurer takes the nodeLabels section of the configuration
// (pkg/controller/nodelabels). The Manager reads the ConfigMap for it, so that one reader
// reports the configuration's problems.
type NodeLabelsConfigurer interface {
	Configure(ctx context.Context, cfg config.NodeLabels)
}

// Manager runs the configured discovery sources.
type Manager struct {
	opts       Options
	configMaps corelisters.ConfigMapLister
	reconciler *Reconciler

	changed chan struct{}

	mu      sync.Mutex
	runners map[string]*runner
	// loaded is the description of the running sources and the node labels setting last
	// reported as loaded.
	loaded string
	// nodeLabels is the node labels setting last applied.
	nodeLabels *config.NodeLabels
}

// NewManager registers the manager's handlers on the informers; the informers must be
// started and synced before Run.
func NewManager(opts Options, configMaps coreinformers.ConfigMapInformer, nodes coreinformers.NodeInformer, hyperNodes topologyinformers.HyperNodeInformer) (*Manager, error) {
	opts.Timing = opts.Timing.withDefaults()
	m := &Manager{
		opts:       opts,
		configMaps: configMaps.Lister(),
		reconciler: &Reconciler{client: opts.Client, lister: hyperNodes.Lister(), events: opts.Events},
		changed:    make(chan struct{}, 1),
		runners:    map[string]*runner{},
	}
	if _, err := configMaps.Informer().AddEventHandler(informerutil.Handlers(
		func(_, cm *v1.ConfigMap) {
			if cm.Name == opts.ConfigMap {
				m.configChanged()
			}
		},
		func(cm *v1.ConfigMap) {
			if cm.Name == opts.ConfigMap {
				m.configChanged()
			}
		})); err != nil {
		return nil, err
	}
	if _, err := nodes.Informer().AddEventHandler(informerutil.Handlers(
		func(old, n *v1.Node) { m.nodeChanged(old, n) },
		func(n *v1.Node) { m.nodeChanged(n, nil) })); err != nil {
		return nil, err
	}
	if _, err := hyperNodes.Informer().AddEventHandler(informerutil.Handlers(
		func(old, hn *topologyv1alpha1.HyperNode) { m.hyperNodeChanged(old, hn) },
		func(hn *topologyv1alpha1.HyperNode) { m.hyperNodeChanged(hn, nil) })); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Manager) configChanged() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// nodeChanged wakes the sources whose answer the change can alter.
func (m *Manager) nodeChanged(old, new *v1.Node) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.runners {
		if r.src.NodeChangeMatters(old, new) {
			r.wake()
		}
	}
}

// hyperNodeChanged wakes the source that owns a HyperNode someone else changed or deleted,
// so that it restores it. A deletion wakes every source: it frees a name that another source
// may want and found taken (a HyperNodeConflict, whose Event says to delete the HyperNode),
// and that source would otherwise wait for its interval. Status updates do not matter.
func (m *Manager) hyperNodeChanged(old, new *topologyv1alpha1.HyperNode) {
	var owner string
	switch {
	case new == nil:
		m.wakeAll()
		return
	case old == nil:
		owner = new.Labels[source.Label]
	default:
		if old.Generation == new.Generation && old.Labels[source.Label] == new.Labels[source.Label] &&
			old.Annotations[source.PathAnnotation] == new.Annotations[source.PathAnnotation] {
			return
		}
		owner = new.Labels[source.Label]
		if o := old.Labels[source.Label]; o != owner && o != "" {
			m.wakeSource(o)
		}
	}
	if owner != "" {
		m.wakeSource(owner)
	}
}

// wakeAll asks every running source for a rebuild from its last answer.
func (m *Manager) wakeAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.runners {
		r.wake()
	}
}

func (m *Manager) wakeSource(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.runners[name]; r != nil {
		r.wake()
	}
}

// Run applies the configuration whenever it changes, until ctx ends; then it stops every
// source.
func (m *Manager) Run(ctx context.Context) {
	defer m.stopAll()
	m.apply(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.changed:
			m.apply(ctx)
		}
	}
}

func (m *Manager) configRef() *v1.ObjectReference {
	ref := &v1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: m.opts.Namespace, Name: m.opts.ConfigMap}
	if cm, err := m.configMaps.ConfigMaps(m.opts.Namespace).Get(m.opts.ConfigMap); err == nil {
		ref.UID = cm.UID
	}
	return ref
}

// report logs a problem and records it as an Event on the ConfigMap.
func (m *Manager) report(ctx context.Context, eventType, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	logger := klog.FromContext(ctx)
	if eventType == v1.EventTypeWarning {
		logger.Error(nil, msg, "reason", reason)
	} else {
		logger.Info(msg, "reason", reason)
	}
	m.opts.Events.Eventf(m.configRef(), eventType, reason, "Discover", "%s", msg)
}

// apply reads the ConfigMap and makes the running sources match it.
func (m *Manager) apply(ctx context.Context) {
	cmName := m.opts.Namespace + "/" + m.opts.ConfigMap
	cm, err := m.configMaps.ConfigMaps(m.opts.Namespace).Get(m.opts.ConfigMap)
	if apierrors.IsNotFound(err) {
		m.report(ctx, v1.EventTypeWarning, ReasonConfigMissing,
			"the ConfigMap %s does not exist: no discovery source runs and node labels are off (HyperNode status is still kept up to date); create it with the key %s", cmName, config.Key)
		m.stopAll()
		m.configureNodeLabels(ctx, config.DefaultNodeLabels())
		return
	}
	if err != nil {
		m.report(ctx, v1.EventTypeWarning, ReasonInvalidConfig, "reading the ConfigMap %s: %v", cmName, err)
		return
	}
	text, ok := cm.Data[config.Key]
	if !ok {
		m.report(ctx, v1.EventTypeWarning, ReasonInvalidConfig,
			"the ConfigMap %s has no key %s; the discovery sources keep running as they were (%s)", cmName, config.Key, m.running())
		return
	}
	parsed, err := config.Parse(text, m.opts.Namespace)
	if err != nil {
		m.report(ctx, v1.EventTypeWarning, ReasonInvalidConfig, "%v; the discovery sources keep running as they were (%s)", err, m.running())
		return
	}
	for _, w := range parsed.Warnings {
		m.report(ctx, v1.EventTypeWarning, ReasonConfigWarning, "%s", w)
	}
	if len(parsed.NodeLabelsErrs) > 0 {
		m.report(ctx, v1.EventTypeWarning, ReasonInvalidConfig, "%s in ConfigMap %s: %s; node labels keep their previous setting (%s)",
			config.Key, cmName, parsed.NodeLabelsErrs.ToAggregate().Error(), m.nodeLabelsSetting())
	} else {
		m.configureNodeLabels(ctx, parsed.NodeLabels)
	}

	type wanted struct {
		entry config.Entry
		src   source.Source
		print string
	}
	want := map[string]wanted{}
	// keep are sources whose entry is wrong: a running one goes on with its previous
	// configuration rather than stopping because of a typo.
	keep := map[string]bool{}
	var problems []string
	for _, e := range parsed.Entries {
		errs := e.Errs
		factory, known := Factories[e.Source]
		switch {
		case len(errs) > 0:
		case !e.Enabled:
			continue
		case !known:
			errs = field.ErrorList{field.NotSupported(e.Path.Child("source"), e.Source, sortedNames(Factories))}
		case want[e.Source].src != nil:
			errs = field.ErrorList{field.Duplicate(e.Path.Child("source"), e.Source+" (the first enabled entry of this source is used)")}
		}
		var src source.Source
		if len(errs) == 0 {
			src, errs = factory(e, m.opts.Env)
		}
		if len(errs) > 0 {
			problems = append(problems, errs.ToAggregate().Error())
			if e.Source != "" && want[e.Source].src == nil {
				keep[e.Source] = true
			}
			continue
		}
		print, _ := json.Marshal(e.DiscoveryConfig)
		want[e.Source] = wanted{entry: e, src: src, print: string(print)}
		delete(keep, e.Source)
	}
	if len(problems) > 0 {
		m.report(ctx, v1.EventTypeWarning, ReasonInvalidConfig,
			"%s in ConfigMap %s: %s; a source with a problem is not started (a running one keeps its previous configuration), the others run",
			config.Key, cmName, strings.Join(problems, "; "))
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	for name, r := range m.runners {
		if w, ok := want[name]; ok && w.print == r.print {
			continue
		}
		if _, ok := want[name]; !ok && keep[name] {
			continue
		}
		r.stop()
		delete(m.runners, name)
		if _, ok := want[name]; !ok {
			m.reportStopped(ctx, name)
		}
	}
	for name, w := range want {
		if m.runners[name] != nil {
			continue
		}
		r := newRunner(m, w.src, w.print, w.entry.Interval.Duration)
		m.runners[name] = r
		if iw, ok := w.src.(interface{ InsecureWarning() *source.Warning }); ok {
			if warning := iw.InsecureWarning(); warning != nil {
				m.opts.Events.Eventf(m.configRef(), v1.EventTypeWarning, warning.Reason, "Discover", "%s", warning.Message)
				klog.FromContext(ctx).Info(warning.Message, "reason", warning.Reason)
			}
		}
		r.start(ctx)
	}
	if loaded := m.runningLocked() + "; node labels: " + m.nodeLabelsSettingLocked(); loaded != m.loaded {
		m.loaded = loaded
		msg := fmt.Sprintf("%s of ConfigMap %s loaded; discovery sources running: %s", config.Key, cmName, loaded)
		klog.FromContext(ctx).Info(msg)
		m.opts.Events.Eventf(m.configRef(), v1.EventTypeNormal, ReasonConfigLoaded, "Discover", "%s", msg)
	}
}

// configureNodeLabels hands a valid nodeLabels section to the publisher when it changed.
func (m *Manager) configureNodeLabels(ctx context.Context, cfg config.NodeLabels) {
	m.mu.Lock()
	unchanged := m.nodeLabels != nil && m.nodeLabels.Enabled == cfg.Enabled && m.nodeLabels.Rate() == cfg.Rate()
	m.nodeLabels = &cfg
	m.mu.Unlock()
	if !unchanged && m.opts.NodeLabels != nil {
		m.opts.NodeLabels.Configure(ctx, cfg)
	}
}

func (m *Manager) nodeLabelsSetting() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nodeLabelsSettingLocked()
}

func (m *Manager) nodeLabelsSettingLocked() string {
	if m.nodeLabels == nil {
		return "not configured yet: nothing is written"
	}
	return m.nodeLabels.String()
}

// reportStopped says that a source stopped and that its HyperNodes stay.
func (m *Manager) reportStopped(ctx context.Context, name string) {
	msg := fmt.Sprintf("the discovery source %s is disabled or no longer configured and has stopped; its HyperNodes are kept (remove them with: kubectl delete hypernodes -l %s=%s)", name, source.Label, name)
	klog.FromContext(ctx).Info(msg)
	m.opts.Events.Eventf(m.configRef(), v1.EventTypeNormal, ReasonSourceStopped, "Discover", "%s", msg)
}

func (m *Manager) running() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runningLocked()
}

func (m *Manager) runningLocked() string {
	if len(m.runners) == 0 {
		return "none"
	}
	names := make([]string, 0, len(m.runners))
	for n := range m.runners {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func (m *Manager) stopAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, r := range m.runners {
		r.stop()
		delete(m.runners, name)
	}
	m.loaded = ""
}

// Running returns the names of the running sources (for tests).
func (m *Manager) Running() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for n := range m.runners {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
