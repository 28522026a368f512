// Package v1alpha1 holds the HyperNode API, group topology.volcano.sh, version v1alpha1.
//
// The types are wire-compatible with Volcano's HyperNode CRD so that existing HyperNode
// objects, Volcano's discovery output and the seed examples apply unchanged. They are this
// project's own Go types with their own generated deepcopy functions and clients.
//
// +k8s:deepcopy-gen=package
// +groupName=topology.volcano.sh
// +kubebuilder:object:generate=true
package v1alpha1
