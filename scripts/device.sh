#!/usr/bin/env bash
# The one script for the GPU machine: configure and build with CUDA (Release, sm_90a), the GPU test
# suite, compute-sanitizer memcheck and racecheck on a reduced filter, the GPU decode benchmark
# beside PyTorch SDPA (cuDNN and flash) in the same call, and a short table last. Logs and JSON go
# under $OUT (default ./out), at most 8 files.
#
# Sections run in order; each is a function `section_<name>` listed in SECTIONS and logs to
# $OUT/<name>.log (the benchmarks also write JSON). A failing section is reported and the next ones
# still run. To add a section (say, the CPU benchmarks), write its function and add its name to
# SECTIONS; `summary` stays last.
#
# Usage: scripts/device.sh [section ...]     (default: every section)
# GoogleTest is taken from the system, or built from .deps/googletest (carried along) when absent.
set -uo pipefail
cd "$(dirname "$0")/.."

OUT="${OUT:-$PWD/out}"
BUILD="${BUILD:-build/device}"
JOBS="$(nproc)"
SECTIONS=(build gpu_tests sanitizer gpu_bench torch_anchors)
SANITIZER_FILTER='KvTypes/CudaDecodeSanitized.*:CudaDecode.RowsThatSeeNothing*:CudaDecode.GraphReplay*:CudaKvFormat.E8m0*'
mkdir -p "$OUT"

section_build() {
  {
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
    nvcc --version | tail -2
    cmake --version | head -1
  } || true
  local prefix=()
  if [ ! -f /usr/include/gtest/gtest.h ] && [ -d .deps/googletest ]; then
    if [ ! -d /tmp/gtest ]; then
      cmake -S .deps/googletest -B /tmp/gtest-build -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_GMOCK=OFF -DCMAKE_INSTALL_PREFIX=/tmp/gtest >/dev/null &&
        cmake --build /tmp/gtest-build -j "$JOBS" >/dev/null && cmake --install /tmp/gtest-build >/dev/null ||
        return 1
    fi
    prefix=(-DCMAKE_PREFIX_PATH=/tmp/gtest)
  fi
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DMXATTN_CUDA=ON -DMXATTN_BENCH=ON "${prefix[@]}" || return 1
  # Only what the GPU sections run; sections added later build their own targets.
  local targets=(mxattn_cuda_tests)
  grep -q 'add_subdirectory(cuda)' bench/CMakeLists.txt && targets+=(mxattn_decode_bench)
  cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}" || return 1
  if [ ! -x "$BUILD/bench/cuda/mxattn_decode_bench" ]; then
    # bench/CMakeLists.txt does not add bench/cuda yet: build the benchmark against the library.
    mkdir -p "$BUILD/bench/cuda"
    nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Iinclude -Isrc \
      bench/cuda/decode_bench.cu "$BUILD/libmxattn.a" -Xcompiler -fopenmp \
      -o "$BUILD/bench/cuda/mxattn_decode_bench" || return 1
  fi
}

section_gpu_tests() {
  ctest --test-dir "$BUILD" -L gpu --output-on-failure -j 4 --timeout 240
}

section_sanitizer() {
  local bin="$BUILD/tests/cuda/mxattn_cuda_tests" rc=0 code
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool"
    timeout 170 compute-sanitizer --tool "$tool" --error-exitcode 86 --print-limit 20 \
      "$bin" --gtest_filter="$SANITIZER_FILTER" >"$BUILD/sanitizer_$tool.txt" 2>&1
    code=$?
    grep -v -e '^\[ RUN' -e '^\[       OK' "$BUILD/sanitizer_$tool.txt"
    echo "== $tool exit code $code"
    [ "$code" -eq 0 ] || rc=1
  done
  return $rc
}

section_gpu_bench() {
  timeout 150 "$BUILD/bench/cuda/mxattn_decode_bench" --json "$OUT/decode_bench.json"
}

section_torch_anchors() {
  PYTHONUNBUFFERED=1 timeout 150 python3 bench/cuda/torch_sdpa_decode.py --json "$OUT/torch_sdpa_decode.json"
}

# The short table: each GPU result beside the anchors measured in the same call.
section_summary() {
  python3 - "$OUT" <<'EOF'
import json, os, sys
out = sys.argv[1]
def load(name):
    path = os.path.join(out, name)
    return json.load(open(path)) if os.path.exists(path) else None
ours, torch_ = load("decode_bench.json"), load("torch_sdpa_decode.json")
if not ours:
    print("no decode_bench.json"); sys.exit(0)
anchor = {}
if torch_:
    for r in torch_["results"]:
        anchor[(r["shape"], r["backend"])] = r.get("us")
print(f"probe (read-only, 2 GiB): ours {ours['probe_gbps']:.0f} GB/s" +
      (f", torch sum {torch_['probe_gbps']:.0f} GB/s" if torch_ else ""))
print(f"{'shape':22} {'kv':5} {'tile_n':>6} {'us':>9} {'GB/s':>6} {'%probe':>6} {'cudnn_us':>9} {'x_cudnn':>7} {'flash_us':>9} {'x_flash':>7} {'comb%':>6}")
for r in ours["results"]:
    c, f = anchor.get((r["shape"], "cudnn")), anchor.get((r["shape"], "flash"))
    ratio = lambda a: f"{a / r['us']:7.2f}" if a else f"{'n/a':>7}"
    us = lambda a: f"{a:9.2f}" if a else f"{'n/a':>9}"
    comb = 100 * r["combine_gbps"] / ours["probe_gbps"] if r["combines"] else 0
    tile = r.get("tile_n") or "auto"
    print(f"{r['shape']:22} {r['kv']:5} {tile:>6} {r['us']:9.2f} {r['gbps']:6.0f} {100 * r['gbps'] / ours['probe_gbps']:5.1f}% "
          f"{us(c)} {ratio(c)} {us(f)} {ratio(f)} {comb:5.0f}%")
EOF
}

selected=("$@")
[ ${#selected[@]} -eq 0 ] && selected=("${SECTIONS[@]}")
declare -A status
for name in "${selected[@]}"; do
  start=$SECONDS
  echo "== $name (t=${SECONDS}s)"
  if "section_$name" >"$OUT/$name.log" 2>&1; then status[$name]=ok; else status[$name]=FAILED; fi
  echo "   ${status[$name]} in $((SECONDS - start)) s; last lines:"
  tail -n 6 "$OUT/$name.log" | sed 's/^/   | /'
done
echo "== summary (t=${SECONDS}s)"
for name in "${selected[@]}"; do printf '   %-14s %s\n' "$name" "${status[$name]}"; done
section_summary | tee "$OUT/summary.txt"
