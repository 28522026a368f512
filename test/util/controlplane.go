// Package util starts the pieces of a Kubernetes control plane inside a test process
// (embedded etcd, the full kube-apiserver with this project's CRDs, this project's scheduler)
// and offers builders and deadline-bounded waits for the objects the tests create.
package util

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
	"sigs.k8s.io/yaml"
)

// RepoRoot is the root of this repository, found from this source file's location (test
// binaries are built without -trimpath, see docs/design.md, "Tests").
func RepoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("cannot locate the repository root")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// ControlPlane is an embedded etcd and a kube-apiserver serving this project's CRDs.
type ControlPlane struct {
	// Config is an admin client config for the apiserver.
	Config *restclient.Config
	// Kubeconfig is the path of a kubeconfig file with the same credentials.
	Kubeconfig string

	dir     string
	etcd    *embed.Etcd
	apiStop func()
}

// StartControlPlane starts etcd and kube-apiserver and installs the CRDs of manifests/crds.
// tb receives the servers' test logs; Stop releases everything. extraFlags are appended to
// the apiserver's flags (list flags such as --disable-admission-plugins add to the defaults).
func StartControlPlane(ctx context.Context, tb ktesting.TB, extraFlags ...string) (*ControlPlane, error) {
	return startControlPlane(ctx, tb, true, extraFlags...)
}

// StartBareControlPlane starts etcd and kube-apiserver without this project's CRDs (for an
// installer that brings them, such as the Helm chart).
func StartBareControlPlane(ctx context.Context, tb ktesting.TB) (*ControlPlane, error) {
	return startControlPlane(ctx, tb, false)
}

func startControlPlane(ctx context.Context, tb ktesting.TB, crds bool, extraFlags ...string) (_ *ControlPlane, err error) {
	cp := &ControlPlane{}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()
	if cp.dir, err = os.MkdirTemp("", "hypernode-controlplane"); err != nil {
		return nil, err
	}
	etcdURL, err := cp.startEtcd()
	if err != nil {
		return nil, fmt.Errorf("starting etcd: %w", err)
	}

	storage := storagebackend.NewDefaultConfig(filepath.Join("/", string(uuid.NewUUID()), "registry"), nil)
	storage.Transport.ServerList = []string{etcdURL}
	server, err := kubeapiservertesting.StartTestServer(tb, nil, append([]string{
		// No controller-manager runs, so no namespace gets a default ServiceAccount.
		"--disable-admission-plugins=ServiceAccount",
	}, extraFlags...), storage)
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver: %w", err)
	}
	cp.apiStop = server.TearDownFn
	cp.Config = restclient.CopyConfig(server.ClientConfig)
	// The tests create thousands of objects; the default 5 QPS would dominate their run time.
	cp.Config.QPS, cp.Config.Burst = 5000, 10000

	if cp.Kubeconfig, err = writeKubeconfig(cp.dir, cp.Config); err != nil {
		return nil, err
	}
	if crds {
		if err := InstallCRDs(ctx, cp.Config, filepath.Join(RepoRoot(), "manifests", "crds")); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

// Stop stops the apiserver and etcd and removes their files.
func (cp *ControlPlane) Stop() {
	if cp.apiStop != nil {
		cp.apiStop()
	}
	if cp.etcd != nil {
		cp.etcd.Close()
	}
	if cp.dir != "" {
		_ = os.RemoveAll(cp.dir)
	}
}

func (cp *ControlPlane) startEtcd() (string, error) {
	clientURL, err := freeLoopbackURL()
	if err != nil {
		return "", err
	}
	peerURL, err := freeLoopbackURL()
	if err != nil {
		return "", err
	}
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(cp.dir, "etcd")
	cfg.ListenClientUrls = []url.URL{*clientURL}
	cfg.AdvertiseClientUrls = []url.URL{*clientURL}
	cfg.ListenPeerUrls = []url.URL{*peerURL}
	cfg.AdvertisePeerUrls = []url.URL{*peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	// Test data is thrown away: don't pay for fsync.
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return "", err
	}
	cp.etcd = e
	select {
	case <-e.Server.ReadyNotify():
		return clientURL.String(), nil
	case err := <-e.Err():
		return "", err
	case <-time.After(time.Minute):
		return "", fmt.Errorf("etcd did not become ready within a minute")
	}
}

func freeLoopbackURL() (*url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return &url.URL{Scheme: "http", Host: l.Addr().String()}, nil
}

func writeKubeconfig(dir string, cfg *restclient.Config) (string, error) {
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["test"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.TLSClientConfig.CAData,
		TLSServerName:            cfg.TLSClientConfig.ServerName,
		InsecureSkipTLSVerify:    cfg.TLSClientConfig.Insecure,
	}
	kubeconfig.AuthInfos["test"] = &clientcmdapi.AuthInfo{
		Token:                 cfg.BearerToken,
		ClientCertificateData: cfg.TLSClientConfig.CertData,
		ClientKeyData:         cfg.TLSClientConfig.KeyData,
	}
	kubeconfig.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kubeconfig.CurrentContext = "test"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig, path); err != nil {
		return "", err
	}
	return path, nil
}

// InstallCRDs creates every CRD in dir and waits until the apiserver serves each of them.
func InstallCRDs(ctx context.Context, cfg *restclient.Config, dir string) error {
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no CRDs in %s", dir)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
		if err := waitEstablished(ctx, client, crd.Name); err != nil {
			return err
		}
	}
	return nil
}

// WaitCRDsEstablished waits until the apiserver serves each named CRD (created by someone
// else: an installer).
func WaitCRDsEstablished(ctx context.Context, cfg *restclient.Config, names ...string) error {
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := waitEstablished(ctx, client, name); err != nil {
			return err
		}
	}
	return nil
}

// waitEstablished waits until the CRD exists and is established.
func waitEstablished(ctx context.Context, client apiextensionsclient.Interface, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not established: %w", name, err)
	}
	return nil
}

// MainTB is a ktesting.TB for TestMain, where no *testing.T exists yet: it logs to stderr
// (only when verbose) and turns a fatal error into a panic that ends the test binary.
type MainTB struct {
	Verbose  bool
	cleanups []func()
	failed   bool
}

var _ ktesting.TB = &MainTB{}

// RunCleanups runs the registered cleanups in reverse order.
func (m *MainTB) RunCleanups() {
	for i := len(m.cleanups) - 1; i >= 0; i-- {
		m.cleanups[i]()
	}
	m.cleanups = nil
}

func (m *MainTB) Attr(string, string) {}
func (m *MainTB) Chdir(string)        { panic("Chdir is not supported in TestMain") }
func (m *MainTB) Cleanup(f func())    { m.cleanups = append(m.cleanups, f) }
func (m *MainTB) Error(args ...any)   { m.failed = true; m.Log(args...) }
func (m *MainTB) Errorf(f string, args ...any) {
	m.failed = true
	fmt.Fprintf(os.Stderr, "TestMain: "+f+"\n", args...)
}
func (m *MainTB) Fail()                     { m.failed = true }
func (m *MainTB) FailNow()                  { panic("TestMain failed") }
func (m *MainTB) Failed() bool              { return m.failed }
func (m *MainTB) Fatal(args ...any)         { panic(fmt.Sprint(args...)) }
func (m *MainTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (m *MainTB) Helper()                   {}
func (m *MainTB) Log(args ...any) {
	if m.Verbose {
		fmt.Fprintln(os.Stderr, append([]any{"TestMain:"}, args...)...)
	}
}
func (m *MainTB) Logf(f string, args ...any) {
	if m.Verbose {
		fmt.Fprintf(os.Stderr, "TestMain: "+strings.TrimSuffix(f, "\n")+"\n", args...)
	}
}
func (m *MainTB) Name() string         { return "TestMain" }
func (m *MainTB) Setenv(k, v string)   { _ = os.Setenv(k, v) }
func (m *MainTB) Skip(args ...any)     { panic("Skip is not supported in TestMain") }
func (m *MainTB) Skipf(string, ...any) { panic("Skipf is not supported in TestMain") }
func (m *MainTB) SkipNow()             { panic("SkipNow is not supported in TestMain") }
func (m *MainTB) Skipped() bool        { return false }
func (m *MainTB) TempDir() string {
	dir, err := os.MkdirTemp("", "testmain")
	if err != nil {
		panic(err)
	}
	m.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
