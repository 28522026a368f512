package jobspec

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// Labels the controllers put on the pods they create (selectors and affinities may use them).
const (
	jobCompletionIndex = batchv1.JobCompletionIndexAnnotation
	trainingJobName    = "training.kubeflow.org/job-name"
	trainingJobRole    = "training.kubeflow.org/job-role"
	trainingReplica    = "training.kubeflow.org/replica-type"
	trainingIndex      = "training.kubeflow.org/replica-index"
	trainingOperator   = "training.kubeflow.org/operator-name"
	// rayGangScheduling on a RayCluster makes KubeRay create its PodGroup.
	rayGangScheduling = "ray.io/gang-scheduling-enabled"
	// rayScheduler is the schedulerName KubeRay's scheduler-plugins batch scheduler writes
	// on every pod.
	rayScheduler = "scheduler-plugins-scheduler"
)

// podGroupWithPods: a PodGroup and its pods (or one PodTemplate, minMember copies of it).
func (in *input) podGroupWithPods() (*Job, error) {
	if len(in.podGroupOrder) != 1 {
		if len(in.podGroupOrder) == 0 {
			return nil, fmt.Errorf("the input has no job: plan knows %s", Known)
		}
		return nil, fmt.Errorf("the input has %d PodGroups and no job: plan one PodGroup at a time", len(in.podGroupOrder))
	}
	pg := in.podGroupOrder[0]
	job := &Job{Kind: "PodGroup", Namespace: pg.Namespace, Name: pg.Name, PodGroup: pg, PodGroupFrom: FromFile}
	switch {
	case len(in.pods) > 0:
		for _, p := range in.pods {
			if p.Labels[schedulingv1alpha1.PodGroupLabel] != pg.Name || p.Namespace != pg.Namespace {
				return nil, fmt.Errorf("pod %s is not a member of PodGroup %s/%s (its label %s is %q)",
					p.Name, pg.Namespace, pg.Name, schedulingv1alpha1.PodGroupLabel, p.Labels[schedulingv1alpha1.PodGroupLabel])
			}
			p = p.DeepCopy()
			if p.Name == "" {
				p.Name = fmt.Sprintf("%s%d", p.GenerateName, len(job.Members))
			}
			p.UID = types.UID("plan-" + p.Namespace + "-" + p.Name)
			p.Spec.NodeName, p.Status = "", v1.PodStatus{Phase: v1.PodPending}
			defaultRequests(p)
			job.Members = append(job.Members, p)
		}
	case len(in.templates) == 1:
		t := in.templates[0]
		for i := range int(pg.Spec.MinMember) {
			job.Members = append(job.Members, memberOf(t.Template, pg.Namespace, fmt.Sprintf("%s-%d", t.Name, i), pg.Name))
		}
	case len(in.templates) > 1:
		return nil, fmt.Errorf("PodGroup %s: the input has %d PodTemplates; give the members as Pods when they differ", pg.Name, len(in.templates))
	default:
		return nil, fmt.Errorf("PodGroup %s: the input has no member: add its Pods, or a PodTemplate of which it runs minMember copies", pg.Name)
	}
	if pg.Spec.MinMember < 1 {
		return nil, fmt.Errorf("PodGroup %s: minMember %d; the scheduler needs at least 1", pg.Name, pg.Spec.MinMember)
	}
	return job, nil
}

// batchJob: the Job controller creates min(parallelism, completions) pods at once; an Indexed
// Job's carry their completion index, the rank the planner orders them by.
func (in *input) batchJob(u *unstructured.Unstructured) (*Job, error) {
	j := &batchv1.Job{}
	if err := convert(u, j); err != nil {
		return nil, err
	}
	n := int32(1)
	if j.Spec.Parallelism != nil {
		n = *j.Spec.Parallelism
	}
	if j.Spec.Completions != nil {
		n = min(n, *j.Spec.Completions)
	}
	if n <= 0 {
		return nil, fmt.Errorf("Job %s: parallelism %d starts no pod", j.Name, n)
	}
	indexed := j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion
	if j.Spec.Scheduling != nil {
		return in.nativeJob(j, n, indexed)
	}
	name := j.Spec.Template.Labels[schedulingv1alpha1.PodGroupLabel]
	if name == "" {
		return nil, fmt.Errorf("Job %s: its pod template has no %s label and the Job no spec.scheduling, so the scheduler places its pods one at a time, not as a gang; "+
			"label the template with the name of its PodGroup, or give the Job spec.scheduling", j.Name, schedulingv1alpha1.PodGroupLabel)
	}
	pg, from, err := in.podGroup(j.Namespace, name)
	if err != nil {
		return nil, err
	}
	if pg == nil {
		return nil, fmt.Errorf("Job %s: its pods' PodGroup %s/%s is neither in the input nor in the cluster", j.Name, j.Namespace, name)
	}
	return &Job{Kind: "Job", Namespace: j.Namespace, Name: j.Name, PodGroup: pg, PodGroupFrom: from,
		Members: jobPods(j, n, indexed, name)}, nil
}

// jobPods are the n pods the Job controller creates at once, in podGroup: named JOB-N, with
// the Job's labels, and an Indexed Job's completion index (their rank).
func jobPods(j *batchv1.Job, n int32, indexed bool, podGroup string) []*v1.Pod {
	var out []*v1.Pod
	for i := range int(n) {
		p := memberOf(j.Spec.Template, j.Namespace, fmt.Sprintf("%s-%d", j.Name, i), podGroup)
		p.Labels[batchv1.JobNameLabel], p.Labels["job-name"] = j.Name, j.Name
		if indexed {
			p.Labels[jobCompletionIndex] = strconv.Itoa(i)
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[jobCompletionIndex] = strconv.Itoa(i)
		}
		out = append(out, p)
	}
	return out
}

// pyTorchInitContainer is training-operator's default init-pytorch container (its template
// file, when an operator is configured with one, may differ).
func pyTorchInitContainer() v1.Container {
	return v1.Container{Name: "init-pytorch", Image: "alpine:3.10", Resources: v1.ResourceRequirements{
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("20Mi")},
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m"), v1.ResourceMemory: resource.MustParse("10Mi")}}}
}

// replicaSpec is a Kubeflow replica spec (the fields the operators create pods from).
type replicaSpec struct {
	Replicas *int32             `json:"replicas,omitempty"`
	Template v1.PodTemplateSpec `json:"template,omitempty"`
}

// runPolicy is Kubeflow's run policy (the fields the operators build the PodGroup from).
type runPolicy struct {
	SchedulingPolicy *schedulingPolicy `json:"schedulingPolicy,omitempty"`
}

type schedulingPolicy struct {
	MinAvailable           *int32           `json:"minAvailable,omitempty"`
	MinResources           *v1.ResourceList `json:"minResources,omitempty"`
	ScheduleTimeoutSeconds *int32           `json:"scheduleTimeoutSeconds,omitempty"`
}

// policy is the scheduling policy (empty when the job has none).
func (r runPolicy) policy() schedulingPolicy {
	if r.SchedulingPolicy == nil {
		return schedulingPolicy{}
	}
	return *r.SchedulingPolicy
}

// podGroupSpec is the spec an operator writes: minMember (minAvailable when set), the
// policy's minResources or the requests (limits where a container requests nothing) of
// minMember members, the first member (launcher, master, head) and the others in order, and
// the policy's timeout or timeout.
func (r runPolicy) podGroupSpec(members []*v1.Pod, minMember int32, timeout *int32) schedulingv1alpha1.PodGroupSpec {
	pol := r.policy()
	if pol.MinAvailable != nil {
		minMember = *pol.MinAvailable
	}
	spec := schedulingv1alpha1.PodGroupSpec{MinMember: minMember, ScheduleTimeoutSeconds: timeout}
	if pol.ScheduleTimeoutSeconds != nil {
		spec.ScheduleTimeoutSeconds = pol.ScheduleTimeoutSeconds
	}
	if pol.MinResources != nil {
		spec.MinResources = *pol.MinResources
		return spec
	}
	spec.MinResources = minResources(members, minMember)
	return spec
}

// minResources sums the containers' requests (limits where there is no request) of the first
// n members.
func minResources(members []*v1.Pod, n int32) v1.ResourceList {
	if n <= 0 {
		return nil
	}
	out := v1.ResourceList{}
	for _, p := range members[:min(int(n), len(members))] {
		for _, c := range p.Spec.Containers {
			for name, q := range c.Resources.Requests {
				cur := out[name]
				cur.Add(q)
				out[name] = cur
			}
		}
	}
	return out
}

// pyTorchJob: training-operator names the pods job-TYPE-INDEX and its PodGroup after the job,
// with minMember the sum of the replicas (or schedulingPolicy.minAvailable); a PodGroup it
// creates takes the job's annotations, one that exists keeps its own (only its spec is set).
func (in *input) pyTorchJob(u *unstructured.Unstructured) (*Job, error) {
	var spec struct {
		Spec struct {
			RunPolicy    runPolicy              `json:"runPolicy,omitempty"`
			ReplicaSpecs map[string]replicaSpec `json:"pytorchReplicaSpecs"`
		} `json:"spec"`
	}
	if err := convertLoose(u, &spec); err != nil {
		return nil, err
	}
	// training-operator's defaulting turns the replica types' keys into Master and Worker.
	specs := map[string]replicaSpec{}
	for key, rs := range spec.Spec.ReplicaSpecs {
		rtype := map[string]string{"master": "Master", "worker": "Worker"}[strings.ToLower(key)]
		if rtype == "" {
			return nil, fmt.Errorf("PyTorchJob %s: replica type %q; training-operator knows Master and Worker", u.GetName(), key)
		}
		specs[rtype] = rs
	}
	rtypes := slices.Sorted(maps.Keys(specs))
	if len(rtypes) == 0 {
		return nil, fmt.Errorf("PyTorchJob %s: spec.pytorchReplicaSpecs is empty", u.GetName())
	}
	_, hasMaster := specs["Master"]
	var members []*v1.Pod
	for _, rtype := range rtypes {
		rs := specs[rtype]
		if rtype == "Worker" && hasMaster {
			// training-operator's default init container waits for the master's name.
			rs.Template = *rs.Template.DeepCopy()
			rs.Template.Spec.InitContainers = append(rs.Template.Spec.InitContainers, pyTorchInitContainer())
		}
		for i := range int(ptrOr(rs.Replicas, 1)) {
			p := memberOf(rs.Template, u.GetNamespace(), fmt.Sprintf("%s-%s-%d", u.GetName(), strings.ToLower(rtype), i), u.GetName())
			p.Labels[trainingJobName], p.Labels[trainingReplica], p.Labels[trainingIndex] = u.GetName(), strings.ToLower(rtype), strconv.Itoa(i)
			p.Labels[trainingOperator] = "pytorchjob-controller"
			if rtype == "Master" {
				p.Labels[trainingJobRole] = "master"
			}
			members = append(members, p)
		}
	}
	// Master first: training-operator's minResources counts the highest-priority replicas.
	pgSpec := spec.Spec.RunPolicy.podGroupSpec(members, int32(len(members)), nil)
	return in.operatorJob(u, members, pgSpec, u.GetAnnotations(), true)
}

// mpiJob: mpi-operator runs the launcher (through a batch Job named job-launcher) and the
// workers job-worker-INDEX in one PodGroup named after the job, minMember the workers and the
// launcher (or schedulingPolicy.minAvailable); it copies no annotation onto a PodGroup it
// creates, and sets only the spec of one that exists.
func (in *input) mpiJob(u *unstructured.Unstructured) (*Job, error) {
	var spec struct {
		Spec struct {
			RunPolicy           runPolicy              `json:"runPolicy,omitempty"`
			RunLauncherAsWorker *bool                  `json:"runLauncherAsWorker,omitempty"`
			ReplicaSpecs        map[string]replicaSpec `json:"mpiReplicaSpecs"`
		} `json:"spec"`
	}
	if err := convertLoose(u, &spec); err != nil {
		return nil, err
	}
	launcher, ok := spec.Spec.ReplicaSpecs["Launcher"]
	if !ok {
		return nil, fmt.Errorf("MPIJob %s: spec.mpiReplicaSpecs has no Launcher", u.GetName())
	}
	for rtype := range spec.Spec.ReplicaSpecs {
		if rtype != "Launcher" && rtype != "Worker" {
			return nil, fmt.Errorf("MPIJob %s: replica type %q; mpi-operator knows Launcher and Worker", u.GetName(), rtype)
		}
	}
	name := u.GetName()
	p := memberOf(launcher.Template, u.GetNamespace(), name+"-launcher", name)
	p.Labels[trainingOperator], p.Labels[trainingJobName], p.Labels[trainingJobRole] = "mpi-operator", name, "launcher"
	members := []*v1.Pod{p}
	worker := spec.Spec.ReplicaSpecs["Worker"]
	workers := ptrOr(worker.Replicas, 0)
	offset := 0
	if spec.Spec.RunLauncherAsWorker != nil && *spec.Spec.RunLauncherAsWorker {
		offset = 1 // the launcher is rank 0
		p.Labels[trainingIndex] = "0"
	}
	for i := range int(workers) {
		p := memberOf(worker.Template, u.GetNamespace(), fmt.Sprintf("%s-worker-%d", name, i), name)
		p.Labels[trainingOperator], p.Labels[trainingJobName], p.Labels[trainingJobRole] = "mpi-operator", name, "worker"
		p.Labels[trainingIndex] = strconv.Itoa(i + offset)
		members = append(members, p)
	}
	// mpi-operator refuses a job whose PodGroup it did not create (ErrResourceExists): the
	// PodGroup is annotated once the operator made it.
	if pg, from, err := in.podGroup(u.GetNamespace(), name); err != nil {
		return nil, err
	} else if pg != nil && (from == FromFile || !controlledBy(pg, "MPIJob", name)) {
		return nil, fmt.Errorf("MPIJob %s: PodGroup %s/%s exists (in the %s) and mpi-operator refuses a job whose PodGroup it did not create; "+
			"leave the PodGroup out and give its constraint with --network-topology", name, u.GetNamespace(), name, map[string]string{FromFile: "input", FromCluster: "cluster"}[from])
	}
	pgSpec := spec.Spec.RunPolicy.podGroupSpec(members, workers+1, ptrTo[int32](0))
	return in.operatorJob(u, members, pgSpec, nil, true)
}

// rayCluster: KubeRay, for a RayCluster labelled ray.io/gang-scheduling-enabled, creates a
// PodGroup named after it with minMember the desired workers (replicas within min and max,
// times numOfHosts) and the head; it leaves a PodGroup that exists as it is.
func (in *input) rayCluster(u *unstructured.Unstructured) (*Job, error) {
	if _, ok := u.GetLabels()[rayGangScheduling]; !ok {
		return nil, fmt.Errorf("RayCluster %s: it has no %s label, so KubeRay creates no PodGroup and its pods are placed one at a time; add the label", u.GetName(), rayGangScheduling)
	}
	var spec struct {
		Spec struct {
			Head struct {
				Template v1.PodTemplateSpec `json:"template"`
			} `json:"headGroupSpec"`
			Workers []struct {
				GroupName   string             `json:"groupName"`
				Replicas    *int32             `json:"replicas,omitempty"`
				MinReplicas *int32             `json:"minReplicas,omitempty"`
				MaxReplicas *int32             `json:"maxReplicas,omitempty"`
				NumOfHosts  int32              `json:"numOfHosts,omitempty"`
				Suspend     *bool              `json:"suspend,omitempty"`
				Template    v1.PodTemplateSpec `json:"template"`
			} `json:"workerGroupSpecs,omitempty"`
		} `json:"spec"`
	}
	if err := convertLoose(u, &spec); err != nil {
		return nil, err
	}
	name := u.GetName()
	head := memberOf(spec.Spec.Head.Template, u.GetNamespace(), name+"-head", name)
	head.Spec.SchedulerName = rayScheduler
	head.Labels["ray.io/cluster"], head.Labels["ray.io/node-type"], head.Labels["ray.io/group"] = name, "head", "headgroup"
	members := []*v1.Pod{head}
	// KubeRay's minResources: the head and each group's replicas as given (not clamped).
	minRes := minResources([]*v1.Pod{head}, 1)
	for _, g := range spec.Spec.Workers {
		if g.Suspend != nil && *g.Suspend {
			continue
		}
		if g.Replicas != nil {
			one := minResources([]*v1.Pod{memberOf(g.Template, "", "", "")}, 1)
			for name, q := range one {
				q.Mul(int64(*g.Replicas) * int64(max(g.NumOfHosts, 1)))
				cur := minRes[name]
				cur.Add(q)
				minRes[name] = cur
			}
		}
		lo, hi := ptrOr(g.MinReplicas, 0), ptrOr(g.MaxReplicas, math.MaxInt32)
		replicas := ptrOr(g.Replicas, lo)
		switch {
		case lo > hi:
			replicas = hi
		case replicas < lo:
			replicas = lo
		case replicas > hi:
			replicas = hi
		}
		hosts := max(g.NumOfHosts, 1)
		for i := range int(replicas * hosts) {
			p := memberOf(g.Template, u.GetNamespace(), fmt.Sprintf("%s-%s-worker-%d", name, g.GroupName, i), name)
			p.Labels["ray.io/cluster"], p.Labels["ray.io/node-type"], p.Labels["ray.io/group"] = name, "worker", g.GroupName
			p.Spec.SchedulerName = rayScheduler
			members = append(members, p)
		}
	}
	return in.operatorJob(u, members, schedulingv1alpha1.PodGroupSpec{MinMember: int32(len(members)), MinResources: minRes}, nil, false)
}

// operatorJob makes the Job of an operator's members: the PodGroup named after the job, from
// the file or the cluster (its spec replaced by spec when the operator sets it), else built
// with spec and the annotations the operator copies.
func (in *input) operatorJob(u *unstructured.Unstructured, members []*v1.Pod, spec schedulingv1alpha1.PodGroupSpec, annotations map[string]string, setsSpec bool) (*Job, error) {
	pg, from, err := in.podGroup(u.GetNamespace(), u.GetName())
	if err != nil {
		return nil, err
	}
	if pg == nil {
		pg = &schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: u.GetNamespace(), Name: u.GetName(), Annotations: annotations}, Spec: spec}
		from = FromController
	} else if setsSpec {
		pg = pg.DeepCopy()
		pg.Spec = spec
	}
	if pg.Spec.MinMember < 1 {
		return nil, fmt.Errorf("%s %s: minMember %d; the scheduler needs at least 1", u.GetKind(), u.GetName(), pg.Spec.MinMember)
	}
	return &Job{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), PodGroup: pg, PodGroupFrom: from, Members: members}, nil
}

// convertLoose reads an operator's object into the few fields plan needs (the operator's
// own types are not imported: their modules pin other Kubernetes versions).
func convertLoose(u *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return checkName(u)
}

func ptrTo[T any](v T) *T { return &v }

// controlledBy reports whether pg's controller is the kind named name.
func controlledBy(pg *schedulingv1alpha1.PodGroup, kind, name string) bool {
	ref := metav1.GetControllerOf(pg)
	return ref != nil && ref.Kind == kind && ref.Name == name
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}
