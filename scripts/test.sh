#!/usr/bin/env bash
# Builds and runs every test that this machine can run.
#   scripts/test.sh          Release build (CUDA code compiled when nvcc is present; GPU tests run only
#                            where a GPU is), all CPU tests including the ml_dtypes cross-check.
#   scripts/test.sh --asan   The CPU code and its tests under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."

preset=release
[ "${1:-}" = "--asan" ] && preset=asan

scripts/bootstrap.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"

ctest_args=(--preset "$preset" --timeout 1500)
if ! (command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1); then
  ctest_args+=(-LE gpu)  # no GPU here: the CUDA suite is compiled, not run
fi
ctest "${ctest_args[@]}" -j2
