package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	schedinformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
	topologyinformers "github.com/hypernode-dev/hypernode-scheduler/pkg/client/informers/externalversions"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/localcluster"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins/gangpreemption"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// faultWatcher checks issue #45's invariants continuously, from the API alone: it is not the
// scheduler and shares none of its code but the hold record's parser. What it knows besides
// the API is what the harness did: the gangs it submitted (their constraint), the gangs it is
// deleting (completed, or restarted after a node failure), the HyperNodes it deleted and the
// faults it injected (faultWindow: what may explain an anomaly).
type faultWatcher struct {
	mu    sync.Mutex
	ns    string
	start time.Time
	now   func() time.Time // time.Now; a test's clock in unit tests
	// leafLabel and spineLabel are the node labels the topology is discovered from.
	leafLabel, spineLabel string

	gangs   map[string]*watchedGang // by PodGroup name
	pods    map[types.UID]*watchedPod
	nodes   map[string]*watchedNode
	binds   []time.Time                 // every bind seen, in order
	evicted map[types.UID][]metav1.Time // DisruptionTarget conditions seen (their transition times)
	evicts  []eviction
	holds   map[string]*podgroup.HoldRecord // by PodGroup name
	// holdChanges: each PodGroup's hold records as they changed (nil: removed); released: when
	// its HoldReleased Events came.
	holdChanges map[string][]holdChange
	released    map[string][]time.Time
	overlaps    map[[2]string]*holdOverlap // hold pairs sharing a node
	leaders     []leaderChange
	holder      string
	// deleting: HyperNodes the harness deleted (name to when).
	deleting map[string]time.Time
	faults   []faultWindow
	report   FaultChecks
	cancel   context.CancelFunc
}

type watchedGang struct {
	job          Job
	bound        map[string]string // pod name to node
	partialSince time.Time
	ran          bool // reached minMember once
	firstBind    time.Time
	ignored      bool // the harness is deleting it
}

type watchedPod struct {
	name, group, node string
	req               [3]int64 // GPUs, CPU millis, memory bytes
	priority          int32
}

type watchedNode struct {
	leaf, spine string
	alloc       [3]int64
	used        [3]int64
	binds       []nodeBind
	// overSince: when the bound pods' requests first exceeded the allocatable, and the pod
	// whose bind did it; overReported: that stretch was reported.
	overSince    time.Time
	overBy       string
	overReported bool
}

func (n *watchedNode) over() bool {
	return n.used[0] > n.alloc[0] || n.used[1] > n.alloc[1] || n.used[2] > n.alloc[2]
}

type nodeBind struct {
	at       time.Time
	priority int32
}

type eviction struct {
	pod      string
	node     string
	priority int32
	at       time.Time
}

type holdChange struct {
	at  time.Time
	rec *podgroup.HoldRecord
}

type leaderChange struct {
	at     time.Time
	holder string
}

// faultWindow is a stretch of time in which a fault explains an anomaly.
type faultWindow struct {
	kind     string
	from, to time.Time
}

// Limits of the checks.
const (
	// partialLimit: a gang bound below minMember for longer than this is a violation unless a
	// fault explains it; binding a 256-pod gang 64 calls at a time takes a few seconds.
	partialLimit = 15 * time.Second
	// overlapLimit: two hold records may share a node while the scheduler's coalesced
	// writes of a displacement land.
	overlapLimit = 10 * time.Second
	// overLimit: a node seen over its allocatable for longer than this is a violation. A
	// relist after an apiserver restart delivers a bind before the deletion that made room
	// for it, so an instant is not enough.
	overLimit = 5 * time.Second
	// evictionDeadline is GangPreemption's wait for victims: their grace period (30 s, the
	// default) plus victimSlack (a minute).
	evictionDeadline = 90 * time.Second
)

// FaultChecks are the invariants' results: Violations (target 0) and what faults explain.
type FaultChecks struct {
	Violations          []string `json:"violations"`
	Explained           []string `json:"explained"`
	LongestPartialSecs  float64  `json:"longestPartialSeconds"`
	LongestPartialGang  string   `json:"longestPartialGang"`
	PartialUnexplained  float64  `json:"longestUnexplainedPartialSeconds"`
	HardChecked         int      `json:"hardGangsChecked"`
	Evictions           int      `json:"evictions"`
	EvictedTwice        int      `json:"evictedTwice"`
	WastedEvictions     int      `json:"wastedEvictions"`
	WastedExplained     int      `json:"wastedEvictionsExplained"`
	HoldsSeen           int      `json:"holdsSeen"`
	HoldsLostAtFailover int      `json:"holdsLostAtFailover"`
	// HoldsMovedAfterFailover: holds whose first change after a failover was another domain.
	HoldsMovedAfterFailover int `json:"holdsMovedAfterFailover"`
	HyperNodeDeletes        int `json:"hyperNodeDeletesUnexplained"`
	Binds                   int `json:"binds"`
}

func newFaultWatcher(t testing.TB, c clients, ns, leafLabel, spineLabel string) *faultWatcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &faultWatcher{ns: ns, start: time.Now(), now: time.Now, leafLabel: leafLabel, spineLabel: spineLabel,
		gangs: map[string]*watchedGang{}, pods: map[types.UID]*watchedPod{}, nodes: map[string]*watchedNode{},
		evicted: map[types.UID][]metav1.Time{}, holds: map[string]*podgroup.HoldRecord{}, overlaps: map[[2]string]*holdOverlap{},
		holdChanges: map[string][]holdChange{}, released: map[string][]time.Time{},
		deleting: map[string]time.Time{}, cancel: cancel}
	kube := informers.NewSharedInformerFactory(c.kube, 0)
	inNs := informers.NewSharedInformerFactoryWithOptions(c.kube, 0, informers.WithNamespace(ns))
	system := informers.NewSharedInformerFactoryWithOptions(c.kube, 0, informers.WithNamespace(localcluster.SchedulerNamespace))
	sched := schedinformers.NewSharedInformerFactoryWithOptions(c.scheduling, 0, schedinformers.WithNamespace(ns))
	released := informers.NewSharedInformerFactoryWithOptions(c.kube, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "reason=" + gangpreemption.EventHoldReleased }))
	topo := topologyinformers.NewSharedInformerFactory(c.topology, 0)
	var regs []cache.InformerSynced
	add := func(inf cache.SharedIndexInformer, h cache.ResourceEventHandlerFuncs) {
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, reg.HasSynced)
	}
	add(kube.Core().V1().Nodes().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.node(obj.(*v1.Node)) }, UpdateFunc: func(_, obj any) { w.node(obj.(*v1.Node)) }})
	add(inNs.Core().V1().Pods().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.pod(obj.(*v1.Pod)) }, UpdateFunc: func(_, obj any) { w.pod(obj.(*v1.Pod)) },
		DeleteFunc: func(obj any) {
			if pod, ok := unwrap(obj).(*v1.Pod); ok {
				w.podGone(pod)
			}
		}})
	add(sched.Scheduling().V1alpha1().PodGroups().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.podGroup(obj.(*schedulingv1alpha1.PodGroup), false) },
		UpdateFunc: func(_, obj any) { w.podGroup(obj.(*schedulingv1alpha1.PodGroup), false) },
		DeleteFunc: func(obj any) {
			if pg, ok := unwrap(obj).(*schedulingv1alpha1.PodGroup); ok {
				w.podGroup(pg, true)
			}
		}})
	add(released.Core().V1().Events().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.holdReleased(obj.(*v1.Event)) }, UpdateFunc: func(_, obj any) { w.holdReleased(obj.(*v1.Event)) }})
	add(topo.Topology().V1alpha1().HyperNodes().Informer(), cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if hn, ok := unwrap(obj).(*topologyv1alpha1.HyperNode); ok {
				w.hyperNodeGone(hn.Name)
			}
		}})
	add(system.Coordination().V1().Leases().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.lease(obj.(*coordinationv1.Lease)) }, UpdateFunc: func(_, obj any) { w.lease(obj.(*coordinationv1.Lease)) }})
	for _, f := range []interface{ Start(<-chan struct{}) }{kube, inNs, system, sched, released, topo} {
		f.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), regs...) {
		t.Fatal("the fault watcher's informers did not sync")
	}
	go w.tick(ctx)
	t.Cleanup(cancel)
	return w
}

func unwrap(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

// violation records a broken invariant, or an explained anomaly when a fault window covers
// [from, to].
func (w *faultWatcher) violation(from, to time.Time, format string, args ...any) {
	msg := fmt.Sprintf("%.1fs: ", to.Sub(w.start).Seconds()) + fmt.Sprintf(format, args...)
	if f := w.explainedLocked(from, to); f != "" {
		w.report.Explained = append(w.report.Explained, msg+" (during "+f+")")
		return
	}
	w.report.Violations = append(w.report.Violations, msg)
}

func (w *faultWatcher) explainedLocked(from, to time.Time) string {
	for _, f := range w.faults {
		if !f.from.After(to) && !f.to.Before(from) {
			return f.kind
		}
	}
	return ""
}

// expectGang registers a gang the harness creates; ignoreGang one it is about to delete.
func (w *faultWatcher) expectGang(job Job) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if job.Mode != "" {
		w.gangs[job.Name] = &watchedGang{job: job, bound: map[string]string{}}
	}
}

func (w *faultWatcher) ignoreGang(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if g := w.gangs[name]; g != nil {
		g.ignored = true
	}
}

// fault records a fault and how long it may explain anomalies.
func (w *faultWatcher) fault(kind string, from, to time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.faults = append(w.faults, faultWindow{kind: kind, from: from, to: to})
}

// deletingHyperNode tells the watcher the harness deletes the HyperNode.
func (w *faultWatcher) deletingHyperNode(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deleting[name] = w.now()
}

func (w *faultWatcher) node(n *v1.Node) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wn := w.nodes[n.Name]
	if wn == nil {
		wn = &watchedNode{}
		w.nodes[n.Name] = wn
	}
	wn.leaf, wn.spine = n.Labels[w.leafLabel], n.Labels[w.spineLabel]
	wn.alloc = resources(n.Status.Allocatable)
}

func resources(l v1.ResourceList) [3]int64 {
	return [3]int64{l.Name(GPU, "").Value(), l.Cpu().MilliValue(), l.Memory().Value()}
}

func (w *faultWatcher) pod(pod *v1.Pod) {
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range pod.Status.Conditions {
		if c.Type != v1.DisruptionTarget || c.Status != v1.ConditionTrue || c.Reason != v1.PodReasonPreemptionByScheduler {
			continue
		}
		// Each eviction sets the condition anew: a second transition time is a second eviction.
		seen := w.evicted[pod.UID]
		if slices.ContainsFunc(seen, func(t metav1.Time) bool { return t.Equal(&c.LastTransitionTime) }) {
			continue
		}
		w.evicted[pod.UID] = append(seen, c.LastTransitionTime)
		if len(seen) == 0 {
			w.evicts = append(w.evicts, eviction{pod: pod.Name, node: pod.Spec.NodeName, priority: ptr.Deref(pod.Spec.Priority, 0), at: now})
			w.report.Evictions++
			continue
		}
		w.report.EvictedTwice++
		w.violation(now, now, "pod %s evicted again (DisruptionTarget set at %v, before at %v)", pod.Name, c.LastTransitionTime, seen)
	}
	wp := w.pods[pod.UID]
	if wp == nil {
		var req [3]int64
		for _, c := range pod.Spec.Containers {
			r := resources(c.Resources.Requests)
			for i := range req {
				req[i] += r[i]
			}
		}
		wp = &watchedPod{name: pod.Name, group: pod.Labels[util.PodGroupLabel], req: req, priority: ptr.Deref(pod.Spec.Priority, 0)}
		w.pods[pod.UID] = wp
	}
	if pod.Spec.NodeName == "" || wp.node != "" {
		return
	}
	wp.node = pod.Spec.NodeName
	w.binds = append(w.binds, now)
	w.report.Binds++
	if n := w.nodes[wp.node]; n != nil {
		n.binds = append(n.binds, nodeBind{at: now, priority: wp.priority})
		for i := range n.used {
			n.used[i] += wp.req[i]
		}
		if n.over() && n.overSince.IsZero() {
			n.overSince, n.overBy = now, pod.Name
		}
	}
	if g := w.gangs[wp.group]; g != nil {
		g.bound[pod.Name] = wp.node
		if g.firstBind.IsZero() {
			g.firstBind = now
		}
		w.gangChangedLocked(wp.group, g, now)
	}
}

func (w *faultWatcher) podGone(pod *v1.Pod) {
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	wp := w.pods[pod.UID]
	delete(w.pods, pod.UID)
	if wp == nil || wp.node == "" {
		return
	}
	if n := w.nodes[wp.node]; n != nil {
		for i := range n.used {
			n.used[i] -= wp.req[i]
		}
		if !n.over() {
			n.overSince, n.overReported = time.Time{}, false
		}
	}
	if g := w.gangs[wp.group]; g != nil {
		delete(g.bound, pod.Name)
		w.gangChangedLocked(wp.group, g, now)
	}
}

// gangChangedLocked follows a gang's bound count: the time it spends between 0 and minMember,
// and, when it first reaches minMember, the tier it spans.
func (w *faultWatcher) gangChangedLocked(name string, g *watchedGang, now time.Time) {
	n := len(g.bound)
	partial := n > 0 && n < g.job.Pods && !g.ignored
	switch {
	case partial && g.partialSince.IsZero():
		g.partialSince = now
	case !partial && !g.partialSince.IsZero():
		w.partialEndedLocked(name, g, now)
	}
	if n >= g.job.Pods && !g.ran {
		g.ran = true
		w.checkTierLocked(name, g, now)
	}
}

func (w *faultWatcher) partialEndedLocked(name string, g *watchedGang, now time.Time) {
	d := now.Sub(g.partialSince)
	if d.Seconds() > w.report.LongestPartialSecs {
		w.report.LongestPartialSecs, w.report.LongestPartialGang = d.Seconds(), name
	}
	if d > partialLimit {
		w.violation(g.partialSince, now, "gang %s bound below minMember (%d) for %.1fs", name, g.job.Pods, d.Seconds())
	}
	if w.explainedLocked(g.partialSince, now) == "" {
		w.report.PartialUnexplained = max(w.report.PartialUnexplained, d.Seconds())
	}
	g.partialSince = time.Time{}
}

// checkTierLocked checks a hard gang's span against its allowed tier, on the node labels the
// topology is discovered from.
func (w *faultWatcher) checkTierLocked(name string, g *watchedGang, now time.Time) {
	if g.job.Mode != "hard" {
		return
	}
	w.report.HardChecked++
	leaves, spines := map[string]bool{}, map[string]bool{}
	for _, node := range g.bound {
		if n := w.nodes[node]; n != nil {
			leaves[n.leaf], spines[n.spine] = true, true
		}
	}
	tier := 3
	switch {
	case len(leaves) == 1:
		tier = 1
	case len(spines) == 1:
		tier = 2
	}
	if tier > g.job.Tier {
		w.violation(g.firstBind, now, "hard gang %s (tier %d allowed) spans tier %d: %d leaves, %d spines", name, g.job.Tier, tier, len(leaves), len(spines))
	}
}
