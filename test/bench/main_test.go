// Package bench is the end-to-end benchmark harness (issue #8): an in-process kube-apiserver
// with embedded etcd (test/util.ControlPlane), and kube-scheduler as a separate process, ours
// (Gang + NetworkTopologyAware) or vanilla (the 1.37.1 default profile), so that its peak
// memory (VmHWM) and CPU time are its own.
//
// Scenarios (each a test): throughput, big gang (also in pipeline stages: sub-groups),
// placement quality over a replayed job trace,
// a comparison with exhaustive search on a 16-node instance, plain pods next to a blocked
// gang, issue #18's plain pods, mixed load and restart with a backlog (load_test.go), and
// issue #40's churn of a shared GPU fabric with and without holds (churn_test.go). With -short (make test) they
// run on a few hundred nodes; `make bench` (hack/bench.sh) runs them at full size with
// -bench.full. Results go to results.json and summary.md in -bench.out.
//
// The scheduler processes are, by default, this test binary re-executed in scheduler mode
// (HYPERNODE_BENCH_SCHEDULER=ours|vanilla), so the short variant needs no other binary;
// hack/bench.sh passes bin/kube-scheduler and an upstream kube-scheduler built from the same
// module instead (-bench.ours, -bench.vanilla).
package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"testing"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// schedulerModeEnv makes this test binary run as a kube-scheduler instead of the tests.
const schedulerModeEnv = "HYPERNODE_BENCH_SCHEDULER"

var (
	flagFull    = flag.Bool("bench.full", false, "run the full-size scenarios (ignored with -short)")
	flagOut     = flag.String("bench.out", "", "directory for results.json, summary.md and scheduler logs (default: a temporary directory)")
	flagOurs    = flag.String("bench.ours", "", "kube-scheduler binary with this project's plugins (default: this test binary in scheduler mode)")
	flagVanilla = flag.String("bench.vanilla", "", "upstream kube-scheduler binary (default: this test binary in scheduler mode without this project's plugins)")
	flagRepeat  = flag.Int("bench.repeat", 0, "runs of each scheduler in the throughput and big-gang scenarios (default: 3 full, 1 short)")
)

// controlPlane is shared by every scenario; each removes its nodes and HyperNodes at the end.
var controlPlane *util.ControlPlane

func TestMain(m *testing.M) {
	switch os.Getenv(schedulerModeEnv) {
	case "ours":
		// Exactly cmd/kube-scheduler's main.
		if err := plugins.SetFeatureDefaults(); err != nil {
			panic(err)
		}
		stop := startCPUProfile()
		code := cli.Run(app.NewSchedulerCommand(plugins.RegistryOptions()...))
		stop()
		os.Exit(code)
	case "vanilla":
		// Exactly upstream's cmd/kube-scheduler main (and, like ours, the optional CPU profile).
		stop := startCPUProfile()
		code := cli.Run(app.NewSchedulerCommand())
		stop()
		os.Exit(code)
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	flag.Parse()
	tb := &util.MainTB{Verbose: os.Getenv("HYPERNODE_TEST_VERBOSE") != ""}
	defer tb.RunCleanups()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// No node lifecycle controller runs: without TaintNodesByCondition every node would need a
	// second write to drop its not-ready taint (30,000 writes for the big-gang cluster).
	// The native pod groups' API is served for issue #43's scenario (native_test.go); the
	// schedulers of the other scenarios run with the default gates.
	cp, err := util.StartControlPlane(ctx, tb, "--disable-admission-plugins=TaintNodesByCondition",
		"--feature-gates="+nativeGates, "--runtime-config=scheduling.k8s.io/v1beta1=true")
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the control plane: %v\n", err)
		return 1
	}
	defer cp.Stop()
	controlPlane = cp
	return m.Run()
}

// full reports whether the full-size scenarios run.
func full() bool { return *flagFull && !testing.Short() }

func repeats() int {
	if *flagRepeat > 0 {
		return *flagRepeat
	}
	if full() {
		return 3
	}
	return 1
}

// startCPUProfile writes the scheduler process's CPU profile to $BENCH_CPUPROFILE.<pid> when
// that variable is set (startScheduler passes the environment on), so that a run can be
// profiled without changing the binary: both kinds, in this binary's scheduler mode only (not
// the -bench.ours / -bench.vanilla binaries of hack/bench.sh); startScheduler logs which run
// each pid is. It returns the function that stops and flushes it.
func startCPUProfile() func() {
	prefix := os.Getenv("BENCH_CPUPROFILE")
	if prefix == "" {
		return func() {}
	}
	f, err := os.Create(fmt.Sprintf("%s.%d", prefix, os.Getpid()))
	if err != nil {
		panic(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		panic(err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}
