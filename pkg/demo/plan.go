package demo

import (
	"context"
	"fmt"
	"os"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/inspect"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/jobspec"
)

// Plan prints what kubectl hypernode plan says of a job's file before it is submitted, and
// returns it.
func (r *Runner) Plan(ctx context.Context, s Scene, j Job) (inspect.PlanReport, error) {
	data, err := os.ReadFile(r.example(j.File))
	if err != nil {
		return inspect.PlanReport{}, err
	}
	objs, err := jobspec.ReadBytes(data)
	if err != nil {
		return inspect.PlanReport{}, err
	}
	job, err := jobspec.Derive(objs, s.Namespace, func(ns, name string) (*schedulingv1alpha1.PodGroup, error) {
		pg, err := r.Clients.Scheduling.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return pg, err
	})
	if err != nil {
		return inspect.PlanReport{}, err
	}
	// The same reads as kubectl hypernode plan.
	cluster, err := inspect.LoadWith(ctx, r.Clients, inspect.LoadOptions{SkipEvents: true, PriorityClasses: true, PodDisruptionBudgets: true})
	if err != nil {
		return inspect.PlanReport{}, err
	}
	report, err := cluster.Plan(job, inspect.PlanOptions{Resource: GPU})
	if err != nil {
		return report, err
	}
	return report, inspect.WritePlan(r.Out, report)
}

// CheckPlan returns an error unless every member the plan placed is bound in the leaf it
// planned (members are named as the plan names them: an Indexed Job's by its index).
func CheckPlan(plan inspect.PlanReport, res Result, e inspect.Explanation) error {
	if !plan.Placed || plan.Placement == nil {
		return fmt.Errorf("%s: the plan did not place it", plan.Job)
	}
	if e.Placement == nil {
		return fmt.Errorf("%s: nothing bound", plan.Job)
	}
	if len(plan.Placement.Members) != res.Job.Pods {
		return fmt.Errorf("%s: the plan placed %d of its %d pods", plan.Job, len(plan.Placement.Members), res.Job.Pods)
	}
	leafOf := map[string]string{}
	var walk func(d inspect.PlacedDomain)
	walk = func(d inspect.PlacedDomain) {
		for _, n := range d.Nodes {
			leafOf[n.Node] = d.Name
		}
		for _, c := range d.Children {
			walk(c)
		}
	}
	walk(e.Placement.Tree)
	for _, m := range plan.Placement.Members {
		node, ok := res.Bound[m.Pod]
		if !ok {
			return fmt.Errorf("%s: planned member %s is not bound", plan.Job, m.Pod)
		}
		if leafOf[node] != m.Leaf {
			return fmt.Errorf("%s: %s bound on %s in %s, planned in %s", plan.Job, m.Pod, node, leafOf[node], m.Leaf)
		}
	}
	return nil
}
