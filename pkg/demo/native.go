package demo

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NativeScene is the 64-node fabric on a control plane with Kubernetes' own pod groups turned
// on (localcluster.Options.NativePodGroups): one Job with spec.scheduling, whose native gang
// the Job controller creates, placed in one leaf. The gates run on a control plane of their
// own: with WorkloadWithJob, the Job controller gives every Job a native group, which the other
// scenes' labelled Jobs must not get.
func NativeScene() Scene {
	s := Scenes()[2]
	s.Namespace = "native"
	s.Title = "Kubernetes' own pod groups (gates on): a Job with spec.scheduling on the 64-node fabric"
	s.Jobs = []Job{{Name: "native-train", File: "native-job.yaml", Pods: 8, Native: true}}
	return s
}

// nativeGroupOf returns the name of the native PodGroup the Job controller made for the job:
// its name is the Workload's (the Job's name and a hash of its UID) and the template's.
func (r *Runner) nativeGroupOf(ctx context.Context, namespace string, j Job) (string, error) {
	pgs, err := r.Cluster.Kube.SchedulingV1beta1().PodGroups(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, pg := range pgs.Items {
		if strings.HasPrefix(pg.Name, j.Name+"-") {
			return pg.Name, nil
		}
	}
	return "", fmt.Errorf("job %s/%s: the Job controller made no PodGroup for it", namespace, j.Name)
}
