package localcluster

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AddNodes creates nodes that kwok simulates, with the given allocatable resources as their
// capacity, and waits until every one is Ready.
func (c *Cluster) AddNodes(ctx context.Context, nodes ...*v1.Node) error {
	for _, n := range nodes {
		n = n.DeepCopy()
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[KwokNodeAnnotation] = "fake"
		// Created with its capacity, as a kubelet registers its node; kwok's Stage writes
		// only conditions and node info, so the two never overwrite each other.
		if _, err := c.Kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node %s: %w", n.Name, err)
		}
	}
	return c.poll(ctx, c.kwok, time.Minute, func(ctx context.Context) (bool, error) {
		list, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := map[string]bool{}
		for i := range list.Items {
			ready[list.Items[i].Name] = nodeReady(&list.Items[i]) && len(list.Items[i].Status.Allocatable) > 0
		}
		for _, n := range nodes {
			if !ready[n.Name] {
				return false, nil
			}
		}
		return true, nil
	})
}

func nodeReady(n *v1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == v1.NodeReady {
			return cond.Status == v1.ConditionTrue
		}
	}
	return false
}

// SimulatedNode returns a node with the given labels whose capacity and allocatable are res.
func SimulatedNode(name string, labels map[string]string, res v1.ResourceList) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status:     v1.NodeStatus{Capacity: res.DeepCopy(), Allocatable: res.DeepCopy()},
	}
}
