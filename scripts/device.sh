#!/usr/bin/env bash
# The one script for the GPU machine (nvidia-h200): one configure and build with CUDA (Release,
# sm_90a, CUTLASS headers and nlohmann-json from .deps), then sections:
#   gpu_tests      every GPU test (decode, prefill, NCCL one rank): ctest -L gpu
#   sanitizer      compute-sanitizer memcheck and racecheck on reduced filters (decode, prefill)
#   decode_bench   the decode benchmark (mxattn_decode_bench) beside its anchors in the same call:
#                  cuDNN and FlashAttention-2 through PyTorch SDPA, FlashAttention-3 with bf16 and
#                  FP8 caches (bench/cuda/torch_sdpa_decode.py); the joined table and a plot
#   prefill_bench  the prefill benchmark (mxattn_prefill_bench) beside the same anchors, FA3's FP8
#                  beside the MXFP8 rows, and torch.matmul's bf16 rate; the joined table and a plot
#   producers_bench the MX quantize, write_kv and combine beside a device copy of their bytes
#   python         pip install . (CUDA build) and the pytest suite with PyTorch CUDA tensors
#   dist           the NCCL backend with one rank end to end, and its all-to-all beside attention
#   cpu_bench      the fast CPU engine against the host's ceilings, prefill and decode, both KV
#                  cache layouts (mxattn_bench_cpu), beside PyTorch's CPU SDPA on the same cases
#                  (bench/torch_sdpa_cpu.py) and, where mxattn's Python module is installed (the
#                  python section), prefill timed in pairs within one process
#                  (bench/cpu_vs_torch_pairs.py; CPU_PAIRS, default 20); 2 threads on 2 cores
#   ncu            Nsight Compute on one prefill launch per head dim (not run by default;
#                  NCU_DIMS: the head dims, NCU_CLOCKS: base or none, NCU_CAUSAL=1: causal,
#                  NCU_SPLIT: split_kv, default 1 as in the benchmark)
#   ncu_decode     Nsight Compute on one decode split kernel per KV type (not run by default;
#                  NCU_KV: the KV types, NCU_KEYS: cached keys, NCU_CLOCKS: base or none)
#   prefill_sweep  the prefill kernel's fixed cost per CTA: time against keys (not run by default)
# A failing section is reported and the next ones still run; a hung first GPU test skips the rest.
# Everything a section writes (log, JSON, plot) goes to one work folder, packed at the end into
# $OUT/results.tgz; $OUT/summary.txt holds the short tables, which are also printed last.
# FlashAttention-3 (the wheels scripts/fetch_fa3.sh puts in .whl) is installed into /tmp/site
# first; without them the anchors skip FA3 and say why.
#
# Usage (from this machine):  scripts/fetch_cutlass.sh; scripts/fetch_json.sh; scripts/fetch_fa3.sh;
#   then the device tool's run with command "bash scripts/device.sh [section ...]",
#   carry [".deps", ".whl"]     (default: every section)
set -uo pipefail
cd "$(dirname "$0")/.."

OUT="${OUT:-$PWD/out}"
BUILD="${BUILD:-build/device}"
WORK="$(mktemp -d)"
JOBS="$(nproc)"
SECTIONS=(build gpu_tests prefill_bench decode_bench producers_bench sanitizer dist python cpu_bench)
DECODE_FILTER='KvTypes/CudaDecodeSanitized.*:CudaDecode.NarrowMx*:CudaDecode.ManyQueryTiles*:CudaDecode.ManySplitsCombine*:CudaDecode.RowsThatSeeNothing*:CudaDecode.GraphReplay*:CudaKvFormat.E8m0*:CudaWriteKv.*:CudaQuantize.*:CudaCombine.*:CudaMergeStates.*'
PREFILL_FILTER='Types/CudaPrefillSanitized.*:CudaPrefillFeaturesSanitized.*:CudaPrefill.RowsThatSeeNothing*'
NCCL_FILTER='NcclShardedAttention.OneGpuCudaEngine*'
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT"

section_build() {
  {
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
    nvcc --version | tail -2
    cmake --version | head -1
    git rev-parse --short HEAD 2>/dev/null
  } || true
  local prefix=()
  if [ ! -f /usr/include/gtest/gtest.h ] && [ -d .deps/googletest ]; then
    if [ ! -d /tmp/gtest ]; then
      cmake -S .deps/googletest -B /tmp/gtest-build -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_GMOCK=OFF -DCMAKE_INSTALL_PREFIX=/tmp/gtest >/dev/null &&
        cmake --build /tmp/gtest-build -j "$JOBS" >/dev/null &&
        cmake --install /tmp/gtest-build >/dev/null || return 1
    fi
    prefix+=(-DCMAKE_PREFIX_PATH=/tmp/gtest)
  fi
  # The benchmarks' JSON library: the system's, or the copy scripts/fetch_json.sh made.
  if [ ! -f /usr/include/nlohmann/json.hpp ] && [ -d .deps/nlohmann_json ]; then
    prefix+=(-Dnlohmann_json_DIR="$PWD/.deps/nlohmann_json/share/cmake/nlohmann_json")
  fi
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DMXATTN_CUDA=ON -DMXATTN_BENCH=ON -DMXATTN_CUTLASS_DIR="$PWD/.deps/cutlass/include" \
    "${prefix[@]}" || return 1
  # BUILD_TARGETS (optional): only these targets, for a call that needs a few programs.
  # shellcheck disable=SC2086
  cmake --build "$BUILD" -j "$JOBS" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
}

# A kernel that hangs would stall every later section: one small test first.
HUNG=0
section_gpu_tests() {
  timeout 60 "$BUILD/tests/cuda/mxattn_cuda_tests" --gtest_filter='CudaKvFormat.*' --gtest_brief=1
  if [ $? -eq 124 ]; then
    HUNG=1
    echo "the first GPU test timed out: skipping the GPU sections"
    return 1
  fi
  ctest --test-dir "$BUILD" -L gpu --output-on-failure -j 4 --timeout 120
}

section_sanitizer() {
  [ "$HUNG" -eq 0 ] || return 1
  local rc=0 code bin filter
  for pair in "cuda/mxattn_cuda_tests|$DECODE_FILTER" "cuda/mxattn_prefill_tests|$PREFILL_FILTER" \
    "dist/mxattn_dist_nccl_tests|$NCCL_FILTER"; do
    bin="$BUILD/tests/${pair%%|*}"
    filter="${pair#*|}"
    [ -x "$bin" ] || continue
    for tool in memcheck racecheck; do
      echo "== compute-sanitizer --tool $tool $(basename "$bin")"
      # API errors off: NCCL probes kernels of other architectures (cudaFuncGetAttributes ->
      # cudaErrorNoKernelImageForDevice) and handles the answer; memory errors still count.
      timeout 150 compute-sanitizer --tool "$tool" --report-api-errors no --error-exitcode 86 \
        --print-limit 20 "$bin" --gtest_filter="$filter" --gtest_brief=1 2>&1 |
        awk 'NR <= 30 || /SUMMARY|PASSED|FAILED/'  # the first errors and the verdicts
      code=${PIPESTATUS[0]}
      echo "== $tool exit code $code"
      [ "$code" -eq 0 ] || rc=1
    done
  done
  return $rc
}

section_decode_bench() {
  [ "$HUNG" -eq 0 ] || return 1
  timeout 150 "$BUILD/bench/cuda/mxattn_decode_bench" --json "$WORK/decode_bench.json" || return 1
  PYTHONUNBUFFERED=1 timeout 200 python3 bench/cuda/torch_sdpa_decode.py \
    --json "$WORK/torch_sdpa_decode.json" || return 1
  timeout 60 python3 bench/cuda/plot_decode.py "$WORK/decode_bench.json" \
    "$WORK/torch_sdpa_decode.json" "$OUT/decode_bench.png"
}

# The MX producers (quantize, write_kv) and the combine, each beside a device copy of its bytes.
section_producers_bench() {
  [ "$HUNG" -eq 0 ] || return 1
  timeout 120 "$BUILD/bench/cuda/mxattn_producers_bench" --json "$WORK/producers_bench.json" |
    tee "$WORK/producers_bench.txt"
}

section_prefill_bench() {
  [ "$HUNG" -eq 0 ] || return 1
  [ -x "$BUILD/bench/cuda/mxattn_prefill_bench" ] || { echo "prefill engine not built"; return 1; }
  timeout 90 "$BUILD/bench/cuda/mxattn_prefill_bench" --json "$WORK/prefill_bench.json" || return 1
  # As many timed launches as mxattn_prefill_bench: under sustained load the clock drops, and D256
  # ran 7-11% faster timed over 5 launches than over 20.
  PYTHONUNBUFFERED=1 timeout 200 python3 bench/cuda/torch_sdpa_prefill.py \
    --json "$WORK/torch_sdpa_prefill.json" --ours "$WORK/prefill_bench.json" \
    --plot "$OUT/prefill_bench.png" --reps 20
}

# The module must link the shared libstdc++: the image's /opt/gcc wrapper finds only the static one.
section_python() {
  CXX=/usr/bin/g++ CC=/usr/bin/gcc CUDAHOSTCXX=/usr/bin/g++ MXATTN_CUDA=ON \
    timeout 240 python3 -m pip install -q --no-build-isolation --no-deps --no-index . || return 1
  timeout 120 python3 -m pytest -q -rs python/tests
}

section_dist() {
  [ "$HUNG" -eq 0 ] || return 1
  export NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}"
  timeout 60 "$BUILD/tools/mxattn" dist --backend nccl --seq-len-q 4096 --seq-len-k 4096 --causal \
    --repeat 5 || return 1
  timeout 90 "$BUILD/bench/dist/mxattn_bench_dist" --backend nccl --seq-per-rank 4096,16384 \
    --heads-q 32 --heads-kv 8 --json "$WORK/dist_nccl.json"
}

# Two threads pinned to two cores, mxattn and PyTorch in the same call.
section_cpu_bench() {
  # Prefill and decode against the host's FMA peak and streaming read; the decode caches in both
  # layouts ([B, S, Hkv, D] and PyTorch's [B, Hkv, S, D]), their runs alternated.
  timeout 200 taskset -c 0,1 "$BUILD/bench/mxattn_bench_cpu" --threads 2 --kv-layout bshd,bhsd \
    --json "$WORK/cpu_attention.json" || return 1
  # PyTorch's CPU SDPA on the same cases (its bf16 decode is the anchor of every decode row).
  PYTHONUNBUFFERED=1 timeout 150 taskset -c 0,1 python3 bench/torch_sdpa_cpu.py --threads 2 \
    --json "$WORK/torch_sdpa_cpu.json" || return 1
  # Prefill timed in pairs within one process, both programs at the same moment (this host's
  # speed moves within a minute; needs mxattn's Python module, which the python section
  # installs).
  if python3 -c "import mxattn" 2>/dev/null; then
    PYTHONUNBUFFERED=1 timeout 200 taskset -c 0,1 python3 bench/cpu_vs_torch_pairs.py --threads 2 \
      --pairs "${CPU_PAIRS:-20}" --json "$WORK/cpu_vs_torch_pairs.json" \
      --plot "$WORK/cpu_vs_torch_pairs.png"
  else
    echo "mxattn's Python module is not installed: no prefill pairs beside PyTorch"
  fi
}

# Nsight Compute on one launch of the prefill kernel per head dim (B1 H32 S4096 bf16, non-causal):
# throughput, tensor-pipe use, warp stalls and register spills, to steer the tuning.
section_ncu() {
  [ "$HUNG" -eq 0 ] || return 1
  local d rc=0
  for d in ${NCU_DIMS:-128 256}; do
    echo "== ncu prefill D=$d"
    timeout 150 ncu --clock-control "${NCU_CLOCKS:-base}" --section SpeedOfLight --section WarpStateStats --section LaunchStats \
      --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SchedulerStats \
      --section InstructionStats --section Occupancy --section SourceCounters \
      -k regex:prefill_kernel -c 1 -o "$WORK/ncu_prefill_$d" \
      "$BUILD/tools/mxattn" run --engine cuda --batch 1 --seq-len-q 4096 --seq-len-k 4096 \
      --num-heads-q 32 --num-heads-kv 32 --head-dim-qk "$d" --head-dim-v "$d" --q-format bf16 \
      --k-format bf16 --v-format bf16 --out-dtype bf16 --split-kv "${NCU_SPLIT:-1}" \
      ${NCU_CAUSAL:+--causal} --repeat 1 --verify=false || rc=1
    ncu -i "$WORK/ncu_prefill_$d.ncu-rep" --print-details all > "$WORK/ncu_prefill_$d.txt" || rc=1
    grep -E "Duration|Issue Slots Busy|Issued Warp|Stall|Registers|Achieved Occupancy|Executed Ipc|\
Eligible|No Eligible|Pipe|Tensor|Throughput" "$WORK/ncu_prefill_$d.txt" | head -60
    ncu -i "$WORK/ncu_prefill_$d.ncu-rep" --page source --csv --print-source sass \
      > "$WORK/ncu_prefill_${d}_sass.csv" || rc=1
  done
  return $rc
}

section_ncu_decode() {
  [ "$HUNG" -eq 0 ] || return 1
  local f rc=0 problem obj dir="$WORK/decode_sass"
  mkdir -p "$dir"
  for f in ${NCU_KV:-e4m3 e2m1}; do
    problem=(run --engine cuda --batch 1 --seq-len-q 1 --seq-len-k "${NCU_KEYS:-131072}" --num-heads-q 32
      --num-heads-kv 32 --head-dim-qk 128 --head-dim-v 128 --q-format bf16 --k-format "$f"
      --v-format "$f" --repeat 1 --verify=false)
    echo "== ncu decode kv=$f"
    timeout 150 ncu --clock-control "${NCU_CLOCKS:-base}" --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis \
      --section InstructionStats --section Occupancy --section SourceCounters \
      -k regex:decode_split_kernel -c 1 -o "$WORK/ncu_decode_$f" "$BUILD/tools/mxattn" "${problem[@]}" || rc=1
    ncu -i "$WORK/ncu_decode_$f.ncu-rep" --print-details all || rc=1
    ncu -i "$WORK/ncu_decode_$f.ncu-rep" --page source --csv --print-source sass \
      > "$WORK/ncu_decode_${f}_sass.csv" || rc=1
    timeout 60 ncu --metrics sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,\
sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,\
sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active,\
sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,\
sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,\
sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,\
smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum \
      -k regex:decode_split_kernel -c 1 "$BUILD/tools/mxattn" "${problem[@]}" || rc=1
    # The split kernels' SASS with source lines, to attribute the per-instruction counts above.
    obj=$(find "$PWD/$BUILD" -name "split_kernel_$f.cu.o" | head -1)
    [ -n "$obj" ] || continue
    (cd "$dir" && cuobjdump -xelf all "$obj" >/dev/null && for c in *.cubin; do
      nvdisasm -g "$c" > "${f}_${c%.cubin}.sass.txt"; rm -f "$c"; done) || rc=1
  done
  return $rc
}

# The prefill kernel's cost per CTA beside its keys: B4 H32 Sq 4096 bf16, the
# same 4096 CTAs walking 8 and 32 key tiles (Sk 1024, 4096); the intercept of the line through the
# two times, spread over the CTAs each SM runs, is what a CTA costs besides its keys.
section_prefill_sweep() {
  [ "$HUNG" -eq 0 ] || return 1
  local d sk t line rc=0 sms times="$WORK/prefill_sweep_times.txt"
  sms=$(nvidia-smi --query-gpu=multiprocessor_count --format=csv,noheader 2>/dev/null | head -1)
  [ -n "$sms" ] || sms=132
  : >"$times"
  for d in 64 128 256; do
    line="$d"
    for sk in 1024 4096; do
      t=$(timeout 60 "$BUILD/tools/mxattn" run --engine cuda --batch 4 --num-heads-q 32 \
        --num-heads-kv 32 --seq-len-q 4096 --seq-len-k "$sk" --head-dim-qk "$d" --head-dim-v "$d" \
        --q-format bf16 --k-format bf16 --v-format bf16 --out-dtype bf16 --split-kv 1 \
        --repeat 20 --verify=false | awk '/^time:/ {print $2}')
      if [ -z "$t" ]; then
        rc=1
        t=nan
      fi
      line="$line $t"
    done
    echo "$line" >>"$times"
  done
  awk -v sms="$sms" '
    BEGIN { print "D     Sk1024 ms  Sk4096 ms  per 1024 keys ms  intercept ms  per CTA us" }
    { slope = ($3 - $2) / 3; icpt = $2 - slope
      printf "%-5s %9.4f  %9.4f  %16.4f  %12.4f  %10.2f\n", $1, $2, $3, slope, icpt,
             icpt * 1000 * sms / 4096 }' "$times" | tee "$WORK/prefill_sweep.txt"
  return $rc
}

section_summary() {
  python3 - "$WORK" <<'EOF'
import json, os, sys
sys.path[:0] = ["bench", "bench/cuda"]  # the benchmarks' own table printers
work = sys.argv[1]
def load(name):
    path = os.path.join(work, name)
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return None
ours, anchors = load("prefill_bench.json"), load("torch_sdpa_prefill.json")
if ours and anchors:
    from torch_sdpa_prefill import report
    report(anchors, ours)
ours = load("decode_bench.json")
if ours:
    from plot_decode import print_table as print_decode
    print_decode(ours, load("torch_sdpa_decode.json"))
cpu, torch_cpu = load("cpu_attention.json"), load("torch_sdpa_cpu.json")
if cpu:
    t = {r["name"]: r for r in (torch_cpu or {}).get("cases", [])}
    print(f"cpu: peak {cpu['ceilings']['peak_gflops']:.0f} GFLOP/s, read {cpu['ceilings']['stream_read_gbs']:.1f} GB/s"
          " (torch: PyTorch's CPU SDPA, its bf16 decode beside every decode row)")
    for r in cpu["cases"]:
        a = t.get(r["name"]) or (t.get("decode bf16 kv") if r["kind"] == "decode" else None)
        print(f"  {r['name']:36} {r['median_ms']:9.2f} ms {r['percent_of_ceiling']:5.1f}% of ceiling"
              + (f"  torch {a['median_ms']:9.2f} ms  x{a['median_ms'] / r['median_ms']:.2f}" if a else ""))
pairs = load("cpu_vs_torch_pairs.json")
if pairs:
    from cpu_vs_torch_pairs import print_table as print_pairs
    print_pairs(pairs)
EOF
}

# One section, in a shell of its own (the main loop below runs each one under the deadline).
if [ "${1:-}" = "--one" ]; then
  WORK="$2"
  [ -f "$WORK/hung" ] && HUNG=1
  "section_$3"
  rc=$?
  [ "$HUNG" -eq 1 ] && touch "$WORK/hung"
  exit $rc
fi

# FlashAttention-3 for the anchors: the wheels scripts/fetch_fa3.sh put in .whl (this machine has
# no network), installed where every section's Python finds them.
if compgen -G ".whl/*.whl" >/dev/null; then
  rm -rf /tmp/site
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl ||
    echo "installing .whl failed: the anchors will skip FlashAttention-3"
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi

# The device tool stops a command at its limit and returns only what is under $OUT then: DEADLINE
# (default 570) is the whole call's seconds, all sections together; every section runs under what
# is left of it, so the summary and the results are always written. A section with under 20 s
# left is skipped.
DEADLINE="${DEADLINE:-570}"
selected=("$@")
[ ${#selected[@]} -eq 0 ] && selected=("${SECTIONS[@]}")
declare -A status
for name in "${selected[@]}"; do
  start=$SECONDS
  left=$((DEADLINE - SECONDS - 15))
  echo "== $name (t=${SECONDS}s, ${left} s left)"
  if [ "$left" -lt 20 ]; then status[$name]=SKIPPED; echo "   skipped: out of time"; continue; fi
  if BUILD="$BUILD" timeout -k 5 "$left" bash "$0" --one "$WORK" "$name" >"$WORK/$name.log" 2>&1; then
    status[$name]=ok
  else
    status[$name]="FAILED (exit $?)"
  fi
  echo "   ${status[$name]} in $((SECONDS - start)) s; last lines:"
  tail -n 8 "$WORK/$name.log" | sed 's/^/   | /'
  tar czf "$OUT/results.tgz" -C "$WORK" . 2>/dev/null || true
done
{
  echo "== sections"
  for name in "${selected[@]}"; do printf '   %-14s %s\n' "$name" "${status[$name]}"; done
  cat "$WORK/prefill_sweep.txt" 2>/dev/null
  cat "$WORK/producers_bench.txt" 2>/dev/null
  section_summary
} | tee "$OUT/summary.txt"
tar czf "$OUT/results.tgz" -C "$WORK" .
