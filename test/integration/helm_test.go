package integration

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
	"github.com/hypernode-dev/hypernode-scheduler/test/util"
)

// chartDir is the Helm chart; helm is built into bin/ (make bin/helm; make test-integration
// builds it).
var chartDir = filepath.Join(util.RepoRoot(), "charts", "hypernode-scheduler")

// helm runs bin/helm and returns its standard output.
func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	stdout, stderr, err := runHelm(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout
}

// runHelm runs bin/helm with a home of its own: its standard output and error.
func runHelm(t *testing.T, args ...string) ([]byte, string, error) {
	t.Helper()
	bin := filepath.Join(util.RepoRoot(), "bin", "helm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: %v (make bin/helm builds it)", bin, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.Bytes(), stderr.String(), err
}

// TestHelmChartRefusesBadValues: a value the chart does not know, of the wrong type, or args
// for a plugin it does not configure is refused by the chart's schema, naming it; nothing is
// rendered.
func TestHelmChartRefusesBadValues(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"scheduler.replica=3", "at '/scheduler': additional properties 'replica' not allowed"},
		{"scheduler.replicas=two", "at '/scheduler/replicas': got string, want integer"},
		{"scheduler.pluginArgs.Gnag.x=1", "value must be one of 'Gang', 'NetworkTopologyAware'"},
		{"image.pullPolicy=Sometimes", "at '/image/pullPolicy': value must be one of"},
	} {
		stdout, stderr, err := runHelm(t, "template", "hns", chartDir, "--set", tc.set)
		if err == nil || !strings.Contains(stderr, tc.want) || len(stdout) != 0 {
			t.Errorf("--set %s: %v, rendered %d bytes, stderr %q; want a refusal saying %q", tc.set, err, len(stdout), stderr, tc.want)
		}
	}
}

// objects parses a stream of YAML documents, by "Kind namespace/name".
func objects(t *testing.T, stream []byte) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(stream), -1) {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if len(obj.Object) == 0 {
			continue
		}
		out[fmt.Sprintf("%s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())] = obj
	}
	return out
}

// schedulerConfig is the KubeSchedulerConfiguration in the scheduler's ConfigMap.
func schedulerConfig(t *testing.T, objs map[string]*unstructured.Unstructured, namespace string) map[string]any {
	t.Helper()
	cm := objs["ConfigMap "+namespace+"/hypernode-scheduler-config"]
	if cm == nil {
		t.Fatalf("no ConfigMap %s/hypernode-scheduler-config", namespace)
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	cfg := map[string]any{}
	if err := yaml.Unmarshal([]byte(data), &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// chartOnly are what the chart adds to the manifests' objects: its labels, the CRDs' keep
// policy, the configuration's checksum on the scheduler's pods.
var chartOnly = struct{ labels, annotations []string }{
	labels:      []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/part-of"},
	annotations: []string{"helm.sh/resource-policy", "hypernode.dev/config-sha256"},
}

// withoutChartOnly removes chartOnly from obj (and its pod template), and the scheduler's
// configuration text, compared parsed.
func withoutChartOnly(obj *unstructured.Unstructured) *unstructured.Unstructured {
	obj = obj.DeepCopy()
	for _, path := range [][]string{{"metadata"}, {"spec", "template", "metadata"}} {
		for _, field := range []struct {
			name string
			keys []string
		}{{"labels", chartOnly.labels}, {"annotations", chartOnly.annotations}} {
			m, found, _ := unstructured.NestedStringMap(obj.Object, append(path, field.name)...)
			if !found {
				continue
			}
			for _, k := range field.keys {
				delete(m, k)
			}
			if len(m) == 0 {
				unstructured.RemoveNestedField(obj.Object, append(path, field.name)...)
			} else {
				_ = unstructured.SetNestedStringMap(obj.Object, m, append(path, field.name)...)
			}
		}
	}
	if obj.GetKind() == "ConfigMap" && obj.GetName() == "hypernode-scheduler-config" {
		unstructured.RemoveNestedField(obj.Object, "data")
	}
	return obj
}

// TestHelmChartLints: helm lint passes on the chart, with its defaults and other values.
func TestHelmChartLints(t *testing.T) {
	helm(t, "lint", "--strict", chartDir)
	helm(t, "lint", "--strict", chartDir, "--set", "crds.install=false,controller.enabled=false,scheduler.replicas=1")
}

// TestHelmChartRendersTheManifests: with its defaults, the chart renders the objects `kubectl
// apply -k manifests/` creates (but the namespace, which `helm install --create-namespace`
// makes), each the same but for the chart's labels, the CRDs' keep policy and the
// configuration's checksum; the scheduler's configuration is the same value for value.
func TestHelmChartRendersTheManifests(t *testing.T) {
	const ns = "hypernode-system"
	rendered := objects(t, helm(t, "template", "hypernode-scheduler", chartDir, "--namespace", ns))
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(util.RepoRoot(), "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	kustomized, err := resMap.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	want := objects(t, kustomized)
	delete(want, "Namespace /"+ns)
	if diff := cmp.Diff(slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(rendered))); diff != "" {
		t.Fatalf("objects (-kustomize +helm):\n%s", diff)
	}
	for key, obj := range want {
		if diff := cmp.Diff(withoutChartOnly(obj).Object, withoutChartOnly(rendered[key]).Object); diff != "" {
			t.Errorf("%s (-kustomize +helm):\n%s", key, diff)
		}
	}
	if diff := cmp.Diff(schedulerConfig(t, want, ns), schedulerConfig(t, rendered, ns)); diff != "" {
		t.Errorf("the scheduler's configuration (-kustomize +helm):\n%s", diff)
	}
	for _, crd := range []string{"CustomResourceDefinition /hypernodes.topology.volcano.sh", "CustomResourceDefinition /podgroups.scheduling.x-k8s.io"} {
		if got := rendered[crd].GetAnnotations()["helm.sh/resource-policy"]; got != "keep" {
			t.Errorf("%s: resource policy %q, want keep", crd, got)
		}
	}
}

// TestHelmChartValues: what the values set, the chart renders.
func TestHelmChartValues(t *testing.T) {
	const ns = "ml-system"
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(`
image: {repository: registry.example.com/hns, tag: v9, pullPolicy: Always}
crds: {install: false}
scheduler:
  name: ml-scheduler
  replicas: 3
  leaderElection: {enabled: false}
  pluginArgs:
    Gang: {defaultScheduleTimeoutSeconds: 30}
    NetworkTopologyAware:
      defaultNetworkTopology: {mode: soft, highestTierAllowed: 1}
      hyperNodeBinPack: {cpu: 1, memory: 1, resources: {}}
  nodeSelector: {node-role.kubernetes.io/control-plane: ""}
  tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]
  resources: {requests: {cpu: "2", memory: 2Gi}}
  verbosity: 4
controller:
  enabled: false
`), 0o600); err != nil {
		t.Fatal(err)
	}
	objs := objects(t, helm(t, "template", "hns", chartDir, "--namespace", ns, "--values", values))
	for key := range objs {
		if strings.HasPrefix(key, "CustomResourceDefinition ") || strings.Contains(key, "hypernode-controller") {
			t.Errorf("rendered %s, which the values turn off", key)
		}
	}
	cfg := schedulerConfig(t, objs, ns)
	profile := cfg["profiles"].([]any)[0].(map[string]any)
	args := map[string]any{}
	for _, pc := range profile["pluginConfig"].([]any) {
		args[pc.(map[string]any)["name"].(string)] = pc.(map[string]any)["args"]
	}
	got := map[string]any{
		"schedulerName":       profile["schedulerName"],
		"leaderElection":      cfg["leaderElection"].(map[string]any)["leaderElect"],
		"leaseNamespace":      cfg["leaderElection"].(map[string]any)["resourceNamespace"],
		"timeout":             args["Gang"].(map[string]any)["defaultScheduleTimeoutSeconds"],
		"holdWait":            args["Gang"].(map[string]any)["hold"].(map[string]any)["waitSeconds"], // kept from config.yaml
		"defaultTopology":     args["NetworkTopologyAware"].(map[string]any)["defaultNetworkTopology"],
		"candidateStrategy":   args["NetworkTopologyAware"].(map[string]any)["candidateScoringStrategy"],
		"binPack":             args["NetworkTopologyAware"].(map[string]any)["hyperNodeBinPack"], // replaced whole: no GPU weights
		"bindingSubjectSpace": objs["RoleBinding "+ns+"/hypernode-scheduler-leader-election"].Object["subjects"].([]any)[0].(map[string]any)["namespace"],
	}
	want := map[string]any{
		"schedulerName": "ml-scheduler", "leaderElection": false, "leaseNamespace": ns, "timeout": float64(30), "holdWait": float64(120),
		"defaultTopology": map[string]any{"mode": "soft", "highestTierAllowed": float64(1)}, "candidateStrategy": "BinPack", "bindingSubjectSpace": ns,
		"binPack": map[string]any{"cpu": float64(1), "memory": float64(1), "resources": map[string]any{}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("configuration (-want +got):\n%s", diff)
	}
	d := objs["Deployment "+ns+"/hypernode-scheduler"]
	pod, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec")
	c := pod["containers"].([]any)[0].(map[string]any)
	gotPod := map[string]any{
		"replicas": d.Object["spec"].(map[string]any)["replicas"], "image": c["image"], "pullPolicy": c["imagePullPolicy"],
		"command": c["command"], "resources": c["resources"], "nodeSelector": pod["nodeSelector"], "tolerations": pod["tolerations"],
		"antiAffinityKey": pod["affinity"].(map[string]any)["podAntiAffinity"].(map[string]any)["preferredDuringSchedulingIgnoredDuringExecution"].([]any)[0].(map[string]any)["podAffinityTerm"].(map[string]any)["topologyKey"],
	}
	wantPod := map[string]any{
		"replicas": float64(3), "image": "registry.example.com/hns:v9", "pullPolicy": "Always",
		"command":      []any{"/kube-scheduler", "--config=/etc/hypernode-scheduler/config.yaml", "--v=4"},
		"resources":    map[string]any{"requests": map[string]any{"cpu": "2", "memory": "2Gi"}},
		"nodeSelector": map[string]any{"node-role.kubernetes.io/control-plane": ""},
		"tolerations":  []any{map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}},
		// No affinity in the values: the manifest's, the replicas preferably apart.
		"antiAffinityKey": "kubernetes.io/hostname",
	}
	if diff := cmp.Diff(wantPod, gotPod); diff != "" {
		t.Errorf("the scheduler's Deployment (-want +got):\n%s", diff)
	}
	if pdb := objs["PodDisruptionBudget "+ns+"/hypernode-scheduler"]; pdb == nil {
		t.Errorf("no PodDisruptionBudget for the scheduler's replicas")
	}

	// The controller's discovery configuration and credentials Secret.
	discovery := "networkTopologyDiscovery:\n- source: label\n  enabled: true\n  config:\n    presets: [gke]\n"
	if err := os.WriteFile(values, []byte("controller:\n  ufmCredentialsSecret: fabric-ufm\n  discovery: |\n"+indent(discovery, "    ")), 0o600); err != nil {
		t.Fatal(err)
	}
	objs = objects(t, helm(t, "template", "hns", chartDir, "--namespace", ns, "--values", values))
	conf, _, _ := unstructured.NestedString(objs["ConfigMap "+ns+"/hypernode-controller"].Object, "data", "hypernode-controller.conf")
	if conf != discovery {
		t.Errorf("discovery configuration %q, want %q", conf, discovery)
	}
	var secrets []any
	for _, rule := range objs["Role "+ns+"/hypernode-controller"].Object["rules"].([]any) {
		if r := rule.(map[string]any); slices.Contains(r["resources"].([]any), any("secrets")) {
			secrets = r["resourceNames"].([]any)
		}
	}
	if diff := cmp.Diff([]any{"fabric-ufm"}, secrets); diff != "" {
		t.Errorf("Secrets the controller may read (-want +got):\n%s", diff)
	}
	containers, _, _ := unstructured.NestedSlice(objs["Deployment "+ns+"/hypernode-controller"].Object, "spec", "template", "spec", "containers")
	if cmd := containers[0].(map[string]any)["command"].([]any); !slices.Contains(cmd, any("--namespace="+ns)) {
		t.Errorf("controller command %v does not name the release's namespace", cmd)
	}
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "")
}

// TestHelmInstallUpgradeUninstall: on a cluster without this project's CRDs, `helm install`
// creates everything; kube-scheduler started as the Deployment starts it, with the installed
// ConfigMap's configuration (and a kubeconfig where the pod would have its ServiceAccount),
// places a hard tier-1 gang in one leaf of the seed tree; `helm upgrade` with another plugin
// arg changes the configuration and rolls the scheduler's pods; `helm uninstall` removes
// every object of the release but the CRDs.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	ctx := context.Background()
	cp, err := util.StartBareControlPlane(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	c, err := util.NewClients(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "hypernode-system"
	helm(t, "install", "hypernode-scheduler", chartDir, "--namespace", ns, "--create-namespace", "--kubeconfig", cp.Kubeconfig)
	if err := util.WaitCRDsEstablished(ctx, cp.Config, "hypernodes.topology.volcano.sh", "podgroups.scheduling.x-k8s.io"); err != nil {
		t.Fatal(err)
	}
	installed := helmManifest(t, cp.Kubeconfig, ns)

	// The scheduler runs as the chart's ServiceAccount, under the chart's RBAC.
	saKubeconfig, err := cp.ServiceAccountKubeconfig(ctx, t.TempDir(), ns, "hypernode-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	sched := util.StartSchedulerBinary(t, installedSchedulerConfig(t, c, ns, saKubeconfig), saKubeconfig)
	for i := range 4 {
		if err := util.CreateNodes(ctx, c.Kube, util.Node(fmt.Sprintf("node-%d", i), "8", "16Gi", nil)); err != nil {
			t.Fatal(err)
		}
	}
	for _, hn := range seedHyperNodes(t) {
		if _, err := c.Topology.TopologyV1alpha1().HyperNodes().Create(ctx, hn, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := util.CreateNamespace(ctx, c.Kube, "helm-job")
	if err != nil {
		t.Fatal(err)
	}
	if err := util.CreatePodGroup(ctx, c.Scheduling, util.PodGroup(jobs, "train", 2, map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`})); err != nil {
		t.Fatal(err)
	}
	names, err := util.CreatePods(ctx, c.Kube, util.GangPods(jobs, "train", "hypernode-scheduler", "6", 2)...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := util.WaitForPodsBound(ctx, c.Kube, jobs, names, boundTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if leaves := sortedValues(got); !slices.Equal(leaves, []string{"node-0", "node-1"}) && !slices.Equal(leaves, []string{"node-2", "node-3"}) {
		t.Errorf("gang placed on %v, want both members in one leaf (node-0, node-1 or node-2, node-3)", got)
	}
	sched.Stop()

	before := podTemplateChecksum(t, c, ns)
	helm(t, "upgrade", "hypernode-scheduler", chartDir, "--namespace", ns, "--kubeconfig", cp.Kubeconfig,
		"--set", "scheduler.pluginArgs.Gang.defaultScheduleTimeoutSeconds=30")
	cfg := map[string]any{}
	if err := yaml.Unmarshal([]byte(installedSchedulerConfig(t, c, ns, "")), &cfg); err != nil {
		t.Fatal(err)
	}
	for _, pc := range cfg["profiles"].([]any)[0].(map[string]any)["pluginConfig"].([]any) {
		if pc := pc.(map[string]any); pc["name"] == "Gang" {
			if got := pc["args"].(map[string]any)["defaultScheduleTimeoutSeconds"]; got != float64(30) {
				t.Errorf("after the upgrade, Gang's defaultScheduleTimeoutSeconds = %v, want 30", got)
			}
		}
	}
	if after := podTemplateChecksum(t, c, ns); after == before {
		t.Errorf("the upgrade left the scheduler's pod template as it was (%s): its pods would keep the old configuration", after)
	}

	helm(t, "uninstall", "hypernode-scheduler", "--namespace", ns, "--kubeconfig", cp.Kubeconfig, "--wait")
	for _, obj := range installed {
		_, err := getObject(ctx, cp, obj)
		kept := obj.GetKind() == "CustomResourceDefinition"
		switch {
		case kept && err != nil:
			t.Errorf("%s %s was removed: %v", obj.GetKind(), obj.GetName(), err)
		case !kept && !apierrors.IsNotFound(err):
			t.Errorf("%s %s/%s is left after uninstall (%v)", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
}

// installedSchedulerConfig is the configuration in the installed ConfigMap, with kubeconfig as
// the connection's (none: as installed).
func installedSchedulerConfig(t *testing.T, c util.Clients, namespace, kubeconfig string) string {
	t.Helper()
	cm, err := c.Kube.CoreV1().ConfigMaps(namespace).Get(context.Background(), "hypernode-scheduler-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if kubeconfig == "" {
		return cm.Data["config.yaml"]
	}
	cfg := map[string]any{}
	if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &cfg); err != nil {
		t.Fatal(err)
	}
	// The one change: where the pod would use its mounted token, the process uses a kubeconfig.
	cfg["clientConnection"].(map[string]any)["kubeconfig"] = kubeconfig
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// helmManifest is the objects of the release, as Helm recorded them.
func helmManifest(t *testing.T, kubeconfig, namespace string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, obj := range objects(t, helm(t, "get", "manifest", "hypernode-scheduler", "--namespace", namespace, "--kubeconfig", kubeconfig)) {
		out = append(out, obj)
	}
	if len(out) == 0 {
		t.Fatal("the release has no objects")
	}
	return out
}

// getObject reads obj's live counterpart.
func getObject(ctx context.Context, cp *util.ControlPlane, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	client, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		return client.Resource(mapping.Resource).Namespace(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{})
	}
	return client.Resource(mapping.Resource).Get(ctx, obj.GetName(), metav1.GetOptions{})
}

// podTemplateChecksum is the configuration checksum on the scheduler Deployment's pods.
func podTemplateChecksum(t *testing.T, c util.Clients, namespace string) string {
	t.Helper()
	d, err := c.Kube.AppsV1().Deployments(namespace).Get(context.Background(), "hypernode-scheduler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum := d.Spec.Template.Annotations["hypernode.dev/config-sha256"]
	if sum == "" {
		t.Fatal("the scheduler's pod template has no configuration checksum")
	}
	return sum
}
