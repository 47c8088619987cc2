#!/usr/bin/env bash
# The prefill engine's script for the GPU machine (to be merged into scripts/device.sh): the GPU
# tests of the prefill engine, the prefill benchmark beside PyTorch SDPA's cuDNN and flash backends
# and torch.matmul's bf16 rate (same call), compute-sanitizer memcheck and racecheck on a reduced
# filter, and a short table last. Logs, JSON and the plot go under $OUT (default ./out), 8 files.
#
# Binaries built on the workstation and carried in $PREBUILT (.deps/prefill-bin, from
# `scripts/device_prefill.sh stage`) are used when they start here; otherwise the section builds
# them (CMake, Release, sm_90a, CUTLASS headers from .deps/cutlass/include; GoogleTest from the
# system or from .deps/googletest).
#
# Usage: scripts/device_prefill.sh [section ...]      (default: build gpu_tests bench sanitizer)
#        scripts/device_prefill.sh stage              (on the workstation: build and stage binaries)
set -uo pipefail
cd "$(dirname "$0")/.."

OUT="${OUT:-$PWD/out}"
BUILD="${BUILD:-build/device-prefill}"
PREBUILT="${PREBUILT:-.deps/prefill-bin}"
CUTLASS="${MXATTN_CUTLASS_DIR:-$PWD/.deps/cutlass/include}"
JOBS="$(nproc)"
SECTIONS=(build gpu_tests bench sanitizer)
SANITIZER_FILTER='Types/CudaPrefillSanitized.*:CudaPrefill.RowsThatSeeNothing*'
BIN="$BUILD"

configure_and_build() {
  local build_dir="$1" prefix=()
  if [ ! -f /usr/include/gtest/gtest.h ] && [ -d .deps/googletest ]; then
    if [ ! -d /tmp/gtest ]; then
      cmake -S .deps/googletest -B /tmp/gtest-build -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_GMOCK=OFF -DCMAKE_INSTALL_PREFIX=/tmp/gtest >/dev/null &&
        cmake --build /tmp/gtest-build -j "$JOBS" >/dev/null &&
        cmake --install /tmp/gtest-build >/dev/null || return 1
    fi
    prefix=(-DCMAKE_PREFIX_PATH=/tmp/gtest)
  fi
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DMXATTN_CUDA=ON -DMXATTN_BENCH=OFF -DMXATTN_CUTLASS_DIR="$CUTLASS" "${prefix[@]}" >/dev/null ||
    return 1
  cmake --build "$build_dir" -j "$JOBS" --target mxattn_prefill_tests || return 1
  mkdir -p "$build_dir/bench"
  nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc \
    bench/cuda/prefill_bench.cu "$build_dir/libmxattn.a" -Xcompiler -fopenmp \
    -o "$build_dir/mxattn_prefill_bench"
}

section_stage() {
  local stage_build="${STAGE_BUILD:-build/prefill-stage}"
  configure_and_build "$stage_build" || return 1
  mkdir -p "$PREBUILT"
  cp "$stage_build/tests/cuda/mxattn_prefill_tests" "$stage_build/mxattn_prefill_bench" "$PREBUILT/"
  strip "$PREBUILT"/mxattn_*
  # The shared libraries they need beyond the C and C++ runtimes, for a machine that lacks them.
  mkdir -p "$PREBUILT/lib"
  ldd "$PREBUILT/mxattn_prefill_tests" | awk '/libcudart|libgomp/ {print $3}' |
    xargs -r cp -L -t "$PREBUILT/lib"
  ls -la "$PREBUILT" "$PREBUILT/lib"
}

section_build() {
  {
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
    nvcc --version | tail -2
  } || true
  local runs="$PREBUILT/mxattn_prefill_tests --gtest_list_tests"
  if [ -x "$PREBUILT/mxattn_prefill_bench" ] && [ -x "$PREBUILT/mxattn_prefill_tests" ]; then
    if ! $runs >/dev/null 2>&1; then
      export LD_LIBRARY_PATH="$PWD/$PREBUILT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
    if $runs >/dev/null 2>&1; then
      echo "using the carried binaries in $PREBUILT (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-})"
      BIN="$PREBUILT"
      return 0
    fi
  fi
  echo "carried binaries absent or not runnable here: building"
  configure_and_build "$BUILD" || return 1
  mkdir -p "$BUILD/bin"
  cp "$BUILD/tests/cuda/mxattn_prefill_tests" "$BUILD/mxattn_prefill_bench" "$BUILD/bin/"
  BIN="$BUILD/bin"
}

# A kernel that hangs would stall every later section: one small test first, and nothing more on
# the GPU when it times out.
HUNG=0
section_gpu_tests() {
  timeout 30 "$BIN/mxattn_prefill_tests" --gtest_filter='CudaPrefill.RunsAreDeterministic'
  if [ $? -eq 124 ]; then
    HUNG=1
    echo "the first GPU test timed out: skipping the GPU sections"
    return 1
  fi
  timeout 150 "$BIN/mxattn_prefill_tests" --gtest_brief=1
}

section_sanitizer() {
  [ "$HUNG" -eq 0 ] || return 1
  local rc=0 code
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool"
    timeout 75 compute-sanitizer --tool "$tool" --error-exitcode 86 --print-limit 20 \
      "$BIN/mxattn_prefill_tests" --gtest_filter="$SANITIZER_FILTER" --gtest_brief=1 2>&1 | tail -n 40
    code=${PIPESTATUS[0]}
    echo "== $tool exit code $code"
    [ "$code" -eq 0 ] || rc=1
  done
  return $rc
}

section_bench() {
  [ "$HUNG" -eq 0 ] || return 1
  timeout 60 "$BIN/mxattn_prefill_bench" --json "$OUT/prefill_bench.json" || return 1
  PYTHONUNBUFFERED=1 timeout 100 python3 bench/cuda/torch_sdpa_prefill.py \
    --json "$OUT/torch_sdpa_prefill.json" --ours "$OUT/prefill_bench.json" \
    --plot "$OUT/prefill_bench.png" --reps 10
}

if [ "${1:-}" = stage ]; then
  section_stage
  exit $?
fi

mkdir -p "$OUT"
selected=("$@")
[ ${#selected[@]} -eq 0 ] && selected=("${SECTIONS[@]}")
declare -A status
for name in "${selected[@]}"; do
  start=$SECONDS
  echo "== $name (t=${SECONDS}s)"
  # The build section picks $BIN for the later ones: run it in this shell.
  if "section_$name" >"$OUT/$name.log" 2>&1; then status[$name]=ok; else status[$name]=FAILED; fi
  echo "   ${status[$name]} in $((SECONDS - start)) s; last lines:"
  tail -n 8 "$OUT/$name.log" | sed 's/^/   | /'
done
echo "== summary (t=${SECONDS}s)"
for name in "${selected[@]}"; do printf '   %-10s %s\n' "$name" "${status[$name]}"; done
{
  grep -h -A 20 '^bf16 matmul' "$OUT/bench.log" 2>/dev/null | grep -v '^plot:'
} | tee "$OUT/summary.txt"
