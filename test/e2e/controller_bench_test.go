package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/label"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/status"
)

// benchEnv turns TestControllerScale on; benchNodesEnv sets its node count (10,000).
const (
	benchEnv      = "HYPERNODE_CONTROLLER_BENCH"
	benchNodesEnv = "HYPERNODE_CONTROLLER_BENCH_NODES"
	// benchArgsEnv adds flags to the controller, e.g. "--kube-api-qps=500 --kube-api-burst=1000".
	benchArgsEnv = "HYPERNODE_CONTROLLER_BENCH_ARGS"
	benchLabel   = "bench.hypernode.dev/controller"
)

// TestControllerScale measures hypernode-controller on the real apiserver with 10,000
// labelled nodes (32 per leaf, 16 leaves per spine, 5 spines per core: 337 HyperNodes), in two
// scenarios: (A) the nodes exist and the controller starts: time from its informers' sync to
// every HyperNode created with a valid status; (B) the controller runs and the 10,000 nodes
// join at once: time from the first node created to the same state. Both count the API
// writes on HyperNodes (the apiserver's own request counters) and the controller's CPU and
// peak memory. The scheduler is stopped meanwhile, so that it does not compete for the CPU.
// It takes a few minutes: run it with HYPERNODE_CONTROLLER_BENCH=1 (see docs/benchmarks.md).
func TestControllerScale(t *testing.T) {
	if os.Getenv(benchEnv) == "" {
		t.Skipf("a benchmark, not a test: 10,000 nodes take minutes and assert nothing on time; set %s=1 to measure (docs/benchmarks.md)", benchEnv)
	}
	n := 10000
	if v := os.Getenv(benchNodesEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	ctx := t.Context()
	args := append([]string{"--status-delay=1s"}, strings.Fields(os.Getenv(benchArgsEnv))...)
	if err := cluster.StopScheduler(false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.StartScheduler(context.Background()); err != nil {
			t.Errorf("restarting the scheduler: %v", err)
		}
	})
	fast := restclient.CopyConfig(cluster.Admin)
	fast.QPS, fast.Burst = 5000, 5000
	kube, err := kubernetes.NewForConfig(fast)
	if err != nil {
		t.Fatal(err)
	}
	nodes := benchNodes(n)
	levels, _ := label.Preset("topograph")
	hns, _ := label.Type{Name: "topograph", Prefix: "topograph", Levels: levels}.Discover(nodes, nil)
	want := len(hns)
	t.Cleanup(func() { deleteBenchNodes(t, kube) })

	// A: the nodes exist; the controller starts.
	createBenchNodes(t, kube, nodes)
	var none []string
	startController(t, &none)
	if err := cluster.StopController(false); err != nil {
		t.Fatal(err)
	}
	setDiscoveryConfig(t, "networkTopologyDiscovery:\n- source: label\n  enabled: true\n  config:\n    presets: [topograph]\n")
	before := hyperNodeWrites(t)
	if err := cluster.StartController(ctx, args...); err != nil {
		t.Fatal(err)
	}
	done := waitConverged(t, want, n)
	synced := informersSynced(t)
	writesA := hyperNodeWrites(t).minus(before)
	cpuA, memA := processStats(t, cluster.Controller().Pid())
	t.Logf("controller flags %v", args)
	t.Logf("A: %d nodes, %d HyperNodes: converged %s after the informers synced; writes %s; controller CPU %s, peak RSS %d MiB",
		n, want, done.Sub(synced).Round(10*time.Millisecond), writesA, cpuA, memA>>10)

	// B: the controller runs with no node; the nodes join at once.
	if err := cluster.StopController(false); err != nil {
		t.Fatal(err)
	}
	deleteBenchNodes(t, kube)
	if err := runner.Clients.Topology.TopologyV1alpha1().HyperNodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.StartController(ctx, args...); err != nil {
		t.Fatal(err)
	}
	cpuStart, _ := processStats(t, cluster.Controller().Pid())
	before = hyperNodeWrites(t)
	start := time.Now()
	createBenchNodes(t, kube, nodes)
	created := time.Since(start)
	done = waitConverged(t, want, n)
	writesB := hyperNodeWrites(t).minus(before)
	cpuB, memB := processStats(t, cluster.Controller().Pid())
	t.Logf("B: %d nodes joining (created in %s): converged %s after the first node, %s after the last; writes %s; controller CPU %s, peak RSS %d MiB",
		n, created.Round(10*time.Millisecond), done.Sub(start).Round(10*time.Millisecond), done.Sub(start.Add(created)).Round(10*time.Millisecond),
		writesB, cpuB-cpuStart, memB>>10)
	// Leaves select their nodes by label and never change; a spine is updated when a batch
	// brings it new leaves. No write storm: 10,000 joining nodes are not 10,000 writes.
	if writesB.create != want || writesB.delete != 0 || writesB.status > 2*want || writesB.update > want {
		t.Errorf("B: writes %s, want %d creates, no delete, at most %d status and %d spec updates", writesB, want, 2*want, want)
	}
	if writesA.create != want || writesA.update+writesA.delete != 0 || writesA.status != want {
		t.Errorf("A: writes %s, want one create and one status update per HyperNode (%d)", writesA, want)
	}
}

func benchNodes(n int) []*v1.Node {
	nodes := make([]*v1.Node, 0, n)
	for i := range n {
		leaf, spine := i/32, i/(32*16)
		nodes = append(nodes, st.MakeNode().Name(fmt.Sprintf("bench-%05d", i)).Label(benchLabel, "true").
			Label("fabric.topograph.run/tier-2", fmt.Sprintf("core-%d", spine/5)).
			Label("fabric.topograph.run/tier-1", fmt.Sprintf("spine-%d", spine)).
			Label("fabric.topograph.run/tier-0", fmt.Sprintf("leaf-%d", leaf)).Obj())
	}
	return nodes
}

func createBenchNodes(t *testing.T, kube kubernetes.Interface, nodes []*v1.Node) {
	t.Helper()
	const workers = 32
	work := make(chan *v1.Node)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range workers {
		wg.Go(func() {
			for n := range work {
				if _, err := kube.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{}); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, n := range nodes {
		work <- n
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("creating nodes: %v", firstErr)
	}
}

func deleteBenchNodes(t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	if err := kube.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: benchLabel}); err != nil {
		t.Errorf("deleting the benchmark's nodes: %v", err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: benchLabel, Limit: 1})
		return err == nil && len(list.Items) == 0, nil
	})
	if err != nil {
		t.Errorf("the benchmark's nodes are not gone: %v", err)
	}
}

// waitConverged waits until the label source owns want HyperNodes, each with a valid status
// of its current generation and its nodes counted (the top ones sum to nodes), and returns
// when it saw that.
func waitConverged(t *testing.T, want, nodes int) time.Time {
	t.Helper()
	var seen, ready, counted int
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := runner.Clients.Topology.TopologyV1alpha1().HyperNodes().List(ctx, metav1.ListOptions{LabelSelector: source.Label + "=label"})
		if err != nil {
			return false, nil
		}
		seen, ready, counted = len(list.Items), 0, 0
		for _, hn := range list.Items {
			c := meta.FindStatusCondition(hn.Status.Conditions, status.ConditionValid)
			if c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == hn.Generation && hn.Status.NodeCount > 0 {
				ready++
			}
			if hn.Spec.Tier == 3 {
				counted += int(hn.Status.NodeCount)
			}
		}
		return seen == want && ready == want && counted == nodes, nil
	})
	if err != nil {
		t.Fatalf("not converged: %d HyperNodes, %d with a valid status, %d nodes counted at the top; want %d, %d, %d", seen, ready, counted, want, want, nodes)
	}
	return time.Now()
}

// informersSynced reads when the running controller's informers synced, from its log.
func informersSynced(t *testing.T) time.Time {
	t.Helper()
	lines := controllerLogLines(t, func(l string) bool { return strings.Contains(l, `"Informers synced"`) })
	if len(lines) == 0 {
		t.Fatal("the controller never logged that its informers synced")
	}
	last := lines[len(lines)-1] // klog header: Lmmdd hh:mm:ss.uuuuuu
	ts, err := time.ParseInLocation("0102 15:04:05.000000", last[1:21], time.Local)
	if err != nil {
		t.Fatalf("parsing %q: %v", last, err)
	}
	now := time.Now()
	return ts.AddDate(now.Year(), 0, 0)
}

// writes counts the apiserver's write requests on HyperNodes, by kind.
type writes struct{ create, update, delete, status int }

func (w writes) minus(o writes) writes {
	return writes{w.create - o.create, w.update - o.update, w.delete - o.delete, w.status - o.status}
}

func (w writes) String() string {
	return fmt.Sprintf("%d (%d creates, %d updates, %d deletes, %d status updates)", w.create+w.update+w.delete+w.status, w.create, w.update, w.delete, w.status)
}

func hyperNodeWrites(t *testing.T) writes {
	t.Helper()
	body, err := cluster.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var w writes
	scanner := bufio.NewScanner(strings.NewReader(string(body)))
	scanner.Buffer(make([]byte, 1<<20), 1<<22)
	for scanner.Scan() {
		line := scanner.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="hypernodes"`) {
			continue
		}
		fields := strings.Fields(line)
		count, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			continue
		}
		sub := strings.Contains(line, `subresource="status"`)
		switch {
		case strings.Contains(line, `verb="POST"`):
			w.create += int(count)
		case strings.Contains(line, `verb="PUT"`) && sub:
			w.status += int(count)
		case strings.Contains(line, `verb="PUT"`), strings.Contains(line, `verb="PATCH"`):
			w.update += int(count)
		case strings.Contains(line, `verb="DELETE"`):
			w.delete += int(count)
		}
	}
	return w
}

// processStats returns a process's CPU time so far and its peak resident memory in KiB.
func processStats(t *testing.T, pid int) (time.Duration, int) {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.Atoi(fields[11])
	stime, _ := strconv.Atoi(fields[12])
	cpu := time.Duration(utime+stime) * time.Second / 100
	statusText, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	var hwm int
	for _, line := range strings.Split(string(statusText), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			hwm, _ = strconv.Atoi(strings.Fields(line)[1])
		}
	}
	return cpu, hwm
}
