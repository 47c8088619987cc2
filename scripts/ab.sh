#!/usr/bin/env bash
# Side-by-side benchmark of source trees (and environments) on the GPU machine, in one call: each
# tree is built into its own folder (the benchmark, and with --tests its GPU test program), its tests
# run on a filter, then the benchmark runs once per entry in turn, round after round, so that clock
# and thermal drift fall on every entry alike. Prints per row the median time of each entry and its
# ratio to the first.
#
# Usage (device tool; carry [".ab"] for worktrees, and ".deps" for --bench prefill):
#   bash scripts/ab.sh [--bench decode|prefill|cpu] [--rounds N] [--tests FILTER] \
#     NAME=DIR[@VAR=VALUE,...] [...] -- BENCH_ARGS
# DIR: a source tree (`.` for this one, or a worktree under the ignored .ab/, e.g. made with
# `git worktree add --detach .ab/early wip/narrow-early-v`); entries with the same DIR share one
# build. @VAR=VALUE,...: environment variables for that entry's runs (e.g.
# `lazy=.@CUDA_MODULE_LOADING=LAZY`). BENCH_ARGS go to mxattn_decode_bench (e.g. --shapes 128k,B8
# --kvs e4m3,e2m1) or mxattn_prefill_bench (e.g. --dense --dims 128,256). The decode build leaves the
# prefill engine out, so it takes under a minute. --bench cpu builds without CUDA and times
# mxattn_bench_cpu (BENCH_ARGS e.g. --threads 2 --case prefill) pinned to the cores in CPU_PIN
# (default 0,1); its --tests is a ctest regex over the CPU suite (`.` for all of it), which builds
# every target of each tree. Logs and JSON are packed into $OUT/ab_results.tgz
# (OUT defaults to ./out).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
OUT="${OUT:-$ROOT/out}"
LOGS="$(mktemp -d)/ab"
mkdir -p "$LOGS" "$OUT"
trap 'tar czf "$OUT/ab_results.tgz" -C "$(dirname "$LOGS")" ab' EXIT
bench=decode
rounds=3
tests=""
names=()
dirs=()
envs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bench) bench="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --tests) tests="$2"; shift 2 ;;
    --) shift; break ;;
    *=*)
      names+=("${1%%=*}")
      spec="${1#*=}"
      dirs+=("${spec%%@*}")
      if [ "$spec" = "${spec#*@}" ]; then envs+=(""); else envs+=("${spec#*@}"); fi
      shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
bench_args=("$@")
[ "${#names[@]}" -ge 1 ] || { echo "no entries given" >&2; exit 2; }
case "$bench" in
  decode) targets="mxattn_decode_bench"; test_bin="mxattn_cuda_tests"
          cutlass="$ROOT/.no-cutlass" ;;
  prefill) targets="mxattn_prefill_bench"; test_bin="mxattn_prefill_tests"
           cutlass="$ROOT/.deps/cutlass/include" ;;
  cpu) targets="mxattn_bench_cpu"; test_bin="" ;;
  *) echo "--bench: decode, prefill or cpu" >&2; exit 2 ;;
esac
if [ -n "$tests" ]; then
  if [ "$bench" = cpu ]; then targets=""; else targets="$targets $test_bin"; fi
fi

# One build per distinct tree, named by the first entry that uses it.
declare -A build_of
builds=()
for i in "${!names[@]}"; do
  d="${dirs[$i]}"
  if [ -z "${build_of[$d]:-}" ]; then
    build_of[$d]="$ROOT/build/ab-${names[$i]}"
    builds+=("$d")
  fi
done
jobs=$(( $(nproc) / ${#builds[@]} ))
[ "$jobs" -ge 1 ] || jobs=1
build_one() {
  local dir="$1" build="$2" log="$3"
  local config=(-DMXATTN_CUDA=OFF)
  [ "$bench" = cpu ] || config=(-DCMAKE_CUDA_ARCHITECTURES=90a -DMXATTN_CUDA=ON
    -DMXATTN_CUTLASS_DIR="$cutlass")
  {
    cmake -S "$dir" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMXATTN_BENCH=ON \
      "${config[@]}" &&
      cmake --build "$build" -j "$jobs" ${targets:+--target $targets}
  } >"$log" 2>&1
}
start=$(date +%s)
pids=()
for d in "${builds[@]}"; do
  build_one "$d" "${build_of[$d]}" "$LOGS/build_$(basename "${build_of[$d]}").log" &
  pids+=($!)
done
failed=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    log="$LOGS/build_$(basename "${build_of[${builds[$i]}]}").log"
    echo "build of ${builds[$i]} failed:"
    tail -30 "$log"
    failed=1
  fi
done
echo "builds: $(( $(date +%s) - start )) s"
[ "$failed" -eq 0 ] || exit 1

# Runs entry i's program (tests or benchmark) with its environment.
run_entry() {
  local i="$1"
  shift
  local vars=()
  [ -n "${envs[$i]}" ] && IFS=',' read -r -a vars <<<"${envs[$i]}"
  env "${vars[@]}" "$@"
}
if [ -n "$tests" ]; then
  for d in "${builds[@]}"; do
    echo "== tests $(basename "${build_of[$d]}") ($tests)"
    if [ "$bench" = cpu ]; then
      ctest --test-dir "${build_of[$d]}" -LE gpu -R "$tests" -j "$(nproc)" --timeout 200 2>&1 |
        tail -8
      continue
    fi
    timeout 300 "${build_of[$d]}/tests/cuda/$test_bin" --gtest_filter="$tests" --gtest_brief=1 2>&1 |
      tail -15
  done
fi

for r in $(seq 1 "$rounds"); do
  for i in "${!names[@]}"; do
    name="${names[$i]}"
    build="${build_of[${dirs[$i]}]}"
    if [ "$bench" = cpu ]; then
      program=(taskset -c "${CPU_PIN:-0,1}" "$build/bench/mxattn_bench_cpu")
    else
      program=("$build/bench/cuda/mxattn_${bench}_bench")
    fi
    run_entry "$i" timeout 200 "${program[@]}" \
      "${bench_args[@]}" --json "$LOGS/${name}_$r.json" >"$LOGS/${name}_$r.log" 2>&1 || {
      echo "bench $name round $r failed"; tail -5 "$LOGS/${name}_$r.log"; }
  done
done

python3 - "$LOGS" "$rounds" "$bench" "${names[@]}" <<'EOF'
import json, os, statistics, sys
logs, rounds, bench, names = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
times, probe = {}, {}
for name in names:
    for r in range(1, rounds + 1):
        path = os.path.join(logs, f"{name}_{r}.json")
        if not os.path.exists(path):
            continue
        data = json.load(open(path))
        if bench == "cpu":
            for row in data["cases"]:
                times.setdefault((row["name"], row["kind"]), {}).setdefault(name, []).append(
                    row["median_ms"])
        elif bench == "decode":
            probe.setdefault(name, []).append(data["probe_gbps"])
            for row in data["results"]:
                times.setdefault((row["shape"], row["kv"]), {}).setdefault(name, []).append(row["us"])
        else:
            for kind in ("results", "sparse", "mx"):
                for row in data.get(kind, []):
                    mask = "causal" if row["causal"] else "non-causal"
                    what = {"results": "dense", "sparse": "sparse"}.get(kind, row.get("format"))
                    key = (f"D{row['dim']} {mask}", what)
                    times.setdefault(key, {}).setdefault(name, []).append(row["ms"])
if probe:
    print("probe GB/s: " + ", ".join(f"{n} {statistics.median(p):.0f}" for n, p in probe.items()))
unit = "us" if bench == "decode" else "ms"
head = f"{'shape':26} {'kind':6}" + "".join(f" {n[:12]:>12}" for n in names)
head += "".join(f" {('x ' + n)[:9]:>9}" for n in names[1:])
print(head + f"   (median {unit} of all runs; x: first entry's time / this entry's)")
for key, per in times.items():
    med = {n: statistics.median(v) for n, v in per.items()}
    line = f"{key[0]:26} {key[1]:6}" + "".join(f" {med.get(n, float('nan')):12.3f}" for n in names)
    base = med.get(names[0])
    for n in names[1:]:
        line += f" {base / med[n]:9.3f}" if base and n in med else f" {'n/a':>9}"
    spread = max(max(v) / min(v) - 1 for v in per.values())
    print(line + f"   spread {100 * spread:.1f}%")
EOF
