package util

import (
	clientset "k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	schedclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	topologyclient "github.com/hypernode-dev/hypernode-scheduler/pkg/client/clientset/versioned"
	"github.com/hypernode-dev/hypernode-scheduler/pkg/crdclient"
)

// Clients are the API clients of a test: the custom resources' clients speak JSON.
type Clients struct {
	Kube       clientset.Interface
	Topology   topologyclient.Interface
	Scheduling schedclientset.Interface
}

// NewClients returns the clients for cfg.
func NewClients(cfg *restclient.Config) (Clients, error) {
	kube, err := clientset.NewForConfig(cfg)
	if err != nil {
		return Clients{}, err
	}
	jsonConfig := crdclient.JSONConfig(cfg)
	topology, err := topologyclient.NewForConfig(jsonConfig)
	if err != nil {
		return Clients{}, err
	}
	scheduling, err := schedclientset.NewForConfig(jsonConfig)
	if err != nil {
		return Clients{}, err
	}
	return Clients{Kube: kube, Topology: topology, Scheduling: scheduling}, nil
}
