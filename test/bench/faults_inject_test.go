package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/localcluster"
)

// The faults of issue #45, each as a real cluster has it:
//   - leader-kill: the leading scheduler gets SIGKILL; a new replica starts at once (as the
//     Deployment's ReplicaSet would), so that two run again; the standby takes over when the
//     Lease expires.
//   - apiserver-restart: kube-apiserver is killed (SIGKILL: a crash, an OOM kill, a host
//     reboot) and starts again; etcd keeps the data.
//   - node-failure: what the node lifecycle controller does to a node whose kubelet stops: kwok
//     stops simulating it, its Ready condition turns Unknown, it gets the unreachable taints
//     (NoSchedule, NoExecute) and its pods are deleted (their toleration, compressed to 0);
//     nodeDownFor later it comes back. The harness restarts the jobs that lost pods, as their
//     operators would (the whole gang again, under a new name).
//   - leaf-rewire: two nodes of a leaf are cabled to another leaf (their leaf and spine labels
//     change; the controller's label discovery moves them).
//   - hypernode-recreate: a leaf HyperNode is deleted; the controller creates it again.
//   - controller-kill: a node's labels change and, 0.2-1.5 s later (the label source rebuilds
//     a second after node changes), the leading hypernode-controller gets SIGKILL; a new one
//     starts.
const (
	faultLeaderKill     = "leader-kill"
	faultAPIServer      = "apiserver-restart"
	faultNodeFailure    = "node-failure"
	faultRewire         = "leaf-rewire"
	faultRecreate       = "hypernode-recreate"
	faultControllerKill = "controller-kill"
)

var faultKinds = []string{faultLeaderKill, faultAPIServer, faultNodeFailure, faultRewire, faultRecreate, faultControllerKill}

// Fault is one injected fault: planned (AtSeconds, Kind, Target from the seed) and what
// happened (Detail; Error if injecting failed).
type Fault struct {
	AtSeconds float64 `json:"atSeconds"` // planned; InjectedSeconds, when it began
	Injected  float64 `json:"injectedSeconds"`
	Kind      string  `json:"kind"`
	Target    int     `json:"target"` // a seeded choice: the node, leaf or delay, by kind
	Detail    string  `json:"detail,omitempty"`
	Error     string  `json:"error,omitempty"`
	at        time.Time
}

// faultSchedule draws the faults: each kind every period (jittered by up to a fifth), from
// its offset after `from` until `until`, in time order.
func faultSchedule(seed uint64, from, until time.Duration, every map[string]time.Duration) []Fault {
	rng := rand.New(rand.NewPCG(seed, 45))
	var out []Fault
	for i, kind := range faultKinds {
		period := every[kind]
		if period == 0 {
			continue
		}
		// Kinds start staggered so that two seldom coincide.
		at := from + period*time.Duration(i+1)/time.Duration(len(faultKinds)+1)
		for at < until {
			out = append(out, Fault{AtSeconds: at.Seconds(), Kind: kind, Target: rng.IntN(1 << 30)})
			jitter := time.Duration((rng.Float64() - 0.5) * 0.4 * float64(period))
			at += period + jitter
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].AtSeconds < out[b].AtSeconds })
	return out
}

// faultLabels are the node labels the fault run's topology is discovered from (top first).
var faultLabels = []string{"bench.hypernode.dev/core", "bench.hypernode.dev/spine", "bench.hypernode.dev/leaf"}

// injector applies the schedule to a local cluster, keeps two scheduler replicas running and
// tells the watcher and the job runner what it did.
type injector struct {
	t       testing.TB
	cl      *localcluster.Cluster
	c       clients
	tp      Topology
	ns      string
	w       *faultWatcher
	start   time.Time
	downFor time.Duration
	// lost receives the pods the node failures deleted (the runner restarts their jobs).
	lost chan []string

	mu        sync.Mutex
	faults    []Fault
	killed    map[*localcluster.Process]bool // processes the harness killed
	selfExits []string                       // scheduler processes that exited on their own: why
	pending   sync.WaitGroup                 // nodes coming back, hold checks
}

// run injects the faults at their times, and keeps two schedulers running, until ctx ends
// (the run's end). A fault that the ones before it delayed is injected late (its Fault says
// when); one begun is carried out to its end (a node brought back, a controller started
// again), also after ctx ends.
func (in *injector) run(ctx context.Context, schedule []Fault) {
	next := 0
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		in.keepReplicas(ctx)
		if ctx.Err() == nil && next < len(schedule) && time.Since(in.start).Seconds() >= schedule[next].AtSeconds {
			f := schedule[next]
			next++
			f.at = time.Now()
			f.Injected = f.at.Sub(in.start).Seconds()
			if err := in.inject(context.Background(), &f); err != nil {
				f.Error = err.Error()
				in.t.Logf("fault %s at %.0fs: %v", f.Kind, f.AtSeconds, err)
			}
			in.t.Logf("fault %s at %.1fs: %s", f.Kind, f.at.Sub(in.start).Seconds(), f.Detail)
			in.mu.Lock()
			in.faults = append(in.faults, f)
			in.mu.Unlock()
			continue
		}
		select {
		case <-ctx.Done():
			in.pending.Wait()
			return
		case <-tick.C:
		}
	}
}

// keepReplicas starts a scheduler when fewer than two run, as a ReplicaSet would, and counts
// the exits the harness did not cause.
func (in *injector) keepReplicas(ctx context.Context) {
	running := in.cl.RunningSchedulers()
	if len(running) >= 2 || ctx.Err() != nil {
		return
	}
	in.mu.Lock()
	for _, p := range in.cl.SchedulerProcesses() {
		if exited, err := p.Exited(); exited && !in.killed[p] {
			in.killed[p] = true // counted once
			why := "crashed"
			if strings.Contains(tail(p.LogPath, 5), "Leaderelection lost") {
				why = "lost its Lease"
			}
			in.selfExits = append(in.selfExits, p.Name+": "+why)
			in.t.Logf("scheduler %s exited on its own (%v, %s): see %s", p.Name, err, why, p.LogPath)
		}
	}
	in.mu.Unlock()
	if _, err := in.cl.StartSchedulerReplica(ctx); err != nil && ctx.Err() == nil {
		in.t.Logf("starting a scheduler replica: %v", err)
	}
}

func (in *injector) inject(ctx context.Context, f *Fault) error {
	switch f.Kind {
	case faultLeaderKill:
		return in.killLeader(ctx, f)
	case faultAPIServer:
		begin := time.Now()
		err := in.cl.RestartAPIServer(ctx, true)
		f.Detail = fmt.Sprintf("down %.1fs", time.Since(begin).Seconds())
		in.w.fault(f.Kind, begin, time.Now().Add(30*time.Second))
		return err
	case faultNodeFailure:
		return in.failNode(ctx, f)
	case faultRewire:
		return in.rewire(ctx, f, 2)
	case faultRecreate:
		return in.recreate(ctx, f)
	case faultControllerKill:
		if err := in.rewire(ctx, f, 1); err != nil {
			return err
		}
		time.Sleep(time.Duration(200+f.Target%1300) * time.Millisecond) // the seeded moment of the kill
		in.mu.Lock()
		in.killed[in.cl.Controller()] = true
		in.mu.Unlock()
		if err := in.cl.StopController(true); err != nil {
			return err
		}
		f.Detail += "; controller killed"
		// A new one starts at once and leads once the Lease expires: in the background, so
		// that the faults after it keep their times.
		in.pending.Add(1)
		go func() {
			defer in.pending.Done()
			begin := time.Now()
			if err := in.cl.StartController(context.Background()); err != nil {
				in.t.Errorf("starting the controller again: %v", err)
				return
			}
			in.t.Logf("a new controller led %.1fs after the kill", time.Since(begin).Seconds())
		}()
		return nil
	}
	return fmt.Errorf("unknown fault %q", f.Kind)
}

// killLeader kills the leading scheduler, starts its replacement, and checks a minute later
// that the holds of the gangs still waiting were kept.
func (in *injector) killLeader(ctx context.Context, f *Fault) error {
	var leader *localcluster.Process
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		leader = in.cl.LeadingScheduler()
		return leader != nil, nil
	})
	if err != nil {
		return fmt.Errorf("no scheduler leads: %w", err)
	}
	holds := in.w.holdsNow()
	in.mu.Lock()
	in.killed[leader] = true
	in.mu.Unlock()
	killed := time.Now()
	if err := leader.Kill(); err != nil {
		return err
	}
	f.Detail = fmt.Sprintf("killed %s (pid %d) holding %d holds", leader.Name, leader.Pid(), len(holds))
	// The Lease's expiry (15 s), the standby's next try (2 s), its first cycles.
	in.w.fault(f.Kind, killed, killed.Add(45*time.Second))
	in.pending.Add(1)
	time.AfterFunc(time.Minute, func() {
		defer in.pending.Done()
		in.w.checkHoldsKept(holds, killed)
	})
	return nil
}

// failNode fails a node as the node lifecycle controller would and brings it back later: a
// seeded choice among the nodes running pods (any node when none does).
func (in *injector) failNode(ctx context.Context, f *Fault) error {
	name := in.tp.nodeName(f.Target % in.tp.Nodes)
	if busy := in.w.busyNodes(); len(busy) > 0 {
		name = busy[f.Target%len(busy)]
	}
	begin := time.Now()
	in.w.fault(f.Kind, begin, begin.Add(in.downFor+30*time.Second))
	err := retryAPI(ctx, func() error {
		n, err := in.c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Annotations[localcluster.KwokNodeAnnotation] = "down" // kwok lets go of it
		n.Spec.Taints = append(n.Spec.Taints,
			v1.Taint{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoSchedule, TimeAdded: ptr.To(metav1.Now())},
			v1.Taint{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute, TimeAdded: ptr.To(metav1.Now())})
		if n, err = in.c.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
		for i, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				n.Status.Conditions[i] = v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionUnknown, Reason: "NodeStatusUnknown",
					Message: "Kubelet stopped posting node status (fault run).", LastHeartbeatTime: c.LastHeartbeatTime, LastTransitionTime: metav1.Now()}
			}
		}
		_, err = in.c.kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	var names []string
	err = retryAPI(ctx, func() error {
		pods, err := in.c.kube.CoreV1().Pods(in.ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
		if err != nil {
			return err
		}
		names = names[:0]
		for _, p := range pods.Items {
			names = append(names, p.Name)
		}
		return parallel(len(names), func(i int) error {
			return ignoreNotFound(in.c.kube.CoreV1().Pods(in.ns).Delete(ctx, names[i], metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
		})
	})
	f.Detail = fmt.Sprintf("%s down with %d pods", name, len(names))
	in.lost <- names
	if err != nil {
		return err
	}
	in.pending.Add(1)
	time.AfterFunc(in.downFor, func() {
		defer in.pending.Done()
		if err := in.restoreNode(context.Background(), name); err != nil {
			in.t.Logf("node %s did not come back: %v", name, err)
		}
	})
	return nil
}

func (in *injector) restoreNode(ctx context.Context, name string) error {
	return retryAPI(ctx, func() error {
		n, err := in.c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Annotations[localcluster.KwokNodeAnnotation] = "fake" // kwok marks it Ready again
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == v1.TaintNodeUnreachable })
		_, err = in.c.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// rewire moves count nodes of a seeded leaf to another seeded leaf (labels only: the
// controller's discovery does the rest).
func (in *injector) rewire(ctx context.Context, f *Fault, count int) error {
	from := f.Target % in.tp.leaves()
	to := (from + 1 + (f.Target/in.tp.leaves())%(in.tp.leaves()-1)) % in.tp.leaves()
	begin := time.Now()
	in.w.fault(faultRewire, begin.Add(-5*time.Second), begin.Add(30*time.Second))
	var moved []string
	err := retryAPI(ctx, func() error {
		nodes, err := in.c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: faultLabels[2] + "=" + in.tp.leafName(from)})
		if err != nil {
			return err
		}
		sort.Slice(nodes.Items, func(a, b int) bool { return nodes.Items[a].Name < nodes.Items[b].Name })
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": faultNodeLabels(in.tp, to)}})
		for _, n := range nodes.Items[:min(count, len(nodes.Items))] {
			if _, err := in.c.kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				return err
			}
			moved = append(moved, n.Name)
		}
		return nil
	})
	if err != nil {
		return err
	}
	f.Detail = fmt.Sprintf("%v moved from %s to %s", moved, in.tp.leafName(from), in.tp.leafName(to))
	return nil
}

// recreate deletes a seeded leaf HyperNode and measures until the controller has it again.
func (in *injector) recreate(ctx context.Context, f *Fault) error {
	var name string
	err := retryAPI(ctx, func() error {
		list, err := in.c.topology.TopologyV1alpha1().HyperNodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var leaves []string
		for _, hn := range list.Items {
			if hn.Spec.Tier == 1 {
				leaves = append(leaves, hn.Name)
			}
		}
		if len(leaves) == 0 {
			return fmt.Errorf("no leaf HyperNode")
		}
		sort.Strings(leaves)
		name = leaves[f.Target%len(leaves)]
		in.w.deletingHyperNode(name)
		return in.c.topology.TopologyV1alpha1().HyperNodes().Delete(ctx, name, metav1.DeleteOptions{})
	})
	if err != nil {
		return err
	}
	begin := time.Now()
	in.w.fault(f.Kind, begin, begin.Add(30*time.Second))
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := in.c.topology.TopologyV1alpha1().HyperNodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil, nil
	})
	f.Detail = fmt.Sprintf("%s recreated by the controller %.1fs later", name, time.Since(begin).Seconds())
	return err
}

// faultNodeLabels are the topology labels of a node in leaf l.
func faultNodeLabels(tp Topology, l int) map[string]string {
	return map[string]string{faultLabels[0]: "core", faultLabels[1]: tp.spineName(tp.spineOf(l)), faultLabels[2]: tp.leafName(l)}
}

// transient reports an error worth retrying while the apiserver restarts: every error that is
// not an answer of the API (a transport error: refused, reset, EOF, a body cut short), and the
// answers that say "later".
func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	return apierrors.IsConflict(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsTooManyRequests(err)
}

// retryAPI retries f while the API is unavailable (an apiserver restart), for up to two
// minutes; other errors end it.
func retryAPI(ctx context.Context, f func() error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		last = f()
		if last == nil {
			return true, nil
		}
		if transient(last) {
			return false, nil
		}
		return false, last
	})
	if last != nil {
		return last
	}
	return err
}
