#!/usr/bin/env bash
# Regenerates the k8s.io staging-module replace block of go.mod, offline.
#
# k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with
# ./staging/src/... paths that only exist inside the kubernetes repository. A module that
# imports k8s.io/kubernetes must therefore replace each of them with the matching published
# v0.X.Y tag. The list is read from the go.mod that the module proxy serves for the pinned
# kubernetes version (`go mod download -json` reports its path), never from the internet.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.37.1}"
STAGING_VERSION="${STAGING_VERSION:-v0.${KUBE_VERSION#v1.}}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

gomod="$(go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
if [[ -z "$gomod" || ! -f "$gomod" ]]; then
  echo "update-replaces: cannot find the go.mod of k8s.io/kubernetes@${KUBE_VERSION}" >&2
  exit 1
fi

# Every `k8s.io/X => ./staging/src/k8s.io/X` line names one staging module.
mapfile -t modules < <(sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\) => \./staging/src/.*#\1#p' "$gomod" | sort -u)
if [[ ${#modules[@]} -eq 0 ]]; then
  echo "update-replaces: no staging replaces found in $gomod" >&2
  exit 1
fi

# Regenerate, don't append: drop every existing k8s.io replace first, so a replace that
# kubernetes no longer has does not linger. The sample-* modules are replaced too so that
# `go mod tidy` never tries to resolve v0.0.0 for them.
args=()
while read -r old; do
  args+=("-dropreplace=${old}")
done < <(go mod edit -json | sed -n 's/^[[:space:]]*"Path": "\(k8s\.io\/[^"]*\)",\{0,1\}$/\1/p' | sort -u)
for m in "${modules[@]}"; do
  args+=("-replace=${m}=${m}@${STAGING_VERSION}")
done
go mod edit "${args[@]}"
echo "update-replaces: ${#modules[@]} k8s.io staging modules replaced to ${STAGING_VERSION}"
