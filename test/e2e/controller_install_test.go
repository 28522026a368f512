package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/app"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/source"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/localcluster"
)

// TestControllerManifestsWiring checks what a schema check cannot in the rendered
// kustomization: the controller's Deployment runs the binary the image holds, as the
// ServiceAccount the RBAC binds, in the namespace of its Role, with the ConfigMap, Lease and
// credentials Secret the Role names; the shipped configuration parses, every source in it
// builds, and node labels are off.
func TestControllerManifestsWiring(t *testing.T) {
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
	byKey := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		byKey[o.GetKind()+"/"+o.GetName()] = o
	}
	deployment, role, configMap := byKey["Deployment/hypernode-controller"], byKey["Role/hypernode-controller"], byKey["ConfigMap/hypernode-controller"]
	if deployment == nil || role == nil || configMap == nil {
		t.Fatal("the controller's Deployment, Role or ConfigMap is missing from the kustomization")
	}
	podSpec, _, _ := unstructured.NestedMap(deployment.Object, "spec", "template", "spec")
	if sa, _ := podSpec["serviceAccountName"].(string); sa != localcluster.ControllerServiceAccount {
		t.Errorf("the Deployment runs as %q, want %q", sa, localcluster.ControllerServiceAccount)
	}
	containers, _, _ := unstructured.NestedSlice(podSpec, "containers")
	if len(containers) != 1 {
		t.Fatalf("%d containers", len(containers))
	}
	container := containers[0].(map[string]any)
	command, _, _ := unstructured.NestedStringSlice(container, "command")
	flags := map[string]string{}
	for _, arg := range command[1:] {
		k, v, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		flags[k] = v
	}
	ns := deployment.GetNamespace()
	if command[0] != "/hypernode-controller" {
		t.Errorf("the Deployment runs %q, want /hypernode-controller", command[0])
	}
	dockerfile, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil || !strings.Contains(string(dockerfile), "/out/hypernode-controller /hypernode-controller") {
		t.Errorf("the Dockerfile does not put /hypernode-controller into the image (%v)", err)
	}
	if image, _ := container["image"].(string); image != "ghcr.io/hypernode-dev/hypernode-scheduler:v0.1.0" {
		t.Errorf("image %q, want the scheduler's image", image)
	}
	if flags["namespace"] != ns || role.GetNamespace() != ns || configMap.GetNamespace() != ns {
		t.Errorf("--namespace=%s, Deployment in %s, Role in %s, ConfigMap in %s: want one namespace", flags["namespace"], ns, role.GetNamespace(), configMap.GetNamespace())
	}
	if flags["config-map"] != configMap.GetName() {
		t.Errorf("--config-map=%s, the ConfigMap is %s", flags["config-map"], configMap.GetName())
	}
	// The Role names exactly what the controller reads.
	names := map[string][]string{}
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	for _, r := range rules {
		rule := r.(map[string]any)
		resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
		resourceNames, _, _ := unstructured.NestedStringSlice(rule, "resourceNames")
		for _, res := range resources {
			names[res] = append(names[res], resourceNames...)
		}
	}
	if !slices.Equal(names["configmaps"], []string{configMap.GetName()}) {
		t.Errorf("the Role names ConfigMaps %v, want [%s]", names["configmaps"], configMap.GetName())
	}
	if !slices.Equal(names["leases"], []string{app.LeaseName}) {
		t.Errorf("the Role names Leases %v, want [%s]", names["leases"], app.LeaseName)
	}
	conf, _, _ := unstructured.NestedString(configMap.Object, "data", config.Key)
	parsed, err := config.Parse(conf, ns)
	if err != nil {
		t.Fatalf("the shipped %s: %v", config.Key, err)
	}
	// Node labels ship off, as a section that parses: turning them on is one word.
	if len(parsed.NodeLabelsErrs) > 0 || parsed.NodeLabels.Enabled || len(parsed.Warnings) > 0 {
		t.Errorf("the shipped %s: nodeLabels %s, errors %v, warnings %v; want a valid section, off", config.Key, parsed.NodeLabels, parsed.NodeLabelsErrs, parsed.Warnings)
	}
	var secrets []string
	for _, e := range parsed.Entries {
		if len(e.Errs) > 0 {
			t.Errorf("the shipped %s: %v", config.Key, e.Errs)
			continue
		}
		if _, errs := discovery.Factories[e.Source](e, source.Env{}); len(errs) > 0 {
			t.Errorf("the shipped source %s does not build: %v", e.Source, errs)
		}
		if e.Credentials != nil && e.Credentials.SecretRef != nil {
			if e.Credentials.SecretRef.Namespace != ns {
				t.Errorf("the shipped secretRef is in %s, not in the Role's namespace %s", e.Credentials.SecretRef.Namespace, ns)
			}
			secrets = append(secrets, e.Credentials.SecretRef.Name)
		}
	}
	if !slices.Equal(names["secrets"], secrets) {
		t.Errorf("the Role names Secrets %v, the shipped configuration %v", names["secrets"], secrets)
	}
}
