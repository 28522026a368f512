package jobspec

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// Kubernetes' own pod groups (scheduling.k8s.io/v1beta1). The scheduler places them with the
// planner and the preemption decision of PodGroups (docs/design.md, "Native pod groups"), so
// plan analyses a native group as its PodGroup view (podgroup.Native.View): the members get
// the view's label in place of their schedulingGroup, in the analysis only.

// nativeGroupWithPods is a native PodGroup with its pods (spec.schedulingGroup names it).
func (in *input) nativeGroupWithPods() (*Job, error) {
	if len(in.natives) != 1 {
		return nil, fmt.Errorf("the input has %d native PodGroups and no job: plan one at a time", len(in.natives))
	}
	pg := in.natives[0]
	n := podgroup.NativeOf(pg)
	view, foreign := n.View()
	if foreign {
		return nil, fmt.Errorf("pod group %s: its topology key %s is not a HyperNode tier label (hypernode.dev/tier-N): the scheduler places it in one domain of that label, which plan does not analyse",
			pg.Name, n.TopologyKey)
	}
	if len(in.pods) == 0 {
		return nil, fmt.Errorf("pod group %s: the input has no member: add its Pods (spec.schedulingGroup.podGroupName: %s)", pg.Name, pg.Name)
	}
	job := &Job{Kind: "PodGroup (" + schedulingv1beta1.SchemeGroupVersion.String() + ")", Namespace: pg.Namespace, Name: pg.Name,
		PodGroup: view, PodGroupFrom: FromFile, Native: true}
	for _, p := range in.pods {
		if sg := p.Spec.SchedulingGroup; sg == nil || sg.PodGroupName == nil || *sg.PodGroupName != pg.Name || p.Namespace != pg.Namespace {
			return nil, fmt.Errorf("pod %s is not a member of pod group %s/%s (its spec.schedulingGroup.podGroupName is not %q)", p.Name, pg.Namespace, pg.Name, pg.Name)
		}
		if label := p.Labels[schedulingv1alpha1.PodGroupLabel]; label != "" {
			return nil, inTwoGroups(p.Name, label, pg.Name)
		}
		p = p.DeepCopy()
		if p.Name == "" {
			p.Name = fmt.Sprintf("%s%d", p.GenerateName, len(job.Members))
		}
		p.UID = types.UID("plan-" + p.Namespace + "-" + p.Name)
		p.Spec.NodeName, p.Status = "", v1.PodStatus{Phase: v1.PodPending}
		defaultRequests(p)
		job.Members = append(job.Members, analysed(p, view.Name))
	}
	if view.Spec.MinMember == 0 {
		// The basic policy: the pods are placed together, without all-or-nothing.
		view.Spec.MinMember = 1
	}
	return job, nil
}

// nativeJob is a batch Job with spec.scheduling: the Job controller (gate WorkloadWithJob)
// creates its Workload and PodGroup, a gang of the policy's minCount (parallelism when the
// gang policy leaves it out) with the constraints' topology key, and sets the pods'
// schedulingGroup. The PodGroup's name carries a hash of the Job's UID; plan names it after
// the Job.
func (in *input) nativeJob(j *batchv1.Job, n int32, indexed bool) (*Job, error) {
	if label := j.Spec.Template.Labels[schedulingv1alpha1.PodGroupLabel]; label != "" {
		return nil, inTwoGroups("template of Job "+j.Name, label, "of its spec.scheduling")
	}
	s := j.Spec.Scheduling
	native := podgroup.Native{Key: podgroup.Key{Namespace: j.Namespace, Name: j.Name}}
	if p := s.SchedulingPolicy; p != nil && p.Gang != nil {
		native.MinCount = int(n)
		if p.Gang.MinCount != nil {
			native.MinCount = int(*p.Gang.MinCount)
		}
	}
	if c := s.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
		native.TopologyKey = c.Topology[0].Key
	}
	view, foreign := native.View()
	if foreign {
		return nil, fmt.Errorf("Job %s: its topology key %s is not a HyperNode tier label (hypernode.dev/tier-N): the scheduler places it in one domain of that label, which plan does not analyse",
			j.Name, native.TopologyKey)
	}
	if view.Spec.MinMember == 0 {
		view.Spec.MinMember = 1
	}
	return &Job{Kind: "Job", Namespace: j.Namespace, Name: j.Name, PodGroup: view, PodGroupFrom: FromController, Native: true,
		Members: jobPods(j, n, indexed, view.Name)}, nil
}

// analysed is a native group's member as plan analyses it: in the view's PodGroup.
func analysed(p *v1.Pod, group string) *v1.Pod {
	p.Spec.SchedulingGroup = nil
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[schedulingv1alpha1.PodGroupLabel] = group
	return p
}

// inTwoGroups is the scheduler's refusal of a pod in a PodGroup and a native group.
func inTwoGroups(pod, label, native string) error {
	return fmt.Errorf("%s is in PodGroup %s (label %s) and in the native pod group %s: the scheduler refuses a pod in two gangs (InTwoPodGroups); remove the label or the native group",
		pod, label, schedulingv1alpha1.PodGroupLabel, native)
}
