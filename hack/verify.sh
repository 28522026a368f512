#!/usr/bin/env bash
# Checks formatting, vet, staticcheck, and that generated code, CRDs and the replace block are up to date.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
failed=0

echo "verify: gofmt"
unformatted="$(gofmt -l $(git ls-files '*.go'))"
if [[ -n "$unformatted" ]]; then
  echo "gofmt would change:"; echo "$unformatted"; failed=1
fi

echo "verify: go vet"
go vet ./... || failed=1

# staticcheck (built into bin/ by the Makefile) on every hand-written package: the generated
# clients in pkg/client belong to the code generator, and regenerating them is what updates them.
echo "verify: staticcheck"
"${STATICCHECK:-$root/bin/staticcheck}" $(go list ./... | grep -v '/pkg/client/') || failed=1

# Regenerate into a scratch copy of the tree and compare, so verify never edits the checkout.
echo "verify: generated code, CRDs and go.mod replaces"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
git ls-files -z | xargs -0 -I{} cp --parents {} "$scratch"
(cd "$scratch" && ./hack/update-replaces.sh >/dev/null && ./hack/update-codegen.sh >/dev/null 2>&1)
for path in go.mod apis pkg/client manifests/crds manifests/install charts/hypernode-scheduler/files; do
  if ! diff -r "$path" "$scratch/$path" >/dev/null; then
    echo "out of date: $path (run 'make generate' or hack/update-replaces.sh)"
    diff -r "$path" "$scratch/$path" | head -20
    failed=1
  fi
done

if [[ $failed -ne 0 ]]; then
  echo "verify: FAILED"
  exit 1
fi
echo "verify: OK"
