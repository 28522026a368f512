package util

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// ServiceAccountKubeconfig writes a kubeconfig of the control plane that authenticates with a
// token of the ServiceAccount namespace/name, as a pod running under it would.
func (cp *ControlPlane) ServiceAccountKubeconfig(ctx context.Context, dir, namespace, name string) (string, error) {
	kube, err := clientset.NewForConfig(cp.Config)
	if err != nil {
		return "", err
	}
	token, err := kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", namespace, name, err)
	}
	cfg := restclient.AnonymousClientConfig(cp.Config)
	cfg.BearerToken = token.Status.Token
	return writeKubeconfig(dir, cfg)
}

// SchedulerProcess is bin/kube-scheduler running as a process of its own.
type SchedulerProcess struct {
	cmd  *exec.Cmd
	done chan error
	log  string
}

// StartSchedulerBinary runs bin/kube-scheduler with the configuration (a file's content) as
// the Deployment runs it (--config, --v=2), serving on a free loopback port with delegated
// authentication and authorization through authKubeconfig. The test's cleanup stops it and,
// when the test failed, prints the end of its log.
func StartSchedulerBinary(t testing.TB, config, authKubeconfig string) *SchedulerProcess {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &SchedulerProcess{done: make(chan error, 1), log: filepath.Join(dir, "kube-scheduler.log")}
	out, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(filepath.Join(RepoRoot(), "bin", "kube-scheduler"), "--config="+path, "--v=2",
		"--authentication-kubeconfig="+authKubeconfig, "--authorization-kubeconfig="+authKubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port))
	s.cmd.Stdout, s.cmd.Stderr = out, out
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting bin/kube-scheduler (make bin/kube-scheduler builds it): %v", err)
	}
	go func() { s.done <- s.cmd.Wait(); _ = out.Close() }()
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			data, _ := os.ReadFile(s.log)
			if len(data) > 8000 {
				data = data[len(data)-8000:]
			}
			t.Logf("the end of kube-scheduler's log:\n%s", bytes.TrimSpace(data))
		}
	})
	return s
}

// Stop stops the scheduler (SIGTERM) and waits until it has exited; again is a no-op.
func (s *SchedulerProcess) Stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}
