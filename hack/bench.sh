#!/usr/bin/env bash
# The full benchmark harness (issue #8): throughput, big gang, placement quality, the small
# instance against exhaustive search, plain pods next to a blocked gang, issue #15's gang
# preemption, issue #18's plain pods, mixed load and restart with a backlog (pods arriving
# while the scheduler runs, and a backlog that exists when it starts), issue #40's churn of
# a shared GPU fabric (vanilla, ours without and with holds), and issue #43's native pod group
# (the classic path, ours with the native gates, upstream's TopologyPlacementGenerator), and
# issue #45's fault run (the churn trace on a local cluster of real binaries, without and with
# faults), at the sizes of docs/benchmarks.md.
#
# Run by `make bench` after `make build`. Needs bin/kube-scheduler (ours); builds upstream's
# kube-scheduler from the same module (k8s.io/kubernetes v1.37.1) as the vanilla scheduler.
# Writes _output/bench/results.json, summary.md and the schedulers' logs, and prints the
# summary. Takes about 3 hours on 2 cores (the fault run about 70 minutes, the churn scenario about 45 minutes, issue #18's
# three scenarios about 40, the preemption scenario about 13, the big gang with and without
# stages about 9) and uses both: do not run it next to other work.
#
# Environment: BENCH_REPEAT (runs per scheduler, and per load mode, in the throughput, big-gang
# (with and without stages), blocked-gang, preemption, plain-pods, mixed-load and restart scenarios, default 3), BENCH_RUN (a go test
# -run pattern, default every scenario; issue #18's alone:
# 'TestPlainPods|TestMixedLoad|TestRestartBacklog|TestReport'), BENCH_OUT, BENCH_CLIENT_RATE
# (QPS/BURST of both schedulers instead of manifests/scheduler/config.yaml's). BENCH_CPUPROFILE
# profiles the test binary's scheduler mode only, not this script's binaries: profile with
# go test directly (docs/benchmarks.md).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
GO="${GO:-go}"
OUT="${BENCH_OUT:-${ROOT}/_output/bench}"
# Absolute: the tests run in test/bench, and the kubeconfigs they write name files by path.
OUT="$(realpath -m "${OUT}")"
REPEAT="${BENCH_REPEAT:-3}"
RUN="${BENCH_RUN:-.}"

if [[ ! -x bin/kube-scheduler ]]; then
  echo "bin/kube-scheduler missing: run make build (or make bench)" >&2
  exit 1
fi
rm -rf "${OUT}"
mkdir -p "${OUT}/bin"
# Vanilla: upstream's cmd/kube-scheduler at the version go.mod pins, no plugin of ours linked.
"${GO}" build -o "${OUT}/bin/kube-scheduler-vanilla" k8s.io/kubernetes/cmd/kube-scheduler

start=$(date +%s)
"${GO}" test -count=1 -timeout 300m -v -run "${RUN}" ./test/bench/ -args \
  -bench.full \
  -bench.repeat="${REPEAT}" \
  -bench.out="${OUT}" \
  -bench.ours="${ROOT}/bin/kube-scheduler" \
  -bench.vanilla="${OUT}/bin/kube-scheduler-vanilla" \
  >"${OUT}/test.log" 2>&1 || {
  echo "benchmark failed; the end of ${OUT}/test.log:" >&2
  grep -v '^{"level"' "${OUT}/test.log" | tail -40 >&2
  exit 1
}
end=$(date +%s)

grep -E '^\s+[a-z]+_test\.go:[0-9]+: ' "${OUT}/test.log" | grep -v zz_report | sed -E 's/^\s+[a-z]+_test\.go:[0-9]+: //' || true
echo
cat "${OUT}/summary.md"
echo "results: ${OUT}/results.json (harness run took $(( (end - start) / 60 )) min $(( (end - start) % 60 )) s)"
