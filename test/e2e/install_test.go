package e2e

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
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
	"sigs.k8s.io/yaml"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/localcluster"
)

// TestSchedulerRunsUnderManifestRBAC checks who the scheduler is and what it may not do. That
// it may do everything it needs is checked by every test's cleanup (assertSchedulerAuthorized):
// the scheduler's log must show no refused request.
func TestSchedulerRunsUnderManifestRBAC(t *testing.T) {
	t.Cleanup(func() { assertSchedulerAuthorized(t, cluster.Dir) })
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
		switch obj.GetKind() + "/" + obj.GetName() {
		case "ConfigMap/hypernode-scheduler-config":
			data, _, _ := unstructured.NestedString(obj.Object, "data", "config.yaml")
			configYAML = data
		case "Deployment/hypernode-scheduler":
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
		// hypernode-controller (test/e2e/controller_install_test.go checks its wiring).
		"ServiceAccount/hypernode-controller",
		"ClusterRole/hypernode-controller",
		"ClusterRoleBinding/hypernode-controller",
		"Role/hypernode-controller",
		"RoleBinding/hypernode-controller",
		"Role/hypernode-controller-events",
		"RoleBinding/hypernode-controller-events",
		"ConfigMap/hypernode-controller",
		"Deployment/hypernode-controller",
		"PodDisruptionBudget/hypernode-scheduler",
		"PodDisruptionBudget/hypernode-controller",
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
	assertDeploymentWiring(t, objs)
	assertReplicasKeptApart(t, objs)
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

// assertDeploymentWiring checks what a schema check cannot: the Deployment runs as the
// ServiceAccount the RBAC binds, reads --config from where the ConfigMap is mounted, and the
// config's leader Lease is the one the leader-election Role names.
func assertDeploymentWiring(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var deployment, role *unstructured.Unstructured
	var configYAML string
	for _, obj := range objs {
		switch obj.GetKind() + "/" + obj.GetName() {
		case "Deployment/hypernode-scheduler":
			deployment = obj
		case "Role/hypernode-scheduler-leader-election":
			role = obj
		case "ConfigMap/hypernode-scheduler-config":
			configYAML, _, _ = unstructured.NestedString(obj.Object, "data", "config.yaml")
		}
	}
	if deployment == nil || role == nil {
		t.Fatal("the Deployment or the leader-election Role is missing")
	}
	podSpec, _, _ := unstructured.NestedMap(deployment.Object, "spec", "template", "spec")
	if sa, _ := podSpec["serviceAccountName"].(string); sa != localcluster.SchedulerServiceAccount || deployment.GetNamespace() != localcluster.SchedulerNamespace {
		t.Errorf("the Deployment runs as %s/%s, want %s/%s", deployment.GetNamespace(), sa, localcluster.SchedulerNamespace, localcluster.SchedulerServiceAccount)
	}
	volumes, _, _ := unstructured.NestedSlice(podSpec, "volumes")
	containers, _, _ := unstructured.NestedSlice(podSpec, "containers")
	if len(volumes) != 1 || len(containers) != 1 {
		t.Fatalf("the Deployment has %d volumes and %d containers, want 1 and 1", len(volumes), len(containers))
	}
	volume := volumes[0].(map[string]any)
	if cm, _, _ := unstructured.NestedString(volume, "configMap", "name"); cm != "hypernode-scheduler-config" {
		t.Errorf("the config volume mounts ConfigMap %q", cm)
	}
	container := containers[0].(map[string]any)
	mounts, _, _ := unstructured.NestedSlice(container, "volumeMounts")
	command, _, _ := unstructured.NestedStringSlice(container, "command")
	mountPath := ""
	for _, m := range mounts {
		if m.(map[string]any)["name"] == volume["name"] {
			mountPath, _ = m.(map[string]any)["mountPath"].(string)
		}
	}
	if want := "--config=" + mountPath + "/config.yaml"; mountPath == "" || !slices.Contains(command, want) {
		t.Errorf("the scheduler's command %v lacks %q (the ConfigMap's mount)", command, want)
	}
	var config struct {
		LeaderElection struct {
			LeaderElect       bool   `json:"leaderElect"`
			ResourceName      string `json:"resourceName"`
			ResourceNamespace string `json:"resourceNamespace"`
		} `json:"leaderElection"`
		Profiles []struct {
			SchedulerName string `json:"schedulerName"`
		} `json:"profiles"`
	}
	if err := yaml.Unmarshal([]byte(configYAML), &config); err != nil {
		t.Fatal(err)
	}
	le := config.LeaderElection
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	var leaseNames []any
	for _, r := range rules {
		if names, ok := r.(map[string]any)["resourceNames"].([]any); ok {
			leaseNames = names
		}
	}
	if !le.LeaderElect || le.ResourceNamespace != role.GetNamespace() || len(leaseNames) != 1 || leaseNames[0] != le.ResourceName {
		t.Errorf("leader election %+v does not match the Role in %s for Leases %v", le, role.GetNamespace(), leaseNames)
	}
	if len(config.Profiles) != 1 || config.Profiles[0].SchedulerName != "hypernode-scheduler" {
		t.Errorf("profiles %+v, want one named hypernode-scheduler", config.Profiles)
	}
}

// assertReplicasKeptApart checks that each Deployment's PodDisruptionBudget and pod
// anti-affinity select the Deployment's own pods, by its template's labels.
func assertReplicasKeptApart(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	byKind := map[string]*unstructured.Unstructured{}
	for _, obj := range objs {
		byKind[obj.GetKind()+"/"+obj.GetName()] = obj
	}
	for _, name := range []string{"hypernode-scheduler", "hypernode-controller"} {
		d, pdb := byKind["Deployment/"+name], byKind["PodDisruptionBudget/"+name]
		if d == nil || pdb == nil {
			t.Errorf("%s: Deployment %v, PodDisruptionBudget %v", name, d != nil, pdb != nil)
			continue
		}
		labels, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
		selected, _, _ := unstructured.NestedStringMap(pdb.Object, "spec", "selector", "matchLabels")
		if !maps.Equal(labels, selected) {
			t.Errorf("%s: the PodDisruptionBudget selects %v, the pods are labelled %v", name, selected, labels)
		}
		// An int or a string in the schema (intstr); whatever number type the decoder gave.
		if most, _, _ := unstructured.NestedFieldNoCopy(pdb.Object, "spec", "maxUnavailable"); fmt.Sprint(most) != "1" {
			t.Errorf("%s: maxUnavailable %v, want 1", name, most)
		}
		terms, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution")
		if len(terms) != 1 {
			t.Errorf("%s: %d preferred anti-affinity terms, want 1", name, len(terms))
			continue
		}
		apart, _, _ := unstructured.NestedStringMap(terms[0].(map[string]any), "podAffinityTerm", "labelSelector", "matchLabels")
		if key, _, _ := unstructured.NestedString(terms[0].(map[string]any), "podAffinityTerm", "topologyKey"); key != "kubernetes.io/hostname" || !maps.Equal(labels, apart) {
			t.Errorf("%s: anti-affinity by %q among %v, want by kubernetes.io/hostname among %v", name, key, apart, labels)
		}
	}
}

// TestSchedulerFeatureDefaults: the binary turns NominatedNodeNameForExpectation off by default
// (plugins.FeatureDefaults); the running scheduler reports it through its own metrics.
func TestSchedulerFeatureDefaults(t *testing.T) {
	metrics, err := cluster.SchedulerMetrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	const want = `kubernetes_feature_enabled{name="NominatedNodeNameForExpectation",stage="BETA"} 0`
	if !strings.Contains(metrics, want) {
		var got []string
		for _, line := range strings.Split(metrics, "\n") {
			if strings.Contains(line, "NominatedNodeNameForExpectation") {
				got = append(got, line)
			}
		}
		t.Errorf("the scheduler's metrics lack %q; they say %v", want, got)
	}
}
