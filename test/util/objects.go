package util

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	schedclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	topologyv1alpha1 "github.com/hypernode-dev/hypernode-scheduler/apis/topology/v1alpha1"
)

// PauseImage is the image of test pods; no kubelet runs them.
const PauseImage = "registry.k8s.io/pause:3.10"

// Node returns a ready node with the given allocatable cpu (cores), memory and extra resources.
func Node(name string, cpu, memory string, labels map[string]string, extra ...v1.ResourceList) *v1.Node {
	alloc := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse(cpu),
		v1.ResourceMemory: resource.MustParse(memory),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	for _, e := range extra {
		for k, q := range e {
			alloc[k] = q
		}
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: v1.NodeStatus{
			Capacity:    alloc.DeepCopy(),
			Allocatable: alloc,
			Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
		},
	}
}

// Pod returns a pod for the hypernode-scheduler that requests cpu (and optionally more).
func Pod(namespace, name, schedulerName, cpu string, labels map[string]string) *v1.Pod {
	requests := v1.ResourceList{}
	if cpu != "" {
		requests[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: v1.PodSpec{
			SchedulerName: schedulerName,
			Containers: []v1.Container{{
				Name:      "main",
				Image:     PauseImage,
				Resources: v1.ResourceRequirements{Requests: requests},
			}},
		},
	}
}

// CreateNodes creates the nodes (their status included, as a kubelet would report it).
func CreateNodes(ctx context.Context, cs clientset.Interface, nodes ...*v1.Node) error {
	for _, n := range nodes {
		created, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating node %s: %w", n.Name, err)
		}
		created.Status = n.Status
		updated, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("setting status of node %s: %w", n.Name, err)
		}
		// The TaintNodesByCondition admission plugin taints every new node not-ready; with no
		// node lifecycle controller running, nothing would remove the taint.
		updated.Spec.Taints = n.Spec.Taints
		if _, err := cs.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("setting taints of node %s: %w", n.Name, err)
		}
	}
	return nil
}

// DeletePodsNow deletes every pod of a namespace without a grace period: no kubelet runs to
// confirm a graceful deletion, and pods left bound would still use their nodes' resources
// (a node of the same name in a later test included).
func DeletePodsNow(ctx context.Context, cs clientset.Interface, namespace string) error {
	return cs.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
}

// DeleteClaimsNow removes every ResourceClaim of the namespace, its finalizers first: the
// scheduler's delete protection would otherwise keep an allocated claim, and its devices
// (the next test publishes devices of the same names), after the claim controller stopped.
func DeleteClaimsNow(ctx context.Context, cs clientset.Interface, namespace string) error {
	claims := cs.ResourceV1().ResourceClaims(namespace)
	list, err := claims.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range list.Items {
		claim := &list.Items[i]
		if len(claim.Finalizers) == 0 {
			continue
		}
		claim.Finalizers = nil
		if _, err := claims.Update(ctx, claim, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return claims.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
}

// DeleteAllNodes removes every node, so the next test starts from an empty cluster.
func DeleteAllNodes(ctx context.Context, cs clientset.Interface) error {
	return cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
}

// CreateNamespace creates a namespace with a name derived from the test's name.
func CreateNamespace(ctx context.Context, cs clientset.Interface, prefix string) (string, error) {
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: sanitize(prefix) + "-"}}
	created, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return created.Name, nil
}

func sanitize(s string) string {
	s = strings.ToLower(s)
	var b strings.Builder
	for _, r := range s {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteRune('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > 40 {
		out = strings.Trim(out[:40], "-")
	}
	return out
}

// ReadHyperNodes decodes every HyperNode of a multi-document YAML file.
func ReadHyperNodes(path string) ([]*topologyv1alpha1.HyperNode, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	decoder := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*topologyv1alpha1.HyperNode
	for {
		hn := &topologyv1alpha1.HyperNode{}
		if err := decoder.Decode(hn); err != nil {
			if err.Error() == "EOF" {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if hn.Kind != "HyperNode" {
			continue
		}
		out = append(out, hn)
	}
}

// WaitForPodsBound waits until every named pod is bound and returns pod name -> node name.
func WaitForPodsBound(ctx context.Context, cs clientset.Interface, namespace string, names []string, timeout time.Duration) (map[string]string, error) {
	placements := map[string]string{}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			if _, done := placements[name]; done {
				continue
			}
			pod, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) {
					return false, nil
				}
				return false, err
			}
			if pod.Spec.NodeName == "" {
				return false, nil
			}
			placements[name] = pod.Spec.NodeName
		}
		return true, nil
	})
	if err != nil {
		var missing []string
		for _, name := range names {
			if _, ok := placements[name]; !ok {
				missing = append(missing, name)
			}
		}
		sort.Strings(missing)
		return placements, fmt.Errorf("pods %v not bound within %v (%s): %w", missing, timeout, describePods(ctx, cs, namespace, missing), err)
	}
	return placements, nil
}

// BoundPods returns pod name -> node name of the namespace's bound pods.
func BoundPods(ctx context.Context, cs clientset.Interface, namespace string) (map[string]string, error) {
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	bound := map[string]string{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			bound[p.Name] = p.Spec.NodeName
		}
	}
	return bound, nil
}

// describePods summarises why pods are not bound, for failure messages.
func describePods(ctx context.Context, cs clientset.Interface, namespace string, names []string) string {
	var out []string
	for _, name := range names {
		pod, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		state := "no PodScheduled condition"
		for _, c := range pod.Status.Conditions {
			if c.Type == v1.PodScheduled {
				state = fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
			}
		}
		out = append(out, fmt.Sprintf("%s: %s", name, state))
	}
	return strings.Join(out, "; ")
}

// PodGroupLabel is the label that makes a pod a member of a PodGroup in its namespace.
const PodGroupLabel = schedulingv1alpha1.PodGroupLabel

// PodGroup returns a scheduler-plugins PodGroup with the given minMember and annotations.
func PodGroup(namespace, name string, minMember int32, annotations map[string]string) *schedulingv1alpha1.PodGroup {
	return &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: annotations},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: minMember},
	}
}

// GangPods returns count pods named <group>-<i>, members of the PodGroup group.
func GangPods(namespace, group, schedulerName, cpu string, count int) []*v1.Pod {
	pods := make([]*v1.Pod, 0, count)
	for i := range count {
		pods = append(pods, Pod(namespace, fmt.Sprintf("%s-%d", group, i), schedulerName, cpu, map[string]string{PodGroupLabel: group}))
	}
	return pods
}

// CreatePodGroup creates a PodGroup.
func CreatePodGroup(ctx context.Context, cs schedclientset.Interface, pg *schedulingv1alpha1.PodGroup) error {
	_, err := cs.SchedulingV1alpha1().PodGroups(pg.Namespace).Create(ctx, pg, metav1.CreateOptions{})
	return err
}

// CreatePods creates pods and returns their names in order.
func CreatePods(ctx context.Context, cs clientset.Interface, pods ...*v1.Pod) ([]string, error) {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		if _, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return names, fmt.Errorf("creating pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		names = append(names, p.Name)
	}
	return names, nil
}

// WaitForPodGone waits until the pod with the given UID no longer exists.
func WaitForPodGone(ctx context.Context, cs clientset.Interface, namespace, name string, uid types.UID, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pod, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return pod.UID != uid, nil
	})
}

// WaitPriorityClassAdmitted waits until a pod of the PriorityClass passes admission: the
// Priority admission plugin reads PriorityClasses from its informer, so a class just created
// may still be unknown to it. A dry-run creation creates nothing.
func WaitPriorityClassAdmitted(ctx context.Context, cs clientset.Interface, namespace, class string, timeout time.Duration) error {
	probe := Pod(namespace, "priority-probe", "no-scheduler", "", nil)
	probe.Spec.PriorityClassName = class
	var last error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, last = cs.CoreV1().Pods(namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("PriorityClass %s never admitted (last: %v): %w", class, last, err)
	}
	return nil
}
