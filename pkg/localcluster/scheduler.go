package localcluster

import (
	"context"
	"crypto/tls"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// StartScheduler starts bin/kube-scheduler with the manifests' configuration under the
// scheduler's ServiceAccount, and waits until it serves and holds the leader Lease.
func (c *Cluster) StartScheduler(ctx context.Context) error {
	if c.scheduler != nil {
		if exited, _ := c.scheduler.Exited(); !exited {
			return errors.New("the scheduler is already running")
		}
	}
	if c.SchedulerKubeconfig == "" {
		if err := c.writeSchedulerFiles(ctx); err != nil {
			return err
		}
	}
	previousHolder := ""
	lease, err := c.Kube.CoordinationV1().Leases(SchedulerNamespace).Get(ctx, SchedulerLease, metav1.GetOptions{})
	if err == nil {
		previousHolder = ptr.Deref(lease.Spec.HolderIdentity, "")
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	if c.scheduler != nil {
		c.previousSchedulers = append(c.previousSchedulers, c.scheduler)
	}
	if c.schedulerPort = freePort(); c.schedulerPort == 0 {
		return errors.New("no free loopback port for the scheduler")
	}
	if c.scheduler, err = c.startSchedulerProcess("kube-scheduler", c.schedulerPort); err != nil {
		return err
	}
	healthz := fmt.Sprintf("https://127.0.0.1:%d/healthz", c.schedulerPort)
	if err := c.waitHTTP(ctx, c.scheduler, healthz, func(body string) bool { return body == "ok" }); err != nil {
		return err
	}
	// A restarted scheduler takes over only once its predecessor's Lease has expired.
	var holder string
	err = c.poll(ctx, c.scheduler, 2*time.Minute, func(ctx context.Context) (bool, error) {
		lease, err := c.Kube.CoordinationV1().Leases(SchedulerNamespace).Get(ctx, SchedulerLease, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		holder = ptr.Deref(lease.Spec.HolderIdentity, "")
		return holder != "" && holder != previousHolder, nil
	})
	if err != nil {
		if line := firstLineContaining(c.scheduler.LogPath, "forbidden"); line != "" {
			err = fmt.Errorf("%w; the apiserver refused the scheduler a request: %s", err, line)
		}
		return fmt.Errorf("the scheduler did not acquire the Lease %s/%s: %w", SchedulerNamespace, SchedulerLease, err)
	}
	c.step("hypernode-scheduler leads as %s (pid %d)", holder, c.scheduler.Pid())
	return nil
}

// startSchedulerProcess starts bin/kube-scheduler with the cluster's configuration and
// identity, serving on port, logging to <name>.log.
func (c *Cluster) startSchedulerProcess(name string, port int) (*Process, error) {
	return startProcess(name, c.logDir(), c.bin("kube-scheduler"), append(c.gateArgs(),
		"--config="+c.SchedulerConfig,
		"--authentication-kubeconfig="+c.SchedulerKubeconfig, "--authorization-kubeconfig="+c.SchedulerKubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--v="+strconv.Itoa(c.verbosity))...)
}

// writeSchedulerFiles writes a kubeconfig with a bound token of the scheduler's ServiceAccount
// and the scheduler config that points at it.
func (c *Cluster) writeSchedulerFiles(ctx context.Context) error {
	token, err := c.Kube.CoreV1().ServiceAccounts(SchedulerNamespace).CreateToken(ctx, SchedulerServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(tokenLifetime / time.Second))}},
		metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token for %s/%s: %w", SchedulerNamespace, SchedulerServiceAccount, err)
	}
	c.SchedulerKubeconfig = filepath.Join(c.Dir, "scheduler.kubeconfig")
	if err := writeKubeconfig(c.SchedulerKubeconfig, c.Admin.Host, c.pki.caPEM, func(a *clientcmdapi.AuthInfo) {
		a.Token = token.Status.Token
	}); err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(c.RepoRoot, "manifests/scheduler/config.yaml"))
	if err != nil {
		return err
	}
	config := map[string]any{}
	if err := yaml.Unmarshal(data, &config); err != nil {
		return fmt.Errorf("manifests/scheduler/config.yaml: %w", err)
	}
	// The one change: where the in-cluster Deployment uses its mounted token, the local
	// scheduler uses the kubeconfig (kube-scheduler ignores --kubeconfig next to --config).
	connection, _ := config["clientConnection"].(map[string]any)
	if connection == nil {
		connection = map[string]any{}
	}
	connection["kubeconfig"] = c.SchedulerKubeconfig
	config["clientConnection"] = connection
	out, err := yaml.Marshal(config)
	if err != nil {
		return err
	}
	c.SchedulerConfig = filepath.Join(c.Dir, "scheduler-config.yaml")
	return os.WriteFile(c.SchedulerConfig, out, 0o600)
}

// StopScheduler stops the scheduler: gracefully (SIGTERM), or with SIGKILL as in a crash.
func (c *Cluster) StopScheduler(kill bool) error {
	if c.scheduler == nil {
		return nil
	}
	if kill {
		return c.scheduler.Kill()
	}
	return c.scheduler.Stop(15 * time.Second)
}

// Scheduler is the current scheduler process.
func (c *Cluster) Scheduler() *Process { return c.scheduler }

// LeaseHolder is the current holder of the scheduler's leader Lease ("" if none).
func (c *Cluster) LeaseHolder(ctx context.Context) (string, error) {
	lease, err := c.Kube.CoordinationV1().Leases(SchedulerNamespace).Get(ctx, SchedulerLease, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return ptr.Deref(lease.Spec.HolderIdentity, ""), nil
}

// SchedulerAddress is the host:port of the running scheduler's secure port (/metrics,
// /healthz).
func (c *Cluster) SchedulerAddress() string {
	return "127.0.0.1:" + strconv.Itoa(c.schedulerPort)
}

// SchedulerMetrics returns the running scheduler's /metrics, read as the admin (the scheduler
// authorizes the caller through the apiserver). Right after a start the scheduler may not have
// loaded the client CA yet and take the admin for anonymous: it retries for up to 30 s.
func (c *Cluster) SchedulerMetrics(ctx context.Context) (string, error) {
	var body string
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var status int
		body, status, lastErr = c.getSchedulerMetrics(ctx)
		if status == http.StatusUnauthorized || status == http.StatusForbidden {
			return false, nil
		}
		return true, lastErr
	})
	if err != nil && lastErr != nil {
		return "", lastErr
	}
	return body, err
}

func (c *Cluster) getSchedulerMetrics(ctx context.Context) (string, int, error) {
	cert, err := tls.LoadX509KeyPair(c.pki.AdminCert, c.pki.AdminKey)
	if err != nil {
		return "", 0, err
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{cert},
		// The scheduler serves a self-signed certificate on the loopback interface.
		InsecureSkipVerify: true,
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", c.schedulerPort), nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", resp.StatusCode, err
	}
	if resp.StatusCode != http.StatusOK {
		return "", resp.StatusCode, fmt.Errorf("GET /metrics: %s: %s", resp.Status, body)
	}
	return string(body), resp.StatusCode, nil
}
