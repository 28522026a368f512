package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
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
	"github.com/hypernode-dev/hypernode-scheduler/pkg/jobspec"
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
		// stdin is what plan -f - reads.
		stdin    string
		wantCode int
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
		{name: "plan a job that fits", args: []string{"plan", "-f", "-", "-n", "team-b"}, stdin: planInput(2, "1"), wantCode: 0,
			wantOut:   "PodGroup team-b/train: would start now (nothing was created or evicted)\n",
			wantInOut: "Placement: leaf, tier 1; 1 leaf (the fewest that could hold them: 1)\n  leaf: train-0, train-1\n"},
		{name: "plan as JSON", args: []string{"plan", "-f", "-", "-n", "team-b", "-o", "json"}, stdin: planInput(2, "1"), wantCode: 0,
			wantOut: "{\n  \"kind\": \"PodGroup\",\n  \"job\": \"team-b/train\",", wantInOut: `"placed": true,`},
		{name: "plan a job that does not fit", args: []string{"plan", "-f", "-", "-n", "team-b"}, stdin: planInput(2, "3"), wantCode: 0,
			wantOut: "PodGroup team-b/train: would NOT start now (nothing was created or evicted)\n"},
		{name: "plan fails if pending", args: []string{"plan", "-f", "-", "-n", "team-b", "--fail-if-pending", "-o", "json"}, stdin: planInput(2, "3"), wantCode: 3,
			wantInOut: `"placed": false,`, wantErr: "error: PodGroup team-b/train would not start now\n"},
		{name: "plan without a file", args: []string{"plan"}, wantCode: 2,
			wantErr: "error: plan needs -f FILE (or -f - for stdin)\nSee 'kubectl hypernode --help'.\n"},
		{name: "plan of a file that is not there", args: []string{"plan", "-f", "/nonexistent/job.yaml"}, wantCode: 1,
			wantErr: "error: open /nonexistent/job.yaml: no such file or directory\n"},
		{name: "plan of an unknown kind", args: []string{"plan", "-f", "-"}, stdin: "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\n", wantCode: 2,
			wantErr: "error: unknown kind StatefulSet (apps/v1) of \"db\": plan knows " + jobspec.Known + "\nSee 'kubectl hypernode --help'.\n"},
		{name: "plan of a malformed file", args: []string{"plan", "-f", "-"}, stdin: "apiVersion: v1\nkind: Pod\n  metadata: x\n", wantCode: 2,
			wantErr: "error: reading -: document 1: error converting YAML to JSON: yaml: line 3: mapping values are not allowed in this context\nSee 'kubectl hypernode --help'.\n"},
		{name: "capacity of a shape", args: []string{"capacity", "--cpu", "1"}, wantCode: 0,
			wantOut: "Largest gang that could start now in one domain, pods of cpu 1:\n  tier 1: 4 pods in leaf\n  tier 2 (the whole cluster): 4 pods in <cluster>\n"},
		{name: "capacity without a shape", args: []string{"capacity"}, wantCode: 2,
			wantErr: "error: capacity needs a pod shape: --cpu, --memory and/or --gpu, or -f POD\nSee 'kubectl hypernode --help'.\n"},
		{name: "capacity of a bad quantity", args: []string{"capacity", "--memory", "lots"}, wantCode: 2,
			wantErr: "error: --memory \"lots\" is not a positive quantity\nSee 'kubectl hypernode --help'.\n"},
		{name: "mistyped resource", args: []string{"tree", "--resource", "gpu", "-o", "json"}, wantCode: 0,
			wantOut:   "{\n  \"resource\": \"gpu\",",
			wantInOut: `"no node has gpu in its allocatable: every capacity figure for it is 0 (check --resource)"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			streams := genericiooptions.IOStreams{In: strings.NewReader(tc.stdin), Out: &out, ErrOut: &errOut}
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

// planInput is a PodGroup team-b/train of n pods of cpu each.
func planInput(n int, cpu string) string {
	out := fmt.Sprintf("apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: train}\nspec: {minMember: %d}\n", n)
	for i := range n {
		out += fmt.Sprintf("---\napiVersion: v1\nkind: Pod\nmetadata: {name: train-%d, labels: {scheduling.x-k8s.io/pod-group: train}}\n"+
			"spec: {containers: [{name: c, image: x, resources: {requests: {cpu: %q}}}]}\n", i, cpu)
	}
	return out
}

// TestPlanAsksPreemptionForADefaultPriority: pods that name no priority class take the global
// default's priority (100 here), and a job that does not fit then gets GangPreemption's answer
// (on the copy: nothing of lower priority runs, so it cannot help); without a priority
// (none, or 0) it is not asked.
func TestPlanAsksPreemptionForADefaultPriority(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	for _, tc := range []struct {
		defaultPriority int32
		wantRefusal     string
	}{
		{defaultPriority: 100, wantRefusal: "gang team-b/train cannot fit even if every pod of lower priority were evicted: no domain holds 2 members (leaf 1/2"},
		{defaultPriority: 0},
	} {
		t.Run(fmt.Sprint(tc.defaultPriority), func(t *testing.T) {
			clients := func(f *genericclioptions.ConfigFlags) (inspect.Clients, error) {
				c, err := fakeClients(true)(f)
				if err != nil {
					return c, err
				}
				pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Value: tc.defaultPriority, GlobalDefault: true}
				_, err = c.Kube.SchedulingV1().PriorityClasses().Create(t.Context(), pc, metav1.CreateOptions{})
				return c, err
			}
			var out, errOut bytes.Buffer
			streams := genericiooptions.IOStreams{In: strings.NewReader(planInput(2, "3")), Out: &out, ErrOut: &errOut}
			if code := run([]string{"plan", "-f", "-", "-n", "team-b", "-o", "json"}, streams, clients); code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			var r inspect.PlanReport
			if err := json.Unmarshal(out.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.wantRefusal == "" && r.Preemption != nil:
				t.Errorf("preemption asked at priority 0: %+v", r.Preemption)
			case tc.wantRefusal != "" && (r.Preemption == nil || !strings.HasPrefix(r.Preemption.Refusal, tc.wantRefusal)):
				t.Errorf("preemption %+v, want the refusal %q", r.Preemption, tc.wantRefusal)
			}
			if r.Priority != tc.defaultPriority || r.Placed {
				t.Errorf("priority %d, placed %v", r.Priority, r.Placed)
			}
		})
	}
}
