// Package v1 holds the versioned (kubescheduler.config.k8s.io/v1) plugin args of this
// project: the shape users write in a KubeSchedulerConfiguration's pluginConfig.
//
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/hypernode-dev/hypernode-scheduler/apis/config
// +k8s:defaulter-gen=TypeMeta
// +groupName=kubescheduler.config.k8s.io
package v1
