package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/localcluster"
)

// TestSchedulerRunsUnderManifestRBAC checks who the scheduler is and what it may not do. That
// it may do everything it needs is checked by every test's cleanup (assertSchedulerAuthorized):
// the scheduler's log must show no refused request.
func TestSchedulerRunsUnderManifestRBAC(t *testing.T) {
	t.Cleanup(func() { assertSchedulerAuthorized(t) })
	ctx := t.Context()
	cfg, err := clientcmd.BuildConfigFromFlags("", cluster.SchedulerKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const wantUser = "system:serviceaccount:" + localcluster.SchedulerNamespace + ":" + localcluster.SchedulerServiceAccount
	if got := review.Status.UserInfo.Username; got != wantUser {
		t.Errorf("the scheduler authenticates as %q, want %q", got, wantUser)
	}
	// Least privilege: no Secrets, and not the default scheduler's leader Lease.
	if _, err := client.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing Secrets as the scheduler: got %v, want Forbidden", err)
	}
	if _, err := client.CoordinationV1().Leases("kube-system").Get(ctx, "kube-scheduler", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("reading the default scheduler's Lease as the scheduler: got %v, want Forbidden", err)
	}
	// The running scheduler holds its own Lease (StartScheduler waited for it).
	holder, err := cluster.LeaseHolder(ctx)
	if err != nil || holder == "" {
		t.Errorf("Lease %s/%s holder %q (%v), want the running scheduler", localcluster.SchedulerNamespace, localcluster.SchedulerLease, holder, err)
	}
}

// TestManifestsInstall renders manifests/kustomization.yaml as `kubectl apply -k manifests/`
// would, and has the apiserver validate every object (server-side dry run): the Deployment
// and everything it refers to are well-formed, and the ConfigMap carries exactly
// manifests/scheduler/config.yaml, the one file that holds the scheduler's configuration.
func TestManifestsInstall(t *testing.T) {
	ctx := t.Context()
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(repoRoot, "manifests"))
	if err != nil {
		t.Fatalf("kustomize build manifests/: %v", err)
	}
	rendered, err := resMap.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := localcluster.Decode(rendered)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var configYAML, image string
	for _, obj := range objs {
		kinds = append(kinds, obj.GetKind()+"/"+obj.GetName())
		switch obj.GetKind() {
		case "ConfigMap":
			data, _, _ := unstructured.NestedString(obj.Object, "data", "config.yaml")
			configYAML = data
		case "Deployment":
			containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
			if len(containers) == 1 {
				image, _ = containers[0].(map[string]any)["image"].(string)
			}
		}
	}
	wantKinds := []string{
		"Namespace/hypernode-system",
		"ServiceAccount/hypernode-scheduler",
		"Role/hypernode-scheduler-leader-election",
		"ClusterRole/hypernode-scheduler",
		"RoleBinding/hypernode-scheduler-authentication-reader",
		"RoleBinding/hypernode-scheduler-leader-election",
		"ClusterRoleBinding/hypernode-scheduler",
		"ConfigMap/hypernode-scheduler-config",
		"Deployment/hypernode-scheduler",
		"CustomResourceDefinition/hypernodes.topology.volcano.sh",
		"CustomResourceDefinition/podgroups.scheduling.x-k8s.io",
	}
	if !sameSet(wantKinds, kinds) {
		t.Errorf("kustomize build manifests/ renders %v, want %v", kinds, wantKinds)
	}
	source, err := os.ReadFile(filepath.Join(repoRoot, "manifests", "scheduler", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(source), bytes.TrimSpace([]byte(configYAML))) {
		t.Errorf("the ConfigMap's config.yaml differs from manifests/scheduler/config.yaml; run `make generate`")
	}
	if image != "ghcr.io/hypernode-dev/hypernode-scheduler:v0.1.0" {
		t.Errorf("Deployment image %q", image)
	}
	if _, err := cluster.Applier.Apply(ctx, objs, "", true); err != nil {
		t.Errorf("the apiserver rejects the rendered manifests: %v", err)
	}
}

// TestInvalidHyperNodeRejected applies a HyperNode whose member sets two selectors: the
// apiserver refuses it with the CRD's own message, and nothing is stored.
func TestInvalidHyperNodeRejected(t *testing.T) {
	ctx := t.Context()
	objs, err := localcluster.Decode([]byte(`
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata:
  name: two-selectors
spec:
  tier: 1
  members:
  - type: Node
    selector:
      exactMatch:
        name: node-0
      regexMatch:
        pattern: "^node-"
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = cluster.Applier.Apply(ctx, objs, "", false)
	const want = `spec.members[0].selector: Invalid value: exactly one of exactMatch, regexMatch or labelMatch must be set`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("applying an invalid HyperNode: got %v, want an error containing %q", err, want)
	}
	if !apierrors.IsInvalid(errorsCause(err)) {
		t.Errorf("the apiserver's error is not Invalid (422): %v", err)
	}
	if _, err := runner.Clients.Topology.TopologyV1alpha1().HyperNodes().Get(ctx, "two-selectors", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the invalid HyperNode was stored: %v", err)
	}
}
