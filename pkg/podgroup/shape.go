package podgroup

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Shape is the members of a gang that the scheduler's Filter plugins see alike: same
// requests, node selection, tolerations, spread constraints, host ports and priority. A
// launcher and its workers, a Ray head and its workers, are two shapes; the replicas of one
// template are one.
type Shape struct {
	// Name describes the shape by its requests, e.g. "cpu=1,nvidia.com/gpu=8".
	Name string
	// Rep is the shape's first member in rank order; Members are all of them, by name.
	Rep     *v1.Pod
	Members []string
}

// shapeSignature is what makes two members alike for the Filter plugins. Volumes are left
// out: per-member claims (a StatefulSet's) would make every member its own shape, and the
// real Filter still checks them when the member schedules.
type shapeSignature struct {
	Requests         v1.ResourceList               `json:"r,omitempty"`
	NodeSelector     map[string]string             `json:"ns,omitempty"`
	Affinity         *v1.Affinity                  `json:"a,omitempty"`
	Tolerations      []v1.Toleration               `json:"t,omitempty"`
	TopologySpread   []v1.TopologySpreadConstraint `json:"ts,omitempty"`
	Priority         *int32                        `json:"p,omitempty"`
	HostNetwork      bool                          `json:"hn,omitempty"`
	HostPorts        []v1.ContainerPort            `json:"hp,omitempty"`
	ResourceClaims   []v1.PodResourceClaim         `json:"rc,omitempty"`
	RuntimeClassName *string                       `json:"rt,omitempty"`
	Overhead         v1.ResourceList               `json:"o,omitempty"`
	NodeName         string                        `json:"n,omitempty"`
}

// signatureOf returns a pod's shape signature.
func signatureOf(pod *v1.Pod) string {
	sig := shapeSignature{
		Requests:         resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}),
		NodeSelector:     pod.Spec.NodeSelector,
		Affinity:         pod.Spec.Affinity,
		Tolerations:      pod.Spec.Tolerations,
		TopologySpread:   pod.Spec.TopologySpreadConstraints,
		Priority:         pod.Spec.Priority,
		HostNetwork:      pod.Spec.HostNetwork,
		ResourceClaims:   pod.Spec.ResourceClaims,
		RuntimeClassName: pod.Spec.RuntimeClassName,
		Overhead:         pod.Spec.Overhead,
		NodeName:         pod.Spec.NodeName,
	}
	for _, c := range pod.Spec.Containers {
		for _, port := range c.Ports {
			if port.HostPort != 0 {
				sig.HostPorts = append(sig.HostPorts, port)
			}
		}
	}
	out, err := json.Marshal(sig)
	if err != nil {
		// Cannot happen for API types; a pod of its own shape is still planned exactly.
		return string(pod.UID)
	}
	return string(out)
}

// ShapesOf groups members by shape, in the order of each shape's first member.
func ShapesOf(members []Member) []Shape {
	bySignature := map[string]int{}
	var out []Shape
	for _, m := range members {
		sig := signatureOf(m.Pod)
		i, ok := bySignature[sig]
		if !ok {
			i = len(out)
			bySignature[sig] = i
			out = append(out, Shape{Rep: m.Pod, Name: requestsName(m.Pod)})
		}
		out[i].Members = append(out[i].Members, m.Pod.Name)
	}
	// Two shapes with the same requests differ in node selection: number them apart.
	seen := map[string]int{}
	for i := range out {
		seen[out[i].Name]++
		if n := seen[out[i].Name]; n > 1 {
			out[i].Name = fmt.Sprintf("%s (variant %d)", out[i].Name, n)
		}
	}
	return out
}

// requestsName describes a pod by its requests, e.g. "cpu=1,nvidia.com/gpu=8".
func requestsName(pod *v1.Pod) string {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	var parts []string
	for name, q := range reqs {
		if !q.IsZero() {
			parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
		}
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "no requests"
	}
	return strings.Join(parts, ",")
}
