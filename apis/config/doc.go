// Package config holds the internal (unversioned) types of this project's kube-scheduler
// plugin arguments. They are registered in kube-scheduler's own config scheme, so the
// pluginConfig entries of a KubeSchedulerConfiguration decode, default and convert like the
// arguments of in-tree plugins.
//
// +k8s:deepcopy-gen=package
package config
