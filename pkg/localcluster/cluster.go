// Package localcluster runs a Kubernetes control plane on the loopback interface from the
// binaries in bin/: etcd, kube-apiserver (RBAC on), kube-controller-manager (the Job and
// resource claim controllers), kwok (simulated nodes and pod lifecycles) and hypernode-scheduler under
// the ServiceAccount and RBAC of manifests/install, with manifests/scheduler/config.yaml.
// The demo (hack/demo), hack/local-up and the end-to-end tests (test/e2e) use it.
package localcluster

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
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
	// FeatureGates are the --feature-gates of kube-apiserver, kube-controller-manager and
	// the scheduler ("" for the defaults); NativePodGroups serves scheduling.k8s.io/v1beta1
	// and turns on the gates of Kubernetes' own pod groups (nativeGates) too.
	FeatureGates    string
	NativePodGroups bool
}

// nativeGates are the gates under which kube-scheduler places native pod groups through
// the placement extension points, and the Job controller creates them for Jobs.
const nativeGates = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true,WorkloadWithJob=true"

// gates is the --feature-gates value of the components ("" for none).
func (o Options) gates() string {
	if !o.NativePodGroups {
		return o.FeatureGates
	}
	if o.FeatureGates == "" {
		return nativeGates
	}
	return nativeGates + "," + o.FeatureGates
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
	// previousSchedulers are the scheduler processes that ran before the current one;
	// replicas are the schedulers started beside it (replicas.go).
	previousSchedulers []*Process
	replicas           []*Process
	schedulerPort      int
	// apiserverArgs are kept for RestartAPIServer (the port included); previousAPIServers
	// are the processes it replaced.
	apiserverArgs      []string
	previousAPIServers []*Process
	controllerPort     int
	// The HyperNode controller, when started (controller.go).
	controller          *Process
	previousControllers []*Process
	// workloadControllers are the workload controllers tests started (workload.go).
	workloadControllers []*Process
	// gates are the components' --feature-gates; native: scheduling.k8s.io/v1beta1 is served.
	gates               string
	native              bool
	controllerInstalled bool
	stopped             bool
	etcdURL             string
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
	c := &Cluster{RepoRoot: opts.RepoRoot, Dir: dir, log: opts.Log, verbosity: opts.SchedulerVerbosity, gates: opts.gates(), native: opts.NativePodGroups}
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

// gateArgs are the feature gate and API flags every component gets.
func (c *Cluster) gateArgs() []string {
	var out []string
	if c.gates != "" {
		out = append(out, "--feature-gates="+c.gates)
	}
	return out
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
	args := c.gateArgs()
	if c.native {
		args = append(args, "--runtime-config=scheduling.k8s.io/v1beta1=true")
	}
	c.apiserverArgs = append(args,
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
	var err error
	if c.apiserver, err = startProcess("kube-apiserver", c.logDir(), c.bin("kube-apiserver"), c.apiserverArgs...); err != nil {
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
	if err := c.waitAPIServer(ctx); err != nil {
		return err
	}
	c.step("kube-apiserver ready at %s (pid %d)", server, c.apiserver.Pid())
	return nil
}

func (c *Cluster) waitAPIServer(ctx context.Context) error {
	return c.poll(ctx, c.apiserver, 2*time.Minute, func(ctx context.Context) (bool, error) {
		body, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
}

// RestartAPIServer stops kube-apiserver (SIGTERM, or SIGKILL as in a crash) and starts it
// again on the same port with the same flags; etcd keeps the data. It returns once the new
// process is ready.
func (c *Cluster) RestartAPIServer(ctx context.Context, kill bool) error {
	var err error
	if kill {
		err = c.apiserver.Kill()
	} else {
		err = c.apiserver.Stop(30 * time.Second)
	}
	if err != nil {
		return err
	}
	c.previousAPIServers = append(c.previousAPIServers, c.apiserver)
	if c.apiserver, err = startProcess("kube-apiserver", c.logDir(), c.bin("kube-apiserver"), c.apiserverArgs...); err != nil {
		return err
	}
	if err := c.waitAPIServer(ctx); err != nil {
		return err
	}
	c.step("kube-apiserver restarted (pid %d)", c.apiserver.Pid())
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
	c.controllerManager, err = startProcess("kube-controller-manager", c.logDir(), c.bin("kube-controller-manager"), append(c.gateArgs(),
		"--kubeconfig="+c.AdminKubeconfig,
		"--authentication-kubeconfig="+c.AdminKubeconfig, "--authorization-kubeconfig="+c.AdminKubeconfig,
		"--controllers=job,resourceclaim-controller", "--leader-elect=false", "--use-service-account-credentials=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(c.Dir, "controller-manager"))...)
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

// tokenLifetime is the lifetime of the scheduler's token: a `make local-up` cluster may run
// for days, and nothing renews the token of a kubeconfig file.
const tokenLifetime = 30 * 24 * time.Hour

// Processes are every process started so far, in start order.
func (c *Cluster) Processes() []*Process {
	var out []*Process
	for _, p := range []*Process{c.etcd, c.apiserver, c.controllerManager, c.kwok} {
		if p != nil {
			out = append(out, p)
		}
	}
	// Exited already; listed for Leftovers.
	out = append(out, c.previousAPIServers...)
	out = append(out, c.previousSchedulers...)
	if c.scheduler != nil {
		out = append(out, c.scheduler)
	}
	out = append(out, c.replicas...)
	out = append(out, c.previousControllers...)
	if c.controller != nil {
		out = append(out, c.controller)
	}
	return append(out, c.workloadControllers...)
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
