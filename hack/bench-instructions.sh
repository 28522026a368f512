#!/usr/bin/env bash
# A plain pod's scheduling cycle counted in instructions and simulated cache misses instead of
# seconds (issue #18, docs/benchmarks.md "Plain pods in instructions"): on a shared 2-core
# machine wall and CPU time drift by 10-40% between runs, so they cannot split a gap of a few
# percent; valgrind's cachegrind counts the same work the same way every run.
#
# Runs BenchmarkPlainPodCycle (10,000 nodes, Filter until 500 are feasible, PreScore, Score) in
# each of its profiles under cachegrind, twice (SHORT and LONG cycles), and reports the
# difference per cycle, so that the benchmark's setup cancels. One Go thread, no garbage
# collection and no asynchronous preemption, so that nothing but the cycles is counted (the
# collector's share is reported by the Go benchmark's B/op instead). Takes about 6 minutes on
# one core. Environment: INSTR_SHORT, INSTR_LONG (cycles, default 100 and 400), INSTR_OUT.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
GO="${GO:-go}"
OUT="${INSTR_OUT:-${ROOT}/_output/bench-instructions}"
SHORT="${INSTR_SHORT:-100}"
LONG="${INSTR_LONG:-400}"
PROFILES=(vanilla with-NetworkTopologyAware with-empty-score without-normal-pod-score)

if ! command -v valgrind >/dev/null; then
  echo "valgrind missing: installing Debian's package" >&2
  if [[ $(id -u) -eq 0 ]]; then apt-get install -y valgrind >&2; else sudo apt-get install -y valgrind >&2; fi
fi
if (( LONG <= SHORT )); then
  echo "INSTR_LONG (${LONG}) must be above INSTR_SHORT (${SHORT})" >&2
  exit 1
fi

rm -rf "${OUT}"
mkdir -p "${OUT}"
"${GO}" test -c -o "${OUT}/networktopology.test" ./pkg/plugins/networktopology/

# counts prints "instructions D1-misses LL-data-misses" from a cachegrind log.
counts() {
  awk '/ I +refs:/ {gsub(",", "", $4); ir=$4}
       / D1 +misses:/ {gsub(",", "", $4); d1=$4}
       / LLd +misses:/ {gsub(",", "", $4); ll=$4}
       END {if (ir == "" || d1 == "" || ll == "") exit 1; print ir, d1, ll}' "$1"
}

declare -A IR D1 LL
for p in "${PROFILES[@]}"; do
  for n in "${SHORT}" "${LONG}"; do
    GOMAXPROCS=1 GOGC=off GODEBUG=asyncpreemptoff=1 valgrind --tool=cachegrind --cache-sim=yes \
      --cachegrind-out-file="${OUT}/${p}.${n}.cachegrind" \
      "${OUT}/networktopology.test" -test.run XXX -test.bench "PlainPodCycle\$/${p}\$" \
      -test.benchtime "${n}x" >"${OUT}/${p}.${n}.log" 2>&1 || {
      echo "cachegrind run of ${p} (${n} cycles) failed; the end of ${OUT}/${p}.${n}.log:" >&2
      tail -20 "${OUT}/${p}.${n}.log" >&2
      exit 1
    }
    read -r ir d1 ll < <(counts "${OUT}/${p}.${n}.log") || {
      echo "no cachegrind summary in ${OUT}/${p}.${n}.log" >&2
      exit 1
    }
    IR[${p}.${n}]=${ir}; D1[${p}.${n}]=${d1}; LL[${p}.${n}]=${ll}
  done
done

per_cycle() { # map profile -> (long - short) / (LONG - SHORT)
  local -n m=$1
  echo $(( (m[$2.${LONG}] - m[$2.${SHORT}]) / (LONG - SHORT) ))
}
{
  echo "| profile | instructions per cycle | / vanilla | D1 misses per cycle | / vanilla | LL data misses per cycle |"
  echo "| --- | --- | --- | --- | --- | --- |"
  base_ir=$(per_cycle IR vanilla); base_d1=$(per_cycle D1 vanilla)
  for p in "${PROFILES[@]}"; do
    ir=$(per_cycle IR "${p}"); d1=$(per_cycle D1 "${p}"); ll=$(per_cycle LL "${p}")
    awk -v p="${p}" -v ir="${ir}" -v bir="${base_ir}" -v d1="${d1}" -v bd1="${base_d1}" -v ll="${ll}" \
      'BEGIN {printf "| %s | %d | %.3f | %d | %.3f | %d |\n", p, ir, ir / bir, d1, d1 / bd1, ll}'
  done
} | tee "${OUT}/summary.md"
echo "cachegrind files: ${OUT} (cg_diff and cg_annotate split a difference by function)"
