package jobspec

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// derived is what a test compares of a Job: the PodGroup's name, source, minMember and
// annotations, and per member its name, rank, CPU request and the labels the controllers set.
type derived struct {
	Kind, Job, PodGroup, From string
	MinMember                 int32
	Annotations               map[string]string
	Members                   []member
}

type member struct {
	Name   string
	Rank   int // -1: none
	CPU    string
	Labels map[string]string
}

// shownLabels are the member labels the tests compare.
var shownLabels = []string{schedulingv1alpha1.PodGroupLabel, "batch.kubernetes.io/job-completion-index", "job-name",
	trainingReplica, trainingIndex, trainingJobRole, "ray.io/group", "ray.io/node-type", "team"}

func summarize(j *Job) derived {
	d := derived{Kind: j.Kind, Job: j.Namespace + "/" + j.Name, PodGroup: j.PodGroup.Namespace + "/" + j.PodGroup.Name,
		From: j.PodGroupFrom, MinMember: j.PodGroup.Spec.MinMember, Annotations: j.PodGroup.Annotations}
	for _, p := range j.Members {
		m := member{Name: p.Namespace + "/" + p.Name, Rank: -1, Labels: map[string]string{}}
		if r, ok := podgroup.Rank(p); ok {
			m.Rank = r
		}
		cpu := p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU]
		m.CPU = cpu.String()
		for _, k := range shownLabels {
			if v, ok := p.Labels[k]; ok {
				m.Labels[k] = v
			}
		}
		d.Members = append(d.Members, m)
	}
	return d
}

const podSpec = `
    spec:
      containers:
      - name: c
        image: example
        resources:
          requests:
            cpu: "%s"`

func tmpl(cpu string) string { return strings.ReplaceAll(podSpec, "%s", cpu) }

func TestDerive(t *testing.T) {
	clusterPG := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "existing",
		Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`}},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 7}}
	// The PodGroup mpi-operator made for MPIJob pi, annotated by its user.
	mpiPG := &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "pi",
		Annotations:     map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`},
		OwnerReferences: []metav1.OwnerReference{{Kind: "MPIJob", Name: "pi", Controller: ptrTo(true)}}},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 99}}
	lookup := func(ns, name string) (*schedulingv1alpha1.PodGroup, error) {
		for _, pg := range []*schedulingv1alpha1.PodGroup{clusterPG, mpiPG} {
			if ns == pg.Namespace && name == pg.Name {
				return pg, nil
			}
		}
		return nil, nil
	}
	lbl := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name string
		yaml string
		want derived
	}{{
		name: "PodGroup with its pods",
		yaml: `apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: pg, annotations: {hypernode.dev/network-topology: '{"mode":"soft"}'}}
spec: {minMember: 2}
---
apiVersion: v1
kind: Pod
metadata: {name: w-1, labels: {scheduling.x-k8s.io/pod-group: pg}}
spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "2"}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: w-0, labels: {scheduling.x-k8s.io/pod-group: pg}, annotations: {hypernode.dev/rank: "0"}}
spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}
`,
		want: derived{Kind: "PodGroup", Job: "team-a/pg", PodGroup: "team-a/pg", From: FromFile, MinMember: 2,
			Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"soft"}`},
			Members: []member{
				{Name: "team-a/w-1", Rank: -1, CPU: "2", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "pg")},
				{Name: "team-a/w-0", Rank: 0, CPU: "1", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "pg")},
			}},
	}, {
		name: "a native PodGroup with its pods and Workload: the tier label key is its constraint",
		yaml: `apiVersion: scheduling.k8s.io/v1beta1
kind: Workload
metadata: {name: wl}
spec:
  podGroupTemplates:
  - name: workers
    schedulingPolicy: {gang: {minCount: 2}}
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: npg}
spec:
  schedulingPolicy: {gang: {minCount: 2}}
  schedulingConstraints: {topology: [{key: hypernode.dev/tier-1}]}
---
apiVersion: v1
kind: Pod
metadata: {name: w-0}
spec: {schedulingGroup: {podGroupName: npg}, containers: [{name: c, image: x, resources: {requests: {cpu: "2"}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: w-1}
spec: {schedulingGroup: {podGroupName: npg}, containers: [{name: c, image: x, resources: {requests: {cpu: "2"}}}]}
`,
		want: derived{Kind: "PodGroup (scheduling.k8s.io/v1beta1)", Job: "team-a/npg", PodGroup: "team-a/npg", From: FromFile, MinMember: 2,
			Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`},
			Members: []member{
				{Name: "team-a/w-0", Rank: -1, CPU: "2", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "npg")},
				{Name: "team-a/w-1", Rank: -1, CPU: "2", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "npg")},
			}},
	}, {
		name: "a Job with spec.scheduling: the Job controller's native gang, minCount from parallelism",
		yaml: `apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  parallelism: 3
  completionMode: Indexed
  scheduling:
    schedulingPolicy: {gang: {}}
    schedulingConstraints: {topology: [{key: hypernode.dev/tier-2}]}
  template:` + strings.ReplaceAll(tmpl("1"), "\n    ", "\n      ") + "\n",
		want: derived{Kind: "Job", Job: "team-a/train", PodGroup: "team-a/train", From: FromController, MinMember: 3,
			Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":2}`},
			Members: []member{
				{Name: "team-a/train-0", Rank: 0, CPU: "1", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "train", "batch.kubernetes.io/job-completion-index", "0", "job-name", "train")},
				{Name: "team-a/train-1", Rank: 1, CPU: "1", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "train", "batch.kubernetes.io/job-completion-index", "1", "job-name", "train")},
				{Name: "team-a/train-2", Rank: 2, CPU: "1", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "train", "batch.kubernetes.io/job-completion-index", "2", "job-name", "train")},
			}},
	}, {
		name: "PodGroup with a PodTemplate: minMember copies",
		yaml: `apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: pg, namespace: other}
spec: {minMember: 3}
---
apiVersion: v1
kind: PodTemplate
metadata: {name: worker, namespace: other}
template:
  metadata: {labels: {team: x}}` + strings.ReplaceAll(tmpl("4"), "\n    ", "\n  ") + "\n",
		want: derived{Kind: "PodGroup", Job: "other/pg", PodGroup: "other/pg", From: FromFile, MinMember: 3,
			Members: []member{
				{Name: "other/worker-0", Rank: -1, CPU: "4", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "pg", "team", "x")},
				{Name: "other/worker-1", Rank: -1, CPU: "4", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "pg", "team", "x")},
				{Name: "other/worker-2", Rank: -1, CPU: "4", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "pg", "team", "x")},
			}},
	}, {
		name: "Indexed Job: min(parallelism, completions) pods with their completion index, PodGroup of the cluster",
		yaml: `apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  parallelism: 4
  completions: 3
  completionMode: Indexed
  template:
    metadata: {labels: {scheduling.x-k8s.io/pod-group: existing}}` + tmpl("1") + "\n",
		want: derived{Kind: "Job", Job: "team-a/train", PodGroup: "team-a/existing", From: FromCluster, MinMember: 7,
			Annotations: clusterPG.Annotations,
			Members: []member{
				{Name: "team-a/train-0", Rank: 0, CPU: "1", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "existing", "batch.kubernetes.io/job-completion-index", "0", "job-name", "train")},
				{Name: "team-a/train-1", Rank: 1, CPU: "1", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "existing", "batch.kubernetes.io/job-completion-index", "1", "job-name", "train")},
				{Name: "team-a/train-2", Rank: 2, CPU: "1", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "existing", "batch.kubernetes.io/job-completion-index", "2", "job-name", "train")},
			}},
	}, {
		name: "NonIndexed Job with its PodGroup in the file, parallelism defaulted to 1; a Service and a PodDisruptionBudget left alone",
		yaml: `apiVersion: v1
kind: Service
metadata: {name: single}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: single}
spec: {maxUnavailable: 0}
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: one}
spec: {minMember: 1}
---
apiVersion: batch/v1
kind: Job
metadata: {name: single}
spec:
  template:
    metadata: {labels: {scheduling.x-k8s.io/pod-group: one}}` + tmpl("1") + "\n",
		want: derived{Kind: "Job", Job: "team-a/single", PodGroup: "team-a/one", From: FromFile, MinMember: 1,
			Members: []member{{Name: "team-a/single-0", Rank: -1, CPU: "1", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "one", "job-name", "single")}}},
	}, {
		name: "PyTorchJob: master and workers named as training-operator names them (a lowercase replica type as its defaulting reads it), the job's annotations on its PodGroup",
		yaml: `apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: pt, annotations: {hypernode.dev/network-topology: '{"mode":"hard","highestTierAllowed":2}'}}
spec:
  pytorchReplicaSpecs:
    worker:
      replicas: 2
      template:` + strings.ReplaceAll(tmpl("8"), "\n    ", "\n        ") + `
    Master:
      replicas: 1
      template:` + strings.ReplaceAll(tmpl("2"), "\n    ", "\n        ") + "\n",
		want: derived{Kind: "PyTorchJob", Job: "team-a/pt", PodGroup: "team-a/pt", From: FromController, MinMember: 3,
			Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":2}`},
			Members: []member{
				{Name: "team-a/pt-master-0", Rank: -1, CPU: "2", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "pt", trainingReplica, "master", trainingIndex, "0", trainingJobRole, "master")},
				{Name: "team-a/pt-worker-0", Rank: -1, CPU: "8", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "pt", trainingReplica, "worker", trainingIndex, "0")},
				{Name: "team-a/pt-worker-1", Rank: -1, CPU: "8", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "pt", trainingReplica, "worker", trainingIndex, "1")},
			}},
	}, {
		name: "MPIJob: launcher and workers, minAvailable, a PodGroup the operator made keeps its annotations and takes the operator's spec",
		yaml: `apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: pi}
spec:
  runPolicy: {schedulingPolicy: {minAvailable: 2}}
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:` + strings.ReplaceAll(tmpl("1"), "\n    ", "\n        ") + `
    Worker:
      replicas: 2
      template:` + strings.ReplaceAll(tmpl("16"), "\n    ", "\n        ") + "\n",
		want: derived{Kind: "MPIJob", Job: "team-a/pi", PodGroup: "team-a/pi", From: FromCluster, MinMember: 2,
			Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: `{"mode":"hard","highestTierAllowed":1}`},
			Members: []member{
				{Name: "team-a/pi-launcher", Rank: -1, CPU: "1", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "pi", trainingJobRole, "launcher")},
				{Name: "team-a/pi-worker-0", Rank: -1, CPU: "16", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "pi", trainingJobRole, "worker", trainingIndex, "0")},
				{Name: "team-a/pi-worker-1", Rank: -1, CPU: "16", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "pi", trainingJobRole, "worker", trainingIndex, "1")},
			}},
	}, {
		name: "RayCluster: head and workers within min and max, times numOfHosts; a suspended group adds none",
		yaml: `apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: ray, labels: {ray.io/gang-scheduling-enabled: "true"}}
spec:
  headGroupSpec:
    template:` + strings.ReplaceAll(tmpl("2"), "\n    ", "\n      ") + `
  workerGroupSpecs:
  - groupName: gpu
    replicas: 5
    minReplicas: 1
    maxReplicas: 1
    numOfHosts: 2
    template:` + strings.ReplaceAll(tmpl("8"), "\n    ", "\n      ") + `
  - groupName: idle
    replicas: 3
    suspend: true
    template:` + strings.ReplaceAll(tmpl("1"), "\n    ", "\n      ") + "\n",
		want: derived{Kind: "RayCluster", Job: "team-a/ray", PodGroup: "team-a/ray", From: FromController, MinMember: 3,
			Members: []member{
				{Name: "team-a/ray-head", Rank: -1, CPU: "2", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "ray", "ray.io/group", "headgroup", "ray.io/node-type", "head")},
				{Name: "team-a/ray-gpu-worker-0", Rank: -1, CPU: "8", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "ray", "ray.io/group", "gpu", "ray.io/node-type", "worker")},
				{Name: "team-a/ray-gpu-worker-1", Rank: -1, CPU: "8", Labels: lbl(schedulingv1alpha1.PodGroupLabel, "ray", "ray.io/group", "gpu", "ray.io/node-type", "worker")},
			}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := ReadBytes([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			job, err := Derive(objs, "team-a", lookup)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, summarize(job)); diff != "" {
				t.Errorf("derived job (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeriveRefuses(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr string
		unknown bool
	}{{
		name:    "an unknown kind names the kinds plan knows",
		yaml:    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n",
		wantErr: `unknown kind Deployment (apps/v1) of "web": plan knows ` + Known,
		unknown: true,
	}, {
		name: "a Job without a PodGroup label",
		yaml: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: lone}\nspec:\n  template:" + strings.ReplaceAll(tmpl("1"), "\n    ", "\n      ") + "\n",
		wantErr: "Job lone: its pod template has no scheduling.x-k8s.io/pod-group label and the Job no spec.scheduling, so the scheduler places its pods one at a time, not as a gang; " +
			"label the template with the name of its PodGroup, or give the Job spec.scheduling",
	}, {
		name: "a pod in a PodGroup and a native pod group",
		yaml: "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: npg}\nspec: {schedulingPolicy: {gang: {minCount: 1}}}\n---\n" +
			"apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {scheduling.x-k8s.io/pod-group: pg}}\nspec: {schedulingGroup: {podGroupName: npg}, containers: [{name: c, image: x}]}\n",
		wantErr: "p is in PodGroup pg (label scheduling.x-k8s.io/pod-group) and in the native pod group npg: the scheduler refuses a pod in two gangs (InTwoPodGroups); remove the label or the native group",
	}, {
		name: "a native pod group with a foreign topology key",
		yaml: "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: npg}\nspec: {schedulingPolicy: {gang: {minCount: 1}}, schedulingConstraints: {topology: [{key: topology.kubernetes.io/zone}]}}\n---\n" +
			"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {schedulingGroup: {podGroupName: npg}, containers: [{name: c, image: x}]}\n",
		wantErr: "pod group npg: its topology key topology.kubernetes.io/zone is not a HyperNode tier label (hypernode.dev/tier-N): the scheduler places it in one domain of that label, which plan does not analyse",
	}, {
		name:    "a native pod group without members",
		yaml:    "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: npg}\nspec: {schedulingPolicy: {gang: {minCount: 2}}}\n",
		wantErr: "pod group npg: the input has no member: add its Pods (spec.schedulingGroup.podGroupName: npg)",
	}, {
		name:    "a Job whose PodGroup exists nowhere",
		yaml:    "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    metadata: {labels: {scheduling.x-k8s.io/pod-group: nowhere}}" + tmpl("1") + "\n",
		wantErr: "Job j: its pods' PodGroup team-a/nowhere is neither in the input nor in the cluster",
	}, {
		name:    "a RayCluster without gang scheduling",
		yaml:    "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: r}\nspec: {}\n",
		wantErr: "RayCluster r: it has no ray.io/gang-scheduling-enabled label, so KubeRay creates no PodGroup and its pods are placed one at a time; add the label",
	}, {
		name:    "a PodGroup without members",
		yaml:    "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: pg}\nspec: {minMember: 2}\n",
		wantErr: "PodGroup pg: the input has no member: add its Pods, or a PodTemplate of which it runs minMember copies",
	}, {
		name:    "a pod of another PodGroup",
		yaml:    "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: pg}\nspec: {minMember: 1}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {scheduling.x-k8s.io/pod-group: other}}\nspec: {containers: [{name: c, image: x}]}\n",
		wantErr: `pod p is not a member of PodGroup team-a/pg (its label scheduling.x-k8s.io/pod-group is "other")`,
	}, {
		name:    "two jobs",
		yaml:    "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\n---\napiVersion: batch/v1\nkind: Job\nmetadata: {name: b}\n",
		wantErr: "the input has two jobs (Job a and Job b): plan one at a time",
	}, {
		name:    "a field of the wrong type",
		yaml:    "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\nspec: {parallelism: many}\n",
		wantErr: "Job a: ",
	}, {
		name:    "a PodGroup of another API version",
		yaml:    "apiVersion: scheduling.x-k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: pg}\n",
		wantErr: "PodGroup pg: apiVersion scheduling.x-k8s.io/v1beta1; the scheduler reads scheduling.x-k8s.io/v1alpha1",
	}, {
		name:    "an MPIJob with a PodGroup mpi-operator did not make",
		yaml:    "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: m}\nspec: {minMember: 1}\n---\napiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nmetadata: {name: m}\nspec: {mpiReplicaSpecs: {Launcher: {replicas: 1}}}\n",
		wantErr: "MPIJob m: PodGroup team-a/m exists (in the input) and mpi-operator refuses a job whose PodGroup it did not create; leave the PodGroup out and give its constraint with --network-topology",
	}, {
		name:    "a job with a generated name",
		yaml:    "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {generateName: pt-}\n",
		wantErr: "a PyTorchJob needs metadata.name: its controller names its pods and PodGroup after it",
	}, {
		name:    "training-operator's MPIJob",
		yaml:    "apiVersion: kubeflow.org/v1\nkind: MPIJob\nmetadata: {name: m}\n",
		wantErr: `unknown kind MPIJob (kubeflow.org/v1) of "m": plan knows MPIJob as kubeflow.org/v2beta1`,
		unknown: true,
	}, {
		name:    "only objects that make no pod",
		yaml:    "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
		wantErr: "the input has no job: plan knows " + Known,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := ReadBytes([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Derive(objs, "team-a", func(string, string) (*schedulingv1alpha1.PodGroup, error) { return nil, nil })
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) || (!strings.HasSuffix(tc.wantErr, ": ") && err.Error() != tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if got := errors.Is(err, ErrUnknownKind); got != tc.unknown {
				t.Errorf("errors.Is(ErrUnknownKind) = %v, want %v", got, tc.unknown)
			}
		})
	}
}

func TestReadRefusesMalformedInput(t *testing.T) {
	for input, want := range map[string]string{
		"kind: Job\nmetadata: {name: a}\n":   "document 1: an object needs apiVersion and kind",
		"":                                   "no object in the input",
		"apiVersion: v1\nkind: Pod\n---\n{[": "document 2: ",
	} {
		_, err := ReadBytes([]byte(input))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Read(%q) = %v, want %q", input, err, want)
		}
	}
}

// TestOperatorPodGroupSpec: the spec mpi-operator writes (minMember, minResources summed from
// requests or limits, scheduleTimeoutSeconds 0), and members whose limits became requests as
// the API server defaults them.
func TestOperatorPodGroupSpec(t *testing.T) {
	objs, err := ReadBytes([]byte(`apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: pi}
spec:
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec: {containers: [{name: l, image: x, resources: {requests: {cpu: "1"}}}]}
    Worker:
      replicas: 2
      template:
        spec: {containers: [{name: w, image: x, resources: {limits: {nvidia.com/gpu: "8"}}}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	job, err := Derive(objs, "mpi", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := schedulingv1alpha1.PodGroupSpec{MinMember: 3, ScheduleTimeoutSeconds: ptrTo[int32](0),
		MinResources: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), "nvidia.com/gpu": resource.MustParse("16")}}
	if diff := cmp.Diff(want, job.PodGroup.Spec); diff != "" {
		t.Errorf("PodGroup spec (-want +got):\n%s", diff)
	}
	if got := job.Members[1].Spec.Containers[0].Resources.Requests["nvidia.com/gpu"]; got.String() != "8" {
		t.Errorf("worker requests %s GPUs, want the limit 8", got.String())
	}
}

// TestControllersAdditions: what the controllers add to the pods they create, which the
// planner counts: training-operator's init container on the workers of a job with a master
// (its requests the pods' own when the containers request less), and the schedulerName
// KubeRay writes; a Pod shape read for capacity gets its limits as requests.
func TestControllersAdditions(t *testing.T) {
	derive := func(yaml string) *Job {
		t.Helper()
		objs, err := ReadBytes([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		job, err := Derive(objs, "ns", nil)
		if err != nil {
			t.Fatal(err)
		}
		return job
	}
	pt := derive(`apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: pt}
spec:
  pytorchReplicaSpecs:
    Master: {replicas: 1, template: {spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: "8"}}}]}}}
    Worker: {replicas: 1, template: {spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: "8"}}}]}}}
`)
	var inits []string
	for _, p := range pt.Members {
		for _, c := range p.Spec.InitContainers {
			cpu := c.Resources.Requests[v1.ResourceCPU]
			inits = append(inits, p.Name+":"+c.Name+":"+cpu.String())
		}
	}
	if diff := cmp.Diff([]string{"pt-worker-0:init-pytorch:50m"}, inits); diff != "" {
		t.Errorf("init containers (-want +got):\n%s", diff)
	}
	ray := derive(`apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: r, labels: {ray.io/gang-scheduling-enabled: "true"}}
spec:
  headGroupSpec: {template: {spec: {containers: [{name: h, image: x, resources: {requests: {cpu: "1"}}}]}}}
  workerGroupSpecs:
  - {groupName: g, replicas: 5, minReplicas: 1, maxReplicas: 2, template: {spec: {containers: [{name: w, image: x, resources: {requests: {cpu: "2"}}}]}}}
`)
	if got := ray.Members[1].Spec.SchedulerName; got != rayScheduler {
		t.Errorf("a RayCluster worker's schedulerName %q, want %q", got, rayScheduler)
	}
	// KubeRay counts the replicas as given (5), not as clamped (2) for minResources.
	if cpu := ray.PodGroup.Spec.MinResources[v1.ResourceCPU]; cpu.String() != "11" || len(ray.Members) != 3 {
		t.Errorf("RayCluster: %d members, minResources cpu %s; want 3 and 11", len(ray.Members), cpu.String())
	}
	objs, err := ReadBytes([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: shape}\nspec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: \"8\"}}}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	shape, err := PodOf(objs)
	if err != nil {
		t.Fatal(err)
	}
	if got := shape.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"]; got.String() != "8" {
		t.Errorf("the shape requests %s GPUs, want its limit 8", got.String())
	}
}
