package plugins

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
)

// TestRequireCRDs: a missing CRD fails the start with an error that names it.
func TestRequireCRDs(t *testing.T) {
	served := map[string]*metav1.APIResourceList{
		"topology.volcano.sh/v1alpha1": {GroupVersion: "topology.volcano.sh/v1alpha1", APIResources: []metav1.APIResource{{Name: "hypernodes"}}},
		"scheduling.x-k8s.io/v1alpha1": {GroupVersion: "scheduling.x-k8s.io/v1alpha1", APIResources: []metav1.APIResource{{Name: "podgroups"}}},
	}
	tests := []struct {
		name    string
		serve   []string
		wantErr string
	}{
		{name: "both installed", serve: []string{"topology.volcano.sh/v1alpha1", "scheduling.x-k8s.io/v1alpha1"}},
		{name: "no PodGroup CRD", serve: []string{"topology.volcano.sh/v1alpha1"},
			wantErr: "the CustomResourceDefinition podgroups.scheduling.x-k8s.io is not installed (apply manifests/crds)"},
		{name: "no HyperNode CRD", serve: []string{"scheduling.x-k8s.io/v1alpha1"},
			wantErr: "the CustomResourceDefinition hypernodes.topology.volcano.sh is not installed (apply manifests/crds)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			discovery := client.Discovery().(*fakediscovery.FakeDiscovery)
			for _, gv := range tc.serve {
				discovery.Resources = append(discovery.Resources, served[gv])
			}
			err := requireCRDs(context.Background(), discovery)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("error = %q, want %q", got, tc.wantErr)
			}
		})
	}
}
