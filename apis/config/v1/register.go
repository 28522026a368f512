package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	schedulerv1 "k8s.io/kube-scheduler/config/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// SchemeGroupVersion is kube-scheduler's config group at version v1.
var SchemeGroupVersion = schema.GroupVersion{Group: schedconfig.GroupName, Version: "v1"}

var (
	// localSchemeBuilder is kube-scheduler's own builder for its v1 config types. kube-scheduler
	// defaults plugin args (and adds default args for enabled plugins that have a registered
	// "<Name>Args" kind) with a scheme built lazily from this builder.
	localSchemeBuilder = &schedulerv1.SchemeBuilder
	// AddToScheme registers the v1 config types, ours included, in a scheme.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func init() {
	// RegisterConversions registers itself from the generated file.
	localSchemeBuilder.Register(addKnownTypes, RegisterDefaults)
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&GangArgs{},
		&NetworkTopologyAwareArgs{},
	)
	return nil
}
