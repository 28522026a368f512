package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	schedfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"

	topologyfake "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned/fake"
	hntesting "github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode/testing"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/inspect"
)

// fakeClients serves one leaf of one node and a PodGroup team-a/job with a pending member.
func fakeClients(hyperNodesServed bool) clientsFunc {
	return func(*genericclioptions.ConfigFlags) (inspect.Clients, error) {
		node := &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n0"},
			Status: v1.NodeStatus{
				Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourcePods: resource.MustParse("10")},
				Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
			},
		}
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "job-0",
				Labels: map[string]string{schedulingv1alpha1.PodGroupLabel: "job"}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}}},
		}
		leaf := hntesting.MakeHyperNode("leaf").Tier(1).Nodes("n0").Obj()
		pg := &schedulingv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "job"},
			Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: 1},
		}
		topology := topologyfake.NewSimpleClientset(leaf)
		if !hyperNodesServed {
			topology.PrependReactor("list", "hypernodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "hypernodes"}, "")
			})
		}
		return inspect.Clients{
			Kube:       kubefake.NewClientset(node, pod),
			Topology:   topology,
			Scheduling: schedfake.NewSimpleClientset(pg),
		}, nil
	}
}

func TestCommandLine(t *testing.T) {
	// No kubeconfig of the machine running the tests may leak in.
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	tests := []struct {
		name       string
		args       []string
		crdMissing bool
		wantCode   int
		// wantOut is a prefix of the standard output, wantInOut a part of it; wantErr the whole
		// standard error.
		wantOut, wantInOut string
		wantErr            string
	}{
		{name: "tree", args: []string{"tree"}, wantCode: 0,
			wantOut: "Resource cpu. NODES: usable/total (usable: ready and not cordoned). FREE:\n"},
		{name: "tree as JSON", args: []string{"tree", "-o", "json"}, wantCode: 0, wantOut: "{\n  \"resource\": \"cpu\","},
		{name: "explain", args: []string{"explain", "job", "-n", "team-a"}, wantCode: 0,
			wantOut: "PodGroup team-a/job: Pending\n"},
		{name: "explain as JSON", args: []string{"-n", "team-a", "explain", "job", "--output=json"}, wantCode: 0,
			wantOut: "{\n  \"podGroup\": \"team-a/job\","},
		{name: "PodGroup not found", args: []string{"explain", "nope", "-n", "team-a"}, wantCode: 1,
			wantErr: "error: PodGroup not found: team-a/nope\n"},
		{name: "HyperNode CRD missing", args: []string{"tree"}, crdMissing: true, wantCode: 1,
			wantErr: "error: " + inspect.ErrHyperNodeCRDMissing.Error() + "\n"},
		{name: "explain without a name", args: []string{"explain"}, wantCode: 2,
			wantErr: "error: accepts 1 arg(s), received 0\nSee 'kubectl hypernode --help'.\n"},
		{name: "unknown output", args: []string{"tree", "-o", "yaml"}, wantCode: 2,
			wantErr: "error: --output must be text or json, not \"yaml\"\nSee 'kubectl hypernode --help'.\n"},
		{name: "unknown flag", args: []string{"tree", "--bogus"}, wantCode: 2,
			wantErr: "error: unknown flag: --bogus\nSee 'kubectl hypernode --help'.\n"},
		{name: "not a PodGroup name", args: []string{"explain", "team-a/job"}, wantCode: 2,
			wantErr: "error: \"team-a/job\" is not a PodGroup name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')\nSee 'kubectl hypernode --help'.\n"},
		{name: "explain with the scheduler's default constraint", wantCode: 0,
			args:      []string{"explain", "job", "-n", "team-a", "--default-network-topology", `{"mode":"soft","highestTierAllowed":1}`},
			wantOut:   "PodGroup team-a/job: Pending\n",
			wantInOut: "network topology: soft topology (tier<=1) (the scheduler's\n    defaultNetworkTopology)"},
		{name: "a default constraint the annotation's rules refuse", wantCode: 2,
			args:    []string{"explain", "job", "-n", "team-a", "--default-network-topology", `{"mode":"hard"}`},
			wantErr: "error: --default-network-topology mode hard needs highestTierAllowed or highestTierName\nSee 'kubectl hypernode --help'.\n"},
		{name: "mistyped command", args: []string{"tre"}, wantCode: 2,
			wantErr: "error: unknown command \"tre\" for \"kubectl hypernode\"; did you mean tree?\nSee 'kubectl hypernode --help'.\n"},
		// Not nil: cobra would read os.Args, the test binary's flags.
		{name: "no command", args: []string{}, wantCode: 0, wantOut: "Show the HyperNode network tree"},
		{name: "mistyped resource", args: []string{"tree", "--resource", "gpu", "-o", "json"}, wantCode: 0,
			wantOut:   "{\n  \"resource\": \"gpu\",",
			wantInOut: `"no node has gpu in its allocatable: every capacity figure for it is 0 (check --resource)"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
			code := run(tc.args, streams, fakeClients(!tc.crdMissing))
			if code != tc.wantCode {
				t.Errorf("exit code = %d, want %d; stderr: %s", code, tc.wantCode, errOut.String())
			}
			if !strings.HasPrefix(out.String(), tc.wantOut) {
				t.Errorf("stdout does not start with %q:\n%s", tc.wantOut, out.String())
			}
			if !strings.Contains(out.String(), tc.wantInOut) {
				t.Errorf("stdout does not contain %q:\n%s", tc.wantInOut, out.String())
			}
			if diff := cmp.Diff(tc.wantErr, errOut.String()); diff != "" {
				t.Errorf("stderr (-want,+got):\n%s", diff)
			}
			if strings.Contains(strings.Join(tc.args, " "), "json") {
				var doc map[string]any
				if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
					t.Errorf("-o json is not JSON: %v", err)
				}
			}
		})
	}
}
