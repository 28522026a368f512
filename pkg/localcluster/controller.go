package localcluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

const (
	// ControllerServiceAccount is the identity manifests/install gives hypernode-controller,
	// in SchedulerNamespace.
	ControllerServiceAccount = "hypernode-controller"
	// ControllerLease is the controller's leader-election Lease, ControllerConfigMap its
	// discovery configuration, both in SchedulerNamespace.
	ControllerLease     = "hypernode-controller"
	ControllerConfigMap = "hypernode-controller"
)

// controllerManifests are applied before the controller first starts: its RBAC and its
// ConfigMap (every source off).
var controllerManifests = []string{
	"manifests/install/04-controller-rbac.yaml",
	"manifests/install/05-controller-configmap.yaml",
}

// StartController starts bin/hypernode-controller under the ServiceAccount and RBAC of
// manifests/install (applied at the first start), with leader election, and waits until it
// serves /healthz and holds its Lease. extraArgs are added to its command line.
func (c *Cluster) StartController(ctx context.Context, extraArgs ...string) error {
	if c.controller != nil {
		if exited, _ := c.controller.Exited(); !exited {
			return errors.New("the controller is already running")
		}
		c.previousControllers = append(c.previousControllers, c.controller)
		c.controller = nil
	}
	if !c.controllerInstalled {
		for _, m := range controllerManifests {
			if _, err := c.Applier.ApplyFile(ctx, filepath.Join(c.RepoRoot, m), ""); err != nil {
				return err
			}
		}
		c.controllerInstalled = true
		c.step("applied %s", strings.Join(controllerManifests, ", "))
	}
	kubeconfig := filepath.Join(c.Dir, "controller.kubeconfig")
	token, err := c.Kube.CoreV1().ServiceAccounts(SchedulerNamespace).CreateToken(ctx, ControllerServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(tokenLifetime / time.Second))}},
		metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token for %s/%s: %w", SchedulerNamespace, ControllerServiceAccount, err)
	}
	if err := writeKubeconfig(kubeconfig, c.Admin.Host, c.pki.caPEM, func(a *clientcmdapi.AuthInfo) { a.Token = token.Status.Token }); err != nil {
		return err
	}
	previousHolder, err := c.leaseHolder(ctx, ControllerLease)
	if err != nil {
		return err
	}
	port := freePort()
	if port == 0 {
		return errors.New("no free loopback port for the controller")
	}
	c.controllerPort = port
	args := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--namespace=" + SchedulerNamespace,
		"--config-map=" + ControllerConfigMap,
		"--healthz-bind-address=127.0.0.1:" + strconv.Itoa(port),
		"--v=" + strconv.Itoa(c.verbosity),
	}, extraArgs...)
	c.controller, err = startProcess("hypernode-controller", c.logDir(), c.bin("hypernode-controller"), args...)
	if err != nil {
		return err
	}
	if err := c.waitHTTP(ctx, c.controller, fmt.Sprintf("http://127.0.0.1:%d/healthz", port), func(body string) bool { return body == "ok" }); err != nil {
		return err
	}
	var holder string
	err = c.poll(ctx, c.controller, 2*time.Minute, func(ctx context.Context) (bool, error) {
		holder, _ = c.leaseHolder(ctx, ControllerLease)
		return holder != "" && holder != previousHolder, nil
	})
	if err != nil {
		if line := firstLineContaining(c.controller.LogPath, "forbidden"); line != "" {
			err = fmt.Errorf("%w; the apiserver refused the controller a request: %s", err, line)
		}
		return fmt.Errorf("the controller did not acquire the Lease %s/%s: %w", SchedulerNamespace, ControllerLease, err)
	}
	c.step("hypernode-controller leads as %s (pid %d)", holder, c.controller.Pid())
	return nil
}

// ControllerAddress is the host:port of the running controller's /healthz and /metrics.
func (c *Cluster) ControllerAddress() string {
	return "127.0.0.1:" + strconv.Itoa(c.controllerPort)
}

// StopController stops the controller gracefully (it releases its Lease), or with SIGKILL.
func (c *Cluster) StopController(kill bool) error {
	if c.controller == nil {
		return nil
	}
	if kill {
		return c.controller.Kill()
	}
	return c.controller.Stop(15 * time.Second)
}

// Controller is the current controller process (nil before StartController).
func (c *Cluster) Controller() *Process { return c.controller }

// ControllerKubeconfig authenticates as the controller's ServiceAccount (after StartController).
func (c *Cluster) ControllerKubeconfig() string { return filepath.Join(c.Dir, "controller.kubeconfig") }

func (c *Cluster) leaseHolder(ctx context.Context, name string) (string, error) {
	lease, err := c.Kube.CoordinationV1().Leases(SchedulerNamespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return ptr.Deref(lease.Spec.HolderIdentity, ""), nil
}
