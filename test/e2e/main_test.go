// Package e2e drives the real binaries as separate processes (pkg/localcluster: etcd,
// kube-apiserver with RBAC, the Job controller, kwok, and hypernode-scheduler under the
// manifests' ServiceAccount and RBAC with the manifests' config) through the API only.
// `make test-e2e` builds the binaries first.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/demo"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/localcluster"
)

var (
	cluster  *localcluster.Cluster
	runner   *demo.Runner
	repoRoot string
)

func TestMain(m *testing.M) {
	_, file, _, _ := runtime.Caller(0)
	repoRoot = filepath.Join(filepath.Dir(file), "..", "..")
	ctx := context.Background()
	var err error
	cluster, err = localcluster.Start(ctx, localcluster.Options{RepoRoot: repoRoot, Log: os.Stderr, SchedulerVerbosity: 4})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cannot start the local control plane:", err)
		os.Exit(1)
	}
	// The reports are checked (demo.Check), not printed.
	runner, err = demo.NewRunner(cluster, io.Discard)
	if err != nil {
		cluster.Stop()
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	code := m.Run()
	cluster.Stop()
	if left := cluster.Leftovers(); len(left) > 0 {
		fmt.Fprintln(os.Stderr, "e2e: FAIL: processes left running after Stop:", left)
		code = 1
	}
	if code == 0 {
		_ = os.RemoveAll(cluster.Dir)
	} else {
		fmt.Fprintf(os.Stderr, "e2e: logs kept in %s/logs\n", cluster.Dir)
	}
	os.Exit(code)
}

// forbiddenLines returns the lines of the scheduler's log (every run of it) in the cluster
// directory dir in which the apiserver refused the scheduler something: the manifests' RBAC
// lacks a permission.
func forbiddenLines(dir string) ([]string, error) {
	f, err := os.Open(filepath.Join(dir, "logs", "kube-scheduler.log"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var lines []string
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<22)
	for scanner.Scan() {
		line := scanner.Text()
		if strings.Contains(line, `"Forbidden" URI=`) {
			continue // the scheduler refusing a caller of its own endpoint, not being refused
		}
		if strings.Contains(line, "forbidden") || strings.Contains(line, "Forbidden") {
			lines = append(lines, line)
		}
	}
	return lines, scanner.Err()
}

// assertSchedulerAuthorized fails the test if the scheduler of the cluster in dir was ever
// refused a request.
func assertSchedulerAuthorized(t *testing.T, dir string) {
	t.Helper()
	lines, err := forbiddenLines(dir)
	if err != nil {
		t.Fatalf("reading the scheduler log: %v", err)
	}
	if len(lines) > 0 {
		t.Errorf("the scheduler, running under manifests/install/01-rbac.yaml, was refused %d requests; first:\n%s", len(lines), lines[0])
	}
}
