package util

import (
	"context"
	"fmt"

	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/resourceclaim"
)

// StartClaimController runs kube-controller-manager's resource claim controller (the one
// that creates a pod's ResourceClaims from its ResourceClaimTemplates and removes them when
// the pod is gone) in the test process until ctx ends, as the control plane of a cluster
// runs it.
func StartClaimController(ctx context.Context, cs clientset.Interface) error {
	factory := informers.NewSharedInformerFactory(cs, 0)
	controller, err := resourceclaim.NewController(klog.FromContext(ctx).WithName("resourceclaim-controller"), cs,
		factory.Core().V1().Pods(), nil, factory.Resource().V1().ResourceClaims(), factory.Resource().V1().ResourceClaimTemplates())
	if err != nil {
		return fmt.Errorf("building the resource claim controller: %w", err)
	}
	factory.Start(ctx.Done())
	go controller.Run(ctx, 2)
	return nil
}
