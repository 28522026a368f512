package inspect

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/hypernode"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// NativeAPI names Kubernetes' own pod groups in reports.
const NativeAPI = "scheduling.k8s.io/v1beta1"

// readNativePodGroups reads the native pod groups opts asks for. A cluster that does not
// serve them (gate GenericWorkload off) has none; a forbidden read is a warning.
func (cl *Cluster) readNativePodGroups(ctx context.Context, c Clients, opts LoadOptions) error {
	var err error
	switch {
	case opts.SkipPodGroups:
		return nil
	case opts.PodGroup != nil:
		var pg *schedulingv1beta1.PodGroup
		pg, err = c.Kube.SchedulingV1beta1().PodGroups(opts.PodGroup.Namespace).Get(ctx, opts.PodGroup.Name, metav1.GetOptions{})
		if err == nil {
			cl.NativePodGroups = []*schedulingv1beta1.PodGroup{pg}
		}
	default:
		err = eachItem(ctx, func(o metav1.ListOptions) (runtime.Object, error) {
			return c.Kube.SchedulingV1beta1().PodGroups(metav1.NamespaceAll).List(ctx, o)
		}, func(pg *schedulingv1beta1.PodGroup) { cl.NativePodGroups = append(cl.NativePodGroups, pg) })
	}
	switch {
	case err == nil:
		cl.NativeServed = true
	case apierrors.IsNotFound(err) && opts.PodGroup != nil:
		// The group is missing, or the API is: only a list can tell which.
		_, lerr := c.Kube.SchedulingV1beta1().PodGroups(opts.PodGroup.Namespace).List(ctx, metav1.ListOptions{Limit: 1})
		cl.NativeServed = lerr == nil
	case apierrors.IsNotFound(err):
	case apierrors.IsForbidden(err):
		cl.Warnings = append(cl.Warnings, fmt.Sprintf("native pod groups (%s) could not be read: %v", NativeAPI, err))
	default:
		return fmt.Errorf("reading native pod groups: %w", err)
	}
	return nil
}

// explainNative explains a native pod group as Explain explains a PodGroup.
func (c *Cluster) explainNative(pg *schedulingv1beta1.PodGroup, res v1.ResourceName) Explanation {
	n := podgroup.NativeOf(pg)
	view, foreign := n.View()
	view.UID = pg.UID
	key := n.TopologyKey
	var counts MemberCounts
	members := c.members(pg.Namespace, pg.Name, nativeMemberOf, &counts)
	e, gang := c.explainGang(view, members, counts, res, nativeHeldBack)
	e.API = NativeAPI
	switch {
	case foreign:
		e.Warnings = append(e.Warnings, fmt.Sprintf("its topology key %s is not a HyperNode tier label (%sN): the scheduler places it in one domain of that label, which explain does not analyse", key, hypernode.TierLabelPrefix))
	case key != "" && e.NetworkTopology != nil && e.NetworkTopology.Annotation == view.Annotations[podgroup.NetworkTopologyAnnotation] && pg.Annotations[podgroup.NetworkTopologyAnnotation] == "":
		e.NetworkTopology.Annotation, e.NetworkTopology.TopologyKey = "", key
	}
	e.Scheduler = c.schedulerView(pg.Namespace, pg.Name, gang)
	return e
}

// nativeHeldBack is why kube-scheduler's GangScheduling keeps a native group's members out
// of scheduling ("" when it lets them in): until minCount of them exist.
func nativeHeldBack(key string, gang podgroup.Gang) string {
	if gang.Info.Members < gang.Info.MinMember() {
		return fmt.Sprintf("waiting for pod group %s to have %d members (minCount); %d exist", key, gang.Info.MinMember(), gang.Info.Members)
	}
	return ""
}

// nativePodGroup returns the native pod group namespace/name, or nil.
func (c *Cluster) nativePodGroup(namespace, name string) *schedulingv1beta1.PodGroup {
	for _, pg := range c.NativePodGroups {
		if pg.Namespace == namespace && pg.Name == name {
			return pg
		}
	}
	return nil
}

// nativeMemberOf returns the name of the native pod group a pod names, or "".
func nativeMemberOf(p *v1.Pod) string {
	if sg := p.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
		return *sg.PodGroupName
	}
	return ""
}

// labelMemberOf returns the name of the PodGroup a pod's label names, or "".
func labelMemberOf(p *v1.Pod) string { return p.Labels[schedulingv1alpha1.PodGroupLabel] }
