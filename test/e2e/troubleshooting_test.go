package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/controller/discovery/ufm"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/localcluster"
)

const troubleNS = "troubleshoot"

// docCommands returns the shell blocks of docs/troubleshooting.md by the title of the "## "
// section that holds them.
func docCommands(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	out := map[string][]string{}
	var section string
	var block *strings.Builder
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := scanner.Text()
		switch {
		case block != nil && line == "```":
			out[section] = append(out[section], block.String())
			block = nil
		case block != nil:
			block.WriteString(line + "\n")
		case line == "```sh":
			block = &strings.Builder{}
		case strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// runDoc runs one shell block of the guide as an admin would: bash with errexit and pipefail
// (a grep that finds nothing fails it), the project's bin/ first on the PATH (kubectl and
// the kubectl-hypernode plugin), the admin kubeconfig and the section's variables.
func runDoc(t *testing.T, block string, vars map[string]string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "bash", "-c", "set -euo pipefail\n"+block)
	cmd.Env = append(os.Environ(),
		"PATH="+filepath.Join(repoRoot, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+cluster.AdminKubeconfig)
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the commands\n%s\nfailed: %v\n%s", block, err, out)
	}
	return string(out)
}

// waitObjectEvent waits for an Event with reason on an object of kind and name in ns whose
// message contains text.
func waitObjectEvent(t *testing.T, ns, kind, name, reason, text string) {
	t.Helper()
	waitObjectEventOf(t, ns, kind, name, "", reason, text)
}

// waitObjectEventOf is waitObjectEvent for the object of this UID only ("" for any): an
// earlier object of the same name (another test's, or an earlier run's) may have had the
// same Event.
func waitObjectEventOf(t *testing.T, ns, kind, name string, uid types.UID, reason, text string) {
	t.Helper()
	set := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name, "reason": reason}
	if uid != "" {
		set["involvedObject.uid"] = string(uid)
	}
	selector := set.String()
	var seen []string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := cluster.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, ev := range list.Items {
			seen = append(seen, ev.Message)
			if strings.Contains(ev.Message, text) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no Event %s on %s %s/%s containing %q; seen: %q", reason, kind, ns, name, text, seen)
	}
}

// waitPodsPending waits until the gang has n pods, none bound, each with a PodScheduled
// condition whose message contains text ("" waits for pods without any condition).
func waitPodsPending(t *testing.T, group string, n int, text string) {
	t.Helper()
	var last []string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cluster.Kube.CoreV1().Pods(troubleNS).List(ctx, metav1.ListOptions{LabelSelector: "scheduling.x-k8s.io/pod-group=" + group})
		if err != nil {
			return false, err
		}
		last = last[:0]
		ok := len(pods.Items) == n
		for _, p := range pods.Items {
			msg := "<no condition>"
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodScheduled {
					msg = c.Message
				}
			}
			last = append(last, p.Name+": "+msg)
			if p.Spec.NodeName != "" || (text == "" && msg != "<no condition>") || (text != "" && !strings.Contains(msg, text)) {
				ok = false
			}
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("gang %s: want %d pending pods with %q; got %q", group, n, text, last)
	}
}

// jobYAML is a Job of n 8-GPU workers in the gang group; extra is added to the pod template's
// spec (indented by 6).
func jobYAML(group string, n int, labels, extra string) string {
	return fmt.Sprintf(`
apiVersion: batch/v1
kind: Job
metadata:
  name: %[1]s
spec:
  parallelism: %[2]d
  template:
    metadata:
      labels:
        scheduling.x-k8s.io/pod-group: %[1]s
%[3]s    spec:
      restartPolicy: Never
%[4]s      containers:
      - name: trainer
        image: registry.example.com/trainer:latest
        resources:
          limits:
            nvidia.com/gpu: "8"
`, group, n, labels, extra)
}

const ourScheduler = "      schedulerName: hypernode-scheduler\n"

// suffix marks a wanted text that must end the output, not just appear in it.
const suffix = "suffix:"

// troubleCase sets up the situation of one section of the guide and returns the variables
// its commands use and texts their output must contain.
type troubleCase func(t *testing.T) (vars map[string]string, want []string)

// TestTroubleshootingGuide runs every command of docs/troubleshooting.md, each section in
// the situation it describes, and checks that the output shows what the guide says it shows.
// A section with commands but no situation here fails the test, so the guide cannot grow
// commands nobody ran.
func TestTroubleshootingGuide(t *testing.T) {
	startController(t, nil)
	// The 64-node fabric: leaves of eight 8-GPU nodes, spines of four leaves.
	restartScene(t, troubleNS)
	t.Cleanup(func() {
		// Jobs first: the Job controller would recreate the pods the scene's teardown deletes.
		err := cluster.Kube.BatchV1().Jobs(troubleNS).DeleteCollection(context.Background(),
			metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}, metav1.ListOptions{})
		if err != nil {
			t.Errorf("deleting the Jobs: %v", err)
		}
	})
	cases := map[string]troubleCase{
		"My job is pending, or would it start?": func(t *testing.T) (map[string]string, []string) {
			file := filepath.Join(t.TempDir(), "job.yaml")
			if err := os.WriteFile(file, []byte(gangJobYAML("nine", 9, 9, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			return map[string]string{"NS": troubleNS, "JOB_FILE": file}, []string{
				"Job troubleshoot/nine: would NOT start now (nothing was created or evicted)",
				"What it waits for: no allowed domain would hold the job",
				"Largest gang that could start now in one domain, pods of nvidia.com/gpu 8",
			}
		},
		"Gang pending with no message": func(t *testing.T) (map[string]string, []string) {
			applyYAML(t, troubleNS, podGroupYAML("no-scheduler", 2, 1)+"---"+jobYAML("no-scheduler", 2, "", "      schedulerName: default-scheduler\n"))
			waitPodsPending(t, "no-scheduler", 2, "")
			holder, err := cluster.LeaseHolder(t.Context())
			if err != nil || holder == "" {
				t.Fatalf("scheduler Lease holder %q: %v", holder, err)
			}
			return map[string]string{"NS": troubleNS, "PODGROUP": "no-scheduler"}, []string{"default-scheduler", holder}
		},
		"Pods wait for their PodGroup or members": func(t *testing.T) (map[string]string, []string) {
			applyYAML(t, troubleNS, podGroupYAML("few", 3, 1)+"---"+jobYAML("few", 2, "", ourScheduler))
			const msg = "waiting for PodGroup troubleshoot/few to have 3 members (minMember)"
			waitPodsPending(t, "few", 2, msg)
			return map[string]string{"NS": troubleNS, "PODGROUP": "few"}, []string{msg, "\n3\n"}
		},
		"No HyperNode can host": func(t *testing.T) (map[string]string, []string) {
			applyYAML(t, troubleNS, gangJobYAML("too-big", 9, 9, 1))
			const msg = "hard topology (tier<=1): no HyperNode can host 9 pods"
			waitObjectEvent(t, troubleNS, "PodGroup", "too-big", "TopologyUnsatisfiable", msg)
			return map[string]string{"NS": troubleNS, "PODGROUP": "too-big"}, []string{msg, "TopologyUnsatisfiable", "PodGroup troubleshoot/too-big: Pending"}
		},
		"Invalid HyperNode or excluded subtree": func(t *testing.T) (map[string]string, []string) {
			createBadLeaf(t)
			waitValidCondition(t, "bad-leaf")
			return map[string]string{"HYPERNODE": "bad-leaf"}, []string{"EXCLUDED", "InvalidMember", "excluded from topology placement"}
		},
		"Ambiguous tier name": func(t *testing.T) (map[string]string, []string) {
			applyYAML(t, "", `
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata:
  name: rack-a
spec:
  tier: 1
  tierName: rack
  members:
  - type: Node
    selector:
      exactMatch:
        name: ghost-0
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata:
  name: rack-b
spec:
  tier: 2
  tierName: rack
  members:
  - type: HyperNode
    selector:
      exactMatch:
        name: rack-a
`)
			t.Cleanup(func() { deleteHyperNodes(t, "rack-a", "rack-b") })
			waitObjectEvent(t, "default", "HyperNode", "rack-b", "AmbiguousTierName", `tierName "rack"`)
			return nil, []string{"rack-b", `its tierName "rack" is also used by HyperNodes of tiers [1 2]`}
		},
		"Bad topology annotation": func(t *testing.T) (map[string]string, []string) {
			pg := strings.Replace(podGroupYAML("bad-annotation", 1, 1), `"highestTierAllowed":1`, `"highestTierAllowed":"one"`, 1)
			applyYAML(t, troubleNS, pg+"---"+jobYAML("bad-annotation", 1, "", ourScheduler))
			waitObjectEvent(t, troubleNS, "PodGroup", "bad-annotation", "InvalidTopologyConstraint", "bad-annotation")
			return map[string]string{"NS": troubleNS, "PODGROUP": "bad-annotation"}, []string{`"highestTierAllowed":"one"`, "InvalidTopologyConstraint"}
		},
		"Sub-group not complete": func(t *testing.T) (map[string]string, []string) {
			pg := podGroupYAML("unlabelled", 2, 2)
			pg = strings.Replace(pg, "  annotations:\n", "  annotations:\n    hypernode.dev/subgroup-policy: '[{\"name\":\"workers\",\"subGroupSize\":2,\"labelSelector\":{\"matchLabels\":{\"role\":\"worker\"}},\"matchLabelKeys\":[\"partition\"]}]'\n", 1)
			applyYAML(t, troubleNS, pg+"---"+jobYAML("unlabelled", 2, "        role: worker\n", ourScheduler))
			const msg = `sub-group policy "workers" needs its label(s) partition, which it does not have`
			waitObjectEvent(t, troubleNS, "PodGroup", "unlabelled", "InvalidSubGroupMember", msg)
			return map[string]string{"NS": troubleNS, "PODGROUP": "unlabelled"}, []string{msg, "PodGroup troubleshoot/unlabelled: Pending"}
		},
		"Preemption does not help": func(t *testing.T) (map[string]string, []string) {
			pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "troubleshoot-high"}, Value: 1000}
			if _, err := cluster.Kube.SchedulingV1().PriorityClasses().Create(t.Context(), pc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = cluster.Kube.SchedulingV1().PriorityClasses().Delete(context.Background(), pc.Name, metav1.DeleteOptions{})
			})
			applyYAML(t, troubleNS, podGroupYAML("urgent", 9, 1)+"---"+jobYAML("urgent", 9, "", ourScheduler+"      priorityClassName: troubleshoot-high\n"))
			waitPodsPending(t, "urgent", 9, "no HyperNode can host 9 pods")
			return map[string]string{"NS": troubleNS, "PODGROUP": "urgent"}, // The Preempted Events end the output with their header only: nothing anywhere
				// was evicted for the gang.
				[]string{"urgent-", "1000", "<none>", suffix + "OBJECT   MESSAGE\n"}
		},
		"Discovery creates no HyperNodes": func(t *testing.T) (map[string]string, []string) {
			setUFMSecret(t, ufmPassword)
			since := time.Now()
			setDiscoveryConfig(t, ufmConfig("https://127.0.0.1:1", nil, 60, ""))
			t.Cleanup(func() {
				if _, err := cluster.Applier.ApplyFile(context.Background(), filepath.Join(repoRoot, "manifests/install/05-controller-configmap.yaml"), ""); err != nil {
					t.Errorf("restoring the controller's ConfigMap: %v", err)
				}
			})
			waitEvent(t, since, localcluster.SchedulerNamespace, ufm.ReasonUnreachable, "discovery source ufm failed")
			return map[string]string{"CONTROLLER": cluster.ControllerAddress()},
				[]string{ufm.ReasonUnreachable, `hypernode_discovery_runs_total{result="error",source="ufm"}`}
		},
		"Scheduler slow": func(t *testing.T) (map[string]string, []string) {
			t.Cleanup(func() {
				ctx := context.Background()
				_ = cluster.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, "hypernode-metrics-reader", metav1.DeleteOptions{})
				_ = cluster.Kube.CoreV1().ServiceAccounts(localcluster.SchedulerNamespace).Delete(ctx, "metrics-reader", metav1.DeleteOptions{})
			})
			return map[string]string{"SCHEDULER": cluster.SchedulerAddress()},
				// The gang of "Pods wait for their PodGroup or members" (which runs before)
				// is still held back; no other gang is.
				[]string{"hypernode_gangs_waiting_in_permit 0\n", `hypernode_gangs_gated{reason="WaitingForMembers"} 1` + "\n",
					`hypernode_gangs_gated{reason="PodGroupMissing"} 0` + "\n",
					// The client's wait for its rate limit, by verb and host.
					`rest_client_rate_limiter_duration_seconds_count{host="127.0.0.1:`}
		},
	}
	// The gated queue holds that gang's 2 members plus the members GangRetryGate holds for
	// the gangs of the earlier sections that cannot be placed (one member of each is retried).
	checks := map[string]func(t *testing.T, out string){
		"Scheduler slow": func(t *testing.T, out string) {
			gated, held := sampleInt(t, out, `scheduler_pending_pods{queue="gated"}`), sampleInt(t, out, `scheduler_unschedulable_pods{plugin="GangRetryGate",profile="hypernode-scheduler"}`)
			if held < 1 || gated != 2+held {
				t.Errorf("gated pods %d, held by GangRetryGate %d: want at least one held, and 2 + held gated", gated, held)
			}
		},
	}
	sections := docCommands(t)
	for title, blocks := range sections {
		if _, ok := cases[title]; !ok && len(blocks) > 0 {
			t.Errorf("docs/troubleshooting.md, section %q: %d command blocks that no e2e situation runs", title, len(blocks))
		}
	}
	titles := make([]string, 0, len(cases))
	for title := range cases {
		titles = append(titles, title)
	}
	sort.Strings(titles)
	for _, title := range titles {
		t.Run(title, func(t *testing.T) {
			if len(sections[title]) == 0 {
				t.Fatalf("docs/troubleshooting.md has no section %q with commands", title)
			}
			vars, want := cases[title](t)
			var out strings.Builder
			for _, block := range sections[title] {
				out.WriteString(runDoc(t, block, vars))
			}
			t.Logf("output of the section's commands:\n%s", out.String())
			for _, w := range want {
				if end, ok := strings.CutPrefix(w, suffix); ok {
					if !strings.HasSuffix(out.String(), end) {
						t.Errorf("the output of the section's commands does not end with %q:\n%s", end, out.String())
					}
					continue
				}
				if !strings.Contains(out.String(), w) {
					t.Errorf("the output of the section's commands lacks %q:\n%s", w, out.String())
				}
			}
			if check := checks[title]; check != nil {
				check(t, out.String())
			}
		})
	}
}

// createBadLeaf creates the HyperNode bad-leaf, whose regular expression does not compile,
// for the rest of the test, and waits until the scheduler has reported it.
func createBadLeaf(t *testing.T) {
	t.Helper()
	applyYAML(t, "", `
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata:
  name: bad-leaf
spec:
  tier: 1
  members:
  - type: Node
    selector:
      regexMatch:
        pattern: "gpu-[0-"
`)
	t.Cleanup(func() { deleteHyperNodes(t, "bad-leaf") })
	hn, err := runner.Clients.Topology.TopologyV1alpha1().HyperNodes().Get(context.Background(), "bad-leaf", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitObjectEventOf(t, "default", "HyperNode", "bad-leaf", hn.UID, "InvalidMember", "bad-leaf")
}

func deleteHyperNodes(t *testing.T, names ...string) {
	for _, n := range names {
		if err := runner.Clients.Topology.TopologyV1alpha1().HyperNodes().Delete(context.Background(), n, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting HyperNode %s: %v", n, err)
		}
	}
}

// waitValidCondition waits until hypernode-controller has written a False Valid condition on
// the HyperNode.
func waitValidCondition(t *testing.T, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		hn, err := runner.Clients.Topology.TopologyV1alpha1().HyperNodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range hn.Status.Conditions {
			if c.Type == "Valid" && c.Status == metav1.ConditionFalse {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("HyperNode %s: no False Valid condition: %v", name, err)
	}
}

// sampleInt reads the integer value of one sample ("name{labels} value") of a metrics text
// (metricValue), failing the test when it is missing or not a number.
func sampleInt(t *testing.T, text, sample string) int {
	t.Helper()
	v, err := strconv.ParseFloat(metricValue(text, sample+" "), 64)
	if err != nil {
		t.Fatalf("sample %s in:\n%s: %v", sample, text, err)
	}
	return int(v)
}
