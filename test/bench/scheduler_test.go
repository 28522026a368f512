package bench

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/plugins"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// Kind names a scheduler configuration of the benchmark.
type Kind string

const (
	// OursBinPack and OursLeastWaste are manifests/scheduler/config.yaml (Gang and
	// NetworkTopologyAware in the hypernode-scheduler profile) with GPUs weighted in the
	// HyperNode bin-pack score and the given candidate strategy.
	OursBinPack    Kind = "ours-BinPack"
	OursLeastWaste Kind = "ours-LeastWaste"
	// OursNoHolds and OursHolds are OursBinPack with Gang's holds of waiting gangs off
	// (hold.waitSeconds 0) and on after churnHoldWaitSeconds: the churn scenario's pair
	// (churn_test.go); Gang's other args are the shipped ones.
	OursNoHolds Kind = "ours-noHolds"
	OursHolds   Kind = "ours-holds"
	// Vanilla is kube-scheduler 1.37.1's default profile (no out-of-tree plugin).
	Vanilla Kind = "vanilla"
)

func (k Kind) ours() bool { return k != Vanilla && k != VanillaTAS }

// native reports whether the kind schedules Kubernetes' own pod groups: its scheduler runs
// with their gates (nativeGates) and its gangs are native PodGroups.
func (k Kind) native() bool { return k == OursNative || k == VanillaTAS }

func (k Kind) schedulerName() string {
	if k.ours() {
		return plugins.SchedulerName
	}
	return "default-scheduler"
}

// oursProfileEnv, for diagnosis, changes what ours runs (docs/benchmarks.md): "default-plugins"
// runs kube-scheduler's default profile, none of this project's plugins, in ours' binary and
// under ours' scheduler name (what ours costs beyond the binary, and the noise between two
// runs of the same plugins); "no-normal-pod-score" turns NetworkTopologyAware's normal-pod
// score off.
const oursProfileEnv = "BENCH_OURS_PROFILE"

// clientRateEnv, for diagnosis, sets both kinds' client rate as "QPS/BURST" (for example
// kube-scheduler's default "50/100") instead of the shipped config's.
const clientRateEnv = "BENCH_CLIENT_RATE"

// schedulerConfig returns the KubeSchedulerConfiguration of the kind. Both kinds use the same
// client rate (manifests/scheduler/config.yaml's, or $BENCH_CLIENT_RATE) and no leader election.
func schedulerConfig(k Kind) (string, error) {
	config, err := kindConfig(k)
	if err != nil || os.Getenv(clientRateEnv) == "" {
		return config, err
	}
	var qps, burst int
	if _, err := fmt.Sscanf(os.Getenv(clientRateEnv), "%d/%d", &qps, &burst); err != nil || qps <= 0 || burst <= 0 {
		return "", fmt.Errorf("%s=%q: want QPS/BURST, two positive integers", clientRateEnv, os.Getenv(clientRateEnv))
	}
	cfg := map[string]any{}
	if err := yaml.Unmarshal([]byte(config), &cfg); err != nil {
		return "", err
	}
	connection := cfg["clientConnection"].(map[string]any)
	connection["qps"], connection["burst"] = qps, burst
	out, err := yaml.Marshal(cfg)
	return string(out), err
}

func kindConfig(k Kind) (string, error) {
	if k == OursNative {
		k = OursBinPack // the same configuration; the gates differ (startScheduler)
	}
	if !k.ours() {
		return defaultProfileConfig(nil)
	}
	topologyArgs := map[string]any{
		"candidateScoringStrategy": k.candidateStrategy(),
		"hyperNodeBinPack":         map[string]any{"cpu": 1, "memory": 1, "resources": map[string]any{string(GPU): 2}},
	}
	switch profile := os.Getenv(oursProfileEnv); profile {
	case "":
	case "default-plugins":
		return defaultProfileConfig([]any{map[string]any{"schedulerName": plugins.SchedulerName}})
	case "no-normal-pod-score":
		topologyArgs["normalPod"] = map[string]any{"enable": false}
	default:
		return "", fmt.Errorf("%s=%q: want default-plugins or no-normal-pod-score", oursProfileEnv, profile)
	}
	args := map[string]map[string]any{"NetworkTopologyAware": topologyArgs}
	gang, err := k.gangArgs()
	if err != nil {
		return "", err
	}
	if gang != nil {
		args["Gang"] = gang
	}
	return util.SchedulerConfig(controlPlane, args)
}

// candidateStrategy is NetworkTopologyAware's candidateScoringStrategy of an ours kind.
func (k Kind) candidateStrategy() string {
	if k == OursNoHolds || k == OursHolds {
		return "BinPack"
	}
	return strings.TrimPrefix(string(k), "ours-")
}

// gangArgs are, for the hold kinds, the shipped Gang args with hold.waitSeconds set; nil for
// the other kinds, which keep the shipped args as they are.
func (k Kind) gangArgs() (map[string]any, error) {
	wait, ok := map[Kind]int64{OursNoHolds: 0, OursHolds: churnHoldWaitSeconds()}[k]
	if !ok {
		return nil, nil
	}
	shipped, err := util.SchedulerConfig(controlPlane, nil)
	if err != nil {
		return nil, err
	}
	var cfg struct {
		Profiles []struct {
			PluginConfig []struct {
				Name string         `json:"name"`
				Args map[string]any `json:"args"`
			} `json:"pluginConfig"`
		} `json:"profiles"`
	}
	if err := yaml.Unmarshal([]byte(shipped), &cfg); err != nil {
		return nil, err
	}
	args := map[string]any{}
	for _, pc := range cfg.Profiles[0].PluginConfig {
		if pc.Name == "Gang" && pc.Args != nil {
			args = pc.Args
		}
	}
	hold, _ := args["hold"].(map[string]any)
	if hold == nil {
		hold = map[string]any{}
	}
	hold["waitSeconds"] = wait
	args["hold"] = hold
	return args, nil
}

// defaultProfileConfig is a configuration of kube-scheduler's default plugins; profiles nil is
// upstream's default-scheduler profile.
func defaultProfileConfig(profiles []any) (string, error) {
	connection, err := util.SchedulerClientConnection(controlPlane)
	if err != nil {
		return "", err
	}
	cfg := map[string]any{
		"apiVersion":       "kubescheduler.config.k8s.io/v1",
		"kind":             "KubeSchedulerConfiguration",
		"leaderElection":   map[string]any{"leaderElect": false},
		"clientConnection": connection,
	}
	if profiles != nil {
		cfg["profiles"] = profiles
	}
	out, err := yaml.Marshal(cfg)
	return string(out), err
}

// schedProcess is a kube-scheduler running as a child process.
type schedProcess struct {
	kind    Kind
	cmd     *exec.Cmd
	logPath string
	started time.Time
	done    chan error
}

// procStats is what the kernel says about the scheduler process when it ends its run.
type procStats struct {
	PeakRSSMiB float64 `json:"peakRSSMiB"` // VmHWM
	CPUSeconds float64 `json:"cpuSeconds"` // user + system
}

// startScheduler starts a scheduler of the kind; its log goes to <out>/logs/<name>.log.
func startScheduler(t testing.TB, k Kind, name string) *schedProcess {
	t.Helper()
	config, err := schedulerConfig(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(outDir(t), "logs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	configPath := filepath.Join(dir, name+".config.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	binary, env := *flagOurs, ""
	if !k.ours() {
		binary = *flagVanilla
	}
	if binary == "" {
		binary = os.Args[0]
		env = schedulerModeEnv + "=ours"
		if !k.ours() {
			env = schedulerModeEnv + "=vanilla"
		}
	}
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	// -v=2: the "Gang planned" line (with the plan's duration) is at V(2), and so is
	// kube-scheduler's per-pod "Successfully bound pod to node": both kinds log the same way.
	args := []string{"--config=" + configPath, "--secure-port=0", "-v=2"}
	if k.native() {
		args = append(args, "--feature-gates="+nativeGates)
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = os.Environ()
	if env != "" {
		cmd.Env = append(cmd.Env, env)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	p := &schedProcess{kind: k, cmd: cmd, logPath: logPath, done: make(chan error, 1)}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", binary, err)
	}
	if prefix := os.Getenv("BENCH_CPUPROFILE"); prefix != "" && env != "" {
		t.Logf("%s: CPU profile %s.%d", name, prefix, cmd.Process.Pid)
	}
	go func() {
		p.done <- cmd.Wait()
		logFile.Close()
	}()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// alive fails when the process has exited (for example refused its configuration).
func (p *schedProcess) alive() error {
	select {
	case err := <-p.done:
		p.done <- err
		return fmt.Errorf("scheduler %s exited: %v; log %s:\n%s", p.kind, err, p.logPath, tail(p.logPath, 20))
	default:
		return nil
	}
}

// stats reads VmHWM and the CPU time of the running process.
func (p *schedProcess) stats() (procStats, error) {
	pid := p.cmd.Process.Pid
	var st procStats
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return st, fmt.Errorf("VmHWM %q: %w", rest, err)
			}
			st.PeakRSSMiB = kb / 1024
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, err
	}
	// Fields after the command name (which is in parentheses and may contain spaces).
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	st.CPUSeconds = (utime + stime) / 100 // USER_HZ is 100 on Linux
	return st, nil
}

// stop terminates the process (idempotent) and waits for it.
func (p *schedProcess) stop(t testing.TB) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

var plannedLine = regexp.MustCompile(`"Gang planned".*podGroup="([^"]+)".*duration="([^"]+)"`)

// planDurations returns the duration of every gang plan in the scheduler's log, in order.
func (p *schedProcess) planDurations() ([]time.Duration, error) {
	f, err := os.Open(p.logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []time.Duration
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		m := plannedLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		d, err := time.ParseDuration(m[2])
		if err != nil {
			return nil, fmt.Errorf("plan duration %q: %w", m[2], err)
		}
		out = append(out, d)
	}
	return out, sc.Err()
}

func tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
