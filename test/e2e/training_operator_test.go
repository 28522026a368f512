package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/jobspec"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/localcluster"
)

var pyTorchJobs = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}

// trainingOperatorNS is where training-operator v1 keeps its webhook certificate (its default
// namespace); its certificate directory is fixed.
const (
	trainingOperatorNS      = "kubeflow"
	trainingOperatorCertDir = "/tmp/k8s-webhook-server/serving-certs"
)

// pyTorchJobYAML is a PyTorchJob of a master and workers of 8 GPUs, placed inside one leaf
// (its annotation, which training-operator copies onto the PodGroup it creates).
const pyTorchJobYAML = `apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: pt
  annotations:
    hypernode.dev/network-topology: '{"mode":"hard","highestTierAllowed":1}'
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: Never
      template:
        spec:
          containers:
          - name: pytorch
            image: registry.example.com/trainer:latest
            resources:
              limits:
                nvidia.com/gpu: "8"
    Worker:
      replicas: 3
      restartPolicy: Never
      template:
        spec:
          containers:
          - name: pytorch
            image: registry.example.com/trainer:latest
            resources:
              limits:
                nvidia.com/gpu: "8"
`

// TestPlanDerivesTheTrainingOperatorsGang: plan derives a PyTorchJob's gang as Kubeflow's
// training-operator (the real one, v1.9.2, with --gang-scheduler-name=hypernode-scheduler)
// then creates it, compared field by field (the PodGroup's spec and annotations, each pod's
// name and labels), and the gang lands in the leaf plan said, each pod where planned.
func TestPlanDerivesTheTrainingOperatorsGang(t *testing.T) {
	const ns, job, pods = "pytorch", "pt", 4
	restartScene(t, ns)
	startTrainingOperator(t, ns)

	objs, err := jobspec.ReadBytes([]byte(pyTorchJobYAML))
	if err != nil {
		t.Fatal(err)
	}
	derived, err := jobspec.Derive(objs, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := planOf(t, ns, pyTorchJobYAML)
	if !r.Placed || r.PodGroupFrom != "controller" || r.Members != pods || r.Placement.Leaves != 1 {
		t.Fatalf("plan of the PyTorchJob: %+v", r)
	}
	applyYAML(t, ns, pyTorchJobYAML)
	_, nodes := waitGangBound(t, ns, job, pods, 2*time.Minute)

	assertOperatorGang(t, ns, job, derived, r, nodes)
}

// startTrainingOperator runs training-operator v1 for PyTorchJobs in namespace ns until the
// test ends. It starts its controllers only once its webhook certificate is in place and its
// webhook configuration carries the CA (as in a cluster, where the Secret is mounted): the
// test makes the certificate, writes it into the Secret and the operator's fixed directory,
// and registers a webhook configuration that fails open (no Service reaches the operator).
func startTrainingOperator(t *testing.T, ns string) {
	t.Helper()
	ctx := t.Context()
	if _, err := cluster.Applier.ApplyFile(ctx, filepath.Join(repoRoot, "bin", "pytorchjob-crd.yaml"), ""); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cluster.Admin)
	if err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(pyTorchJobs).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the PyTorchJob CRD is not served: %v", err)
	}
	if _, err := cluster.Kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trainingOperatorNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ca, caKey, cert, key := webhookCert(t, "training-operator."+trainingOperatorNS+".svc")
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: trainingOperatorNS, Name: "training-operator-webhook-cert"},
		Data: map[string][]byte{"ca.crt": ca, "ca.key": caKey, "tls.crt": cert, "tls.key": key}}
	if _, err := cluster.Kube.CoreV1().Secrets(trainingOperatorNS).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := os.MkdirAll(trainingOperatorCertDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": cert, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(trainingOperatorCertDir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	webhooks := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "validator.training-operator.kubeflow.org"},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name: "validator.pytorchjob.training-operator.kubeflow.org",
			ClientConfig: admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: trainingOperatorNS,
				Name: "training-operator", Path: ptr.To("/validate-kubeflow-org-v1-pytorchjob")}},
			Rules: []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Delete},
				Rule: admissionv1.Rule{APIGroups: []string{"kubeflow.org"}, APIVersions: []string{"v1"}, Resources: []string{"pytorchjobs"}}}},
			FailurePolicy: ptr.To(admissionv1.Ignore), SideEffects: ptr.To(admissionv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](1),
		}}}
	if _, err := cluster.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, webhooks, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	operator, err := cluster.StartWorkloadController("training-operator",
		"--kubeconfig="+localcluster.KubeconfigArg, "--gang-scheduler-name=hypernode-scheduler", "--enable-scheme=pytorchjob",
		"--namespace="+ns, "--metrics-bind-address=0", "--health-probe-bind-address=0", fmt.Sprintf("--webhook-server-port=%d", freePort(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Before the scene's teardown, or the operator would recreate the pods it deletes.
		if err := operator.Stop(10 * time.Second); err != nil {
			t.Errorf("stopping training-operator: %v", err)
		}
		ctx := context.Background()
		_ = dyn.Resource(pyTorchJobs).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = cluster.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, webhooks.Name, metav1.DeleteOptions{})
		_ = os.RemoveAll(trainingOperatorCertDir)
	})
}

// webhookCert returns a CA and a serving certificate for dnsName signed by it, PEM-encoded,
// valid for a year (the operator's rotator keeps certificates valid beyond its lookahead).
func webhookCert(t *testing.T, dnsName string) (ca, caKey, cert, key []byte) {
	t.Helper()
	newKey := func() (*ecdsa.PrivateKey, []byte) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return k, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	now := time.Now()
	caPriv, caKey := newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "training-operator-ca", Organization: []string{"training-operator"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caPriv.PublicKey, caPriv)
	if err != nil {
		t.Fatal(err)
	}
	priv, key := newKey()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &priv.PublicKey, caPriv)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), caKey,
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key
}

// freePort returns a loopback port nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}
