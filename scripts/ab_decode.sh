#!/usr/bin/env bash
# Side-by-side decode benchmark of two or more source trees on the GPU machine, in one call: each
# tree is built into its own folder (the decode benchmark, and with --tests the CUDA test program;
# the prefill engine left out, so the builds are quick), its GPU tests run on a filter, then the
# benchmarks run in turn, round after round, so that clock and thermal drift fall on every tree
# alike. Prints per (shape, KV type) the median time of each tree
# and its ratio to the first.
#
# Usage (device tool, carry [".ab"]):
#   bash scripts/ab_decode.sh [--rounds N] [--tests FILTER] NAME=DIR [NAME=DIR ...] -- BENCH_ARGS
# DIR: a source tree (`.` for this one, or a worktree under the ignored .ab/, e.g. made with
# `git worktree add .ab/early wip/narrow-early-v`). BENCH_ARGS go to mxattn_decode_bench (e.g.
# --shapes 128k,B8 --kvs e4m3,e2m1). Logs and JSON are packed into $OUT/ab_results.tgz (OUT
# defaults to ./out).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
OUT="${OUT:-$ROOT/out}"
LOGS="$(mktemp -d)/ab"
mkdir -p "$LOGS" "$OUT"
trap 'tar czf "$OUT/ab_results.tgz" -C "$(dirname "$LOGS")" ab' EXIT
rounds=3
tests=""
names=()
dirs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --tests) tests="$2"; shift 2 ;;
    --) shift; break ;;
    *=*) names+=("${1%%=*}"); dirs+=("${1#*=}"); shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
bench_args=("$@")
[ "${#names[@]}" -ge 1 ] || { echo "no trees given" >&2; exit 2; }

jobs=$(( $(nproc) / ${#names[@]} ))
[ "$jobs" -ge 1 ] || jobs=1
targets="mxattn_decode_bench"
[ -n "$tests" ] && targets="$targets mxattn_cuda_tests"
build_one() {
  local name="$1" dir="$2" build="$ROOT/build/ab-$1"
  {
    cmake -S "$dir" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
      -DMXATTN_CUDA=ON -DMXATTN_BENCH=ON -DMXATTN_CUTLASS_DIR="$ROOT/.no-cutlass" &&
      cmake --build "$build" -j "$jobs" --target $targets
  } >"$LOGS/build_$name.log" 2>&1
}
start=$(date +%s)
pids=()
for i in "${!names[@]}"; do
  build_one "${names[$i]}" "${dirs[$i]}" &
  pids+=($!)
done
failed=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    echo "build of ${names[$i]} failed:"
    tail -30 "$LOGS/build_${names[$i]}.log"
    failed=1
  fi
done
echo "builds: $(( $(date +%s) - start )) s"
[ "$failed" -eq 0 ] || exit 1

if [ -n "$tests" ]; then
  for name in "${names[@]}"; do
    echo "== tests $name ($tests)"
    timeout 300 "$ROOT/build/ab-$name/tests/cuda/mxattn_cuda_tests" --gtest_filter="$tests" \
      --gtest_brief=1 2>&1 | tail -15
  done
fi

for r in $(seq 1 "$rounds"); do
  for name in "${names[@]}"; do
    timeout 200 "$ROOT/build/ab-$name/bench/cuda/mxattn_decode_bench" "${bench_args[@]}" \
      --json "$LOGS/${name}_$r.json" >"$LOGS/${name}_$r.log" 2>&1 || {
      echo "bench $name round $r failed"; tail -5 "$LOGS/${name}_$r.log"; }
  done
done

python3 - "$LOGS" "$rounds" "${names[@]}" <<'EOF'
import json, os, statistics, sys
logs, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
times, probe = {}, {}
for name in names:
    for r in range(1, rounds + 1):
        path = os.path.join(logs, f"{name}_{r}.json")
        if not os.path.exists(path):
            continue
        data = json.load(open(path))
        probe.setdefault(name, []).append(data["probe_gbps"])
        for row in data["results"]:
            key = (row["shape"], row["kv"])
            times.setdefault(key, {}).setdefault(name, []).append(row["us"])
print("probe GB/s: " + ", ".join(f"{n} {statistics.median(p):.0f}" for n, p in probe.items()))
head = f"{'shape':22} {'kv':6}" + "".join(f" {n[:12]:>12}" for n in names)
head += "".join(f" {('x ' + n)[:9]:>9}" for n in names[1:])
print(head + "   (median us of all runs; x: first tree's time / this tree's)")
for key, per in times.items():
    med = {n: statistics.median(v) for n, v in per.items()}
    line = f"{key[0]:22} {key[1]:6}" + "".join(f" {med.get(n, float('nan')):12.2f}" for n in names)
    base = med.get(names[0])
    for n in names[1:]:
        line += f" {base / med[n]:9.3f}" if base and n in med else f" {'n/a':>9}"
    spread = max(max(v) / min(v) - 1 for v in per.values())
    print(line + f"   spread {100 * spread:.1f}%")
EOF
