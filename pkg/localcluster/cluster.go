// Package localcluster runs a Kubernetes control plane on the loopback interface from the
// binaries in bin/: etcd, kube-apiserver (RBAC on), kube-controller-manager (the Job
// controller only), kwok (simulated nodes and pod lifecycles) and hypernode-scheduler under
// the ServiceAccount and RBAC of manifests/install, with manifests/scheduler/config.yaml.
// The demo (hack/demo), hack/local-up and the end-to-end tests (test/e2e) use it.
package localcluster

import (
	"context"
	"crypto/tls"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

const (
	// SchedulerNamespace and SchedulerServiceAccount are the identity manifests/install gives
	// the scheduler.
	SchedulerNamespace      = "hypernode-system"
	SchedulerServiceAccount = "hypernode-scheduler"
	// SchedulerLease is leaderElection.resourceName in manifests/scheduler/config.yaml.
	SchedulerLease = "hypernode-scheduler"
	// KwokNodeAnnotation marks the nodes kwok simulates.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
)

//go:embed kwok-stages.yaml
var kwokStages []byte

// installManifests are applied by Start, in order. The Deployment is left out: the local
// scheduler runs as a process (the e2e tests dry-run the Deployment against the apiserver).
var installManifests = []string{
	"manifests/crds/topology.volcano.sh_hypernodes.yaml",
	"manifests/crds/scheduling.x-k8s.io_podgroups.yaml",
	"manifests/install/00-namespace.yaml",
	"manifests/install/01-rbac.yaml",
	"manifests/install/02-configmap.yaml",
}

// Options configure a local cluster.
type Options struct {
	// RepoRoot holds bin/ and manifests/.
	RepoRoot string
	// Dir receives certificates, kubeconfigs, data and logs; a temporary directory if empty.
	Dir string
	// Log receives one line per step; nil discards them.
	Log io.Writer
	// SchedulerVerbosity is the scheduler's --v (default 2).
	SchedulerVerbosity int
}

// Cluster is a running local control plane.
type Cluster struct {
	RepoRoot string
	Dir      string
	// AdminKubeconfig authenticates as a member of system:masters.
	AdminKubeconfig string
	// SchedulerKubeconfig authenticates as the scheduler's ServiceAccount (a bound token).
	SchedulerKubeconfig string
	// SchedulerConfig is manifests/scheduler/config.yaml plus the kubeconfig to use.
	SchedulerConfig string
	Admin           *restclient.Config
	Kube            kubernetes.Interface
	Applier         *Applier

	log                                io.Writer
	pki                                *pki
	verbosity                          int
	etcd, apiserver, controllerManager *Process
	kwok, scheduler                    *Process
	// previousSchedulers are the scheduler processes that ran before the current one.
	previousSchedulers []*Process
	schedulerPort      int
	stopped            bool
	etcdURL            string
}

// Start brings up the control plane and the scheduler and waits until each is ready. On error
// it stops whatever it started.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.SchedulerVerbosity == 0 {
		opts.SchedulerVerbosity = 2
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "hypernode-local-"); err != nil {
			return nil, err
		}
	}
	for _, sub := range []string{"logs", "etcd"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, err
		}
	}
	c := &Cluster{RepoRoot: opts.RepoRoot, Dir: dir, log: opts.Log, verbosity: opts.SchedulerVerbosity}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if c.pki, err = newPKI(filepath.Join(dir, "pki")); err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	if err := c.startEtcd(ctx); err != nil {
		return nil, err
	}
	if err := c.startAPIServer(ctx); err != nil {
		return nil, err
	}
	if err := c.install(ctx); err != nil {
		return nil, err
	}
	if err := c.startControllerManager(ctx); err != nil {
		return nil, err
	}
	if err := c.startKwok(ctx); err != nil {
		return nil, err
	}
	if err := c.StartScheduler(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cluster) step(format string, args ...any) {
	_, _ = fmt.Fprintf(c.log, "local-up: "+format+"\n", args...)
}

func (c *Cluster) bin(name string) string { return filepath.Join(c.RepoRoot, "bin", name) }

func (c *Cluster) logDir() string { return filepath.Join(c.Dir, "logs") }

func (c *Cluster) startEtcd(ctx context.Context) error {
	clientPort, peerPort := freePort(), freePort()
	var err error
	if clientPort == 0 || peerPort == 0 {
		return errors.New("no free loopback port for etcd")
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	c.etcd, err = startProcess("etcd", c.logDir(), c.bin("etcd"),
		"--name=local", "--data-dir="+filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=local="+peer,
		// Nothing here must survive a crash of the machine; skipping fsync makes the
		// control plane several times faster on slow disks.
		"--unsafe-no-fsync=true", "--log-level=warn")
	if err != nil {
		return err
	}
	c.etcdURL = client
	return c.waitHTTP(ctx, c.etcd, client+"/health", func(body string) bool { return strings.Contains(body, `"health":"true"`) })
}

func (c *Cluster) startAPIServer(ctx context.Context) error {
	port := freePort()
	if port == 0 {
		return errors.New("no free loopback port for kube-apiserver")
	}
	var err error
	c.apiserver, err = startProcess("kube-apiserver", c.logDir(), c.bin("kube-apiserver"),
		"--etcd-servers="+c.etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--tls-cert-file="+c.pki.ServingCert, "--tls-private-key-file="+c.pki.ServingKey,
		"--client-ca-file="+c.pki.CACert,
		// Published in kube-system/extension-apiserver-authentication for the components
		// that authenticate their callers through the apiserver (the scheduler included).
		"--requestheader-client-ca-file="+c.pki.CACert,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+c.pki.SAPub, "--service-account-signing-key-file="+c.pki.SAKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		// No ServiceAccount controller runs to create each namespace's `default` account, and
		// no node lifecycle controller runs to lift the not-ready taint of new nodes.
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
		// The loopback address cannot be the `kubernetes` Service's endpoint.
		"--endpoint-reconciler-type=none",
		"--cert-dir="+filepath.Join(c.Dir, "apiserver"),
		"--profiling=false")
	if err != nil {
		return err
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", port)
	c.Admin = &restclient.Config{
		Host: server,
		TLSClientConfig: restclient.TLSClientConfig{
			CAFile: c.pki.CACert, CertFile: c.pki.AdminCert, KeyFile: c.pki.AdminKey,
		},
		QPS: 200, Burst: 400,
	}
	if c.Kube, err = kubernetes.NewForConfig(c.Admin); err != nil {
		return err
	}
	c.AdminKubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")
	if err := writeKubeconfig(c.AdminKubeconfig, server, c.pki.caPEM, func(a *clientcmdapi.AuthInfo) {
		a.ClientCertificate, a.ClientKey = c.pki.AdminCert, c.pki.AdminKey
	}); err != nil {
		return err
	}
	err = c.poll(ctx, c.apiserver, 2*time.Minute, func(ctx context.Context) (bool, error) {
		body, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
	if err != nil {
		return err
	}
	c.step("kube-apiserver ready at %s (pid %d)", server, c.apiserver.Pid())
	return nil
}

// install applies the CRDs, the namespace, the scheduler's RBAC and its ConfigMap.
func (c *Cluster) install(ctx context.Context) error {
	var err error
	if c.Applier, err = NewApplier(c.Admin); err != nil {
		return err
	}
	for _, m := range installManifests {
		if _, err := c.Applier.ApplyFile(ctx, filepath.Join(c.RepoRoot, m), ""); err != nil {
			return err
		}
	}
	c.step("applied %s", strings.Join(installManifests, ", "))
	return nil
}

func (c *Cluster) startControllerManager(ctx context.Context) error {
	port := freePort()
	if port == 0 {
		return errors.New("no free loopback port for kube-controller-manager")
	}
	var err error
	c.controllerManager, err = startProcess("kube-controller-manager", c.logDir(), c.bin("kube-controller-manager"),
		"--kubeconfig="+c.AdminKubeconfig,
		"--authentication-kubeconfig="+c.AdminKubeconfig, "--authorization-kubeconfig="+c.AdminKubeconfig,
		"--controllers=job", "--leader-elect=false", "--use-service-account-credentials=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(c.Dir, "controller-manager"))
	if err != nil {
		return err
	}
	return c.waitHTTP(ctx, c.controllerManager, fmt.Sprintf("https://127.0.0.1:%d/healthz", port), func(body string) bool { return body == "ok" })
}

func (c *Cluster) startKwok(ctx context.Context) error {
	stages := filepath.Join(c.Dir, "kwok-stages.yaml")
	if err := os.WriteFile(stages, kwokStages, 0o600); err != nil {
		return err
	}
	port := freePort()
	if port == 0 {
		return errors.New("no free loopback port for kwok")
	}
	var err error
	c.kwok, err = startProcess("kwok", c.logDir(), c.bin("kwok"),
		"--kubeconfig="+c.AdminKubeconfig, "--config="+stages,
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector="+KwokNodeAnnotation+"=fake",
		"--cidr=10.0.0.0/16", fmt.Sprintf("--server-address=127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	return c.waitHTTP(ctx, c.kwok, fmt.Sprintf("http://127.0.0.1:%d/healthz", port), func(string) bool { return true })
}

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
	c.scheduler, err = startProcess("kube-scheduler", c.logDir(), c.bin("kube-scheduler"),
		"--config="+c.SchedulerConfig,
		"--authentication-kubeconfig="+c.SchedulerKubeconfig, "--authorization-kubeconfig="+c.SchedulerKubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(c.schedulerPort),
		"--v="+strconv.Itoa(c.verbosity))
	if err != nil {
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

// tokenLifetime is the lifetime of the scheduler's token: a `make local-up` cluster may run
// for days, and nothing renews the token of a kubeconfig file.
const tokenLifetime = 30 * 24 * time.Hour

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

// Processes are every process started so far, in start order.
func (c *Cluster) Processes() []*Process {
	var out []*Process
	for _, p := range []*Process{c.etcd, c.apiserver, c.controllerManager, c.kwok} {
		if p != nil {
			out = append(out, p)
		}
	}
	out = append(out, c.previousSchedulers...)
	if c.scheduler != nil {
		out = append(out, c.scheduler)
	}
	return out
}

// Stop stops every process in reverse start order; it is safe to call more than once.
func (c *Cluster) Stop() {
	if c.stopped {
		return
	}
	c.stopped = true
	procs := c.Processes()
	for i := len(procs) - 1; i >= 0; i-- {
		if err := procs[i].Stop(10 * time.Second); err != nil {
			c.step("stopping %s: %v", procs[i].Name, err)
		}
	}
	c.step("stopped %d processes", len(procs))
}

// Leftovers names the started processes (or processes they forked) still running.
func (c *Cluster) Leftovers() []string {
	var alive []string
	for _, p := range c.Processes() {
		if p.GroupAlive() {
			alive = append(alive, fmt.Sprintf("%s (process group %d)", p.Name, p.Pid()))
		}
	}
	return alive
}

// AddNodes creates nodes that kwok simulates, with the given allocatable resources as their
// capacity, and waits until every one is Ready.
func (c *Cluster) AddNodes(ctx context.Context, nodes ...*v1.Node) error {
	for _, n := range nodes {
		n = n.DeepCopy()
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[KwokNodeAnnotation] = "fake"
		// Created with its capacity, as a kubelet registers its node; kwok's Stage writes
		// only conditions and node info, so the two never overwrite each other.
		if _, err := c.Kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node %s: %w", n.Name, err)
		}
	}
	return c.poll(ctx, c.kwok, time.Minute, func(ctx context.Context) (bool, error) {
		list, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := map[string]bool{}
		for i := range list.Items {
			ready[list.Items[i].Name] = nodeReady(&list.Items[i]) && len(list.Items[i].Status.Allocatable) > 0
		}
		for _, n := range nodes {
			if !ready[n.Name] {
				return false, nil
			}
		}
		return true, nil
	})
}

func nodeReady(n *v1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == v1.NodeReady {
			return cond.Status == v1.ConditionTrue
		}
	}
	return false
}

// SimulatedNode returns a node with the given labels whose capacity and allocatable are res.
func SimulatedNode(name string, labels map[string]string, res v1.ResourceList) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status:     v1.NodeStatus{Capacity: res.DeepCopy(), Allocatable: res.DeepCopy()},
	}
}

// poll runs cond every 100 ms until it is true, the timeout passes, or proc exits.
func (c *Cluster) poll(ctx context.Context, proc *Process, timeout time.Duration, cond wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if exited, werr := proc.Exited(); exited {
			return false, fmt.Errorf("%s exited (%v); see %s", proc.Name, werr, proc.LogPath)
		}
		return cond(ctx)
	})
	if err != nil && !strings.Contains(err.Error(), "exited") {
		return fmt.Errorf("%s not ready: %w; see %s", proc.Name, err, proc.LogPath)
	}
	return err
}

// waitHTTP polls url until check accepts a 200 response body. TLS certificates are not
// verified: the binaries serve self-signed certificates on the loopback interface.
func (c *Cluster) waitHTTP(ctx context.Context, proc *Process, url string, check func(body string) bool) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	err := c.poll(ctx, proc, 2*time.Minute, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && check(string(body)), nil
	})
	if err == nil {
		c.step("%s ready (pid %d)", proc.Name, proc.Pid())
	}
	return err
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

func writeKubeconfig(path, server string, caPEM []byte, auth func(*clientcmdapi.AuthInfo)) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	user := clientcmdapi.NewAuthInfo()
	auth(user)
	cfg.AuthInfos["local"] = user
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "local"}
	cfg.CurrentContext = "local"
	return clientcmd.WriteToFile(*cfg, path)
}

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

// firstLineContaining returns the first line of the file that contains substr ("" if none).
func firstLineContaining(path, substr string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, substr) {
			return line
		}
	}
	return ""
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
