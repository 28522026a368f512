#!/usr/bin/env bash
# Derives manifests/install/02-configmap.yaml from manifests/scheduler/config.yaml, the one
# file that holds the scheduler's configuration (the demo and the tests read it directly), and
# copies the manifests into the Helm chart, which renders them with its values
# (charts/hypernode-scheduler/files: Helm reads files inside the chart only).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

src=manifests/scheduler/config.yaml
out=manifests/install/02-configmap.yaml
{
  echo "# Generated from ${src} by hack/update-manifests.sh (make generate); do not edit."
  echo "apiVersion: v1"
  echo "kind: ConfigMap"
  echo "metadata:"
  echo "  name: hypernode-scheduler-config"
  echo "  namespace: hypernode-system"
  echo "data:"
  echo "  config.yaml: |"
  sed -e 's/^/    /' -e 's/^ *$//' "$src"
} >"$out"

chart=charts/hypernode-scheduler/files
rm -rf "$chart"
mkdir -p "$chart/install" "$chart/crds"
cp "$src" "$chart/scheduler-config.yaml"
cp manifests/install/*.yaml "$chart/install/"
cp manifests/crds/*.yaml "$chart/crds/"
