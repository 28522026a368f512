package networktopology

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulingv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

func newTestPlugin(t *testing.T) (*NetworkTopologyAware, *podgroup.Registry) {
	t.Helper()
	registry := podgroup.New()
	registry.SetPodGroup(&schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hard", Annotations: map[string]string{podgroup.NetworkTopologyAnnotation: `{"highestTierAllowed":1}`}},
	})
	registry.SetPodGroup(&schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain"}})
	return &NetworkTopologyAware{registry: registry, args: config.NetworkTopologyAwareArgs{NormalPod: config.NormalPodArgs{Enable: true, Fading: 0.8}}}, registry
}

func gangPod(group string) *v1.Pod {
	return st.MakePod().Namespace("ns").Name("p").Label(schedulingv1alpha1.PodGroupLabel, group).Obj()
}

func TestSignPodAndHints(t *testing.T) {
	p, _ := newTestPlugin(t)
	tests := []struct {
		name         string
		pod          *v1.Pod
		wantSigned   bool
		wantRequeued fwk.QueueingHint
	}{
		{"member of a constrained gang", gangPod("hard"), false, fwk.Queue},
		{"member of a gang without constraint", gangPod("plain"), true, fwk.QueueSkip},
		{"pod outside any gang", st.MakePod().Namespace("ns").Name("solo").Obj(), true, fwk.QueueSkip},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, status := p.SignPod(context.Background(), tc.pod)
			if got := status.IsSuccess(); got != tc.wantSigned {
				t.Errorf("signed = %v (%v), want %v", got, status, tc.wantSigned)
			}
			hint, err := p.isConstrainedMember(klog.Background(), tc.pod, nil, nil)
			if err != nil || hint != tc.wantRequeued {
				t.Errorf("hint = %v, %v; want %v", hint, err, tc.wantRequeued)
			}
		})
	}
}
