#!/usr/bin/env bash
# Regenerates all generated code and CRD YAML of the project.
#
# The generators are run with `go run module@version` from the Go module proxy, pinned below,
# so nothing is downloaded outside the module proxy and nothing is installed on the machine.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

CODEGEN_VERSION="v0.37.1"          # k8s.io/code-generator, same minor as the pinned kubernetes
CONTROLLER_TOOLS_VERSION="v0.23.0" # sigs.k8s.io/controller-tools, built against k8s.io v0.37

MODULE="github.com/hypernode-dev/hypernode-scheduler"
HEADER="hack/boilerplate.go.txt"
TOPOLOGY="${MODULE}/apis/topology/v1alpha1"
CONFIG="${MODULE}/apis/config"
CONFIG_V1="${MODULE}/apis/config/v1"
PODGROUP="sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

codegen() {
  local tool="$1"
  shift
  go run "k8s.io/code-generator/cmd/${tool}@${CODEGEN_VERSION}" --go-header-file "$HEADER" "$@"
}

echo "codegen: deepcopy, defaults and conversions"
codegen deepcopy-gen --output-file zz_generated.deepcopy.go "$TOPOLOGY" "$CONFIG" "$CONFIG_V1"
codegen defaulter-gen --output-file zz_generated.defaults.go "$CONFIG_V1"
codegen conversion-gen --output-file zz_generated.conversion.go "$CONFIG_V1"

echo "codegen: HyperNode clientset, listers and informers"
rm -rf pkg/client
codegen client-gen --clientset-name versioned --input-base "" --input "$TOPOLOGY" \
  --output-pkg "${MODULE}/pkg/client/clientset" --output-dir pkg/client/clientset
codegen lister-gen --output-pkg "${MODULE}/pkg/client/listers" --output-dir pkg/client/listers "$TOPOLOGY"
codegen informer-gen \
  --versioned-clientset-package "${MODULE}/pkg/client/clientset/versioned" \
  --listers-package "${MODULE}/pkg/client/listers" \
  --output-pkg "${MODULE}/pkg/client/informers" --output-dir pkg/client/informers "$TOPOLOGY"

echo "codegen: CRDs"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
controller_gen() {
  go run "sigs.k8s.io/controller-tools/cmd/controller-gen@${CONTROLLER_TOOLS_VERSION}" "$@"
}
controller_gen crd paths="./apis/topology/..." output:crd:dir="$tmp/topology"
# The PodGroup CRD is generated from the very scheduler-plugins types this project imports, so
# the schema the apiserver enforces is the one our clients encode. The package also declares
# ElasticQuota, which this project does not use.
controller_gen crd paths="$PODGROUP" output:crd:dir="$tmp/podgroup"
mkdir -p manifests/crds
rm -f manifests/crds/*.yaml
cp "$tmp/topology/topology.volcano.sh_hypernodes.yaml" manifests/crds/
cp "$tmp/podgroup/scheduling.x-k8s.io_podgroups.yaml" manifests/crds/
echo "codegen: scheduler ConfigMap"
./hack/update-manifests.sh
echo "codegen: done"
