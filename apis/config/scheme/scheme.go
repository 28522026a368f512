// Package scheme registers this project's plugin args in kube-scheduler's config scheme.
//
// Importing it (the custom kube-scheduler binary does) is what makes the pluginConfig entries
// for Gang and NetworkTopologyAware decode strictly, default and convert like in-tree args.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubeschedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"

	"github.com/hypernode-dev/hypernode-scheduler/apis/config"
	configv1 "github.com/hypernode-dev/hypernode-scheduler/apis/config/v1"
)

// Scheme is kube-scheduler's own config scheme, with this project's args added.
var Scheme = kubeschedulerscheme.Scheme

func init() {
	AddToScheme(Scheme)
}

// AddToScheme adds the internal and v1 plugin args, their defaults and conversions.
func AddToScheme(scheme *runtime.Scheme) {
	utilruntime.Must(config.AddToScheme(scheme))
	utilruntime.Must(configv1.AddToScheme(scheme))
}
