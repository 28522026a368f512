package config

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// SchemeGroupVersion is the internal version of kube-scheduler's config group, where the
// in-tree plugin args live too.
var SchemeGroupVersion = schema.GroupVersion{Group: schedconfig.GroupName, Version: runtime.APIVersionInternal}

var (
	// localSchemeBuilder is kube-scheduler's own builder for its internal config types.
	// kube-scheduler builds the scheme it converts plugin args with lazily from this builder
	// (v1.GetPluginArgConversionScheme), so registering here is what lets our args convert.
	localSchemeBuilder = &schedconfig.SchemeBuilder
	// AddToScheme registers the internal config types, ours included, in a scheme.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func init() {
	localSchemeBuilder.Register(addKnownTypes)
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&GangArgs{},
		&NetworkTopologyAwareArgs{},
	)
	return nil
}
