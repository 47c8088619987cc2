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
. scripts/env.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"

ctest_args=(--preset "$preset" --timeout 1500)
if ! (command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1); then
  ctest_args+=(-LE gpu)  # no GPU here: the CUDA suite is compiled, not run
fi
ctest "${ctest_args[@]}" -j2

# --- Python package (python/, README "Python") ---------------------------------------------------
# `pip install .` builds the extension with this CMake project (CPU engines unless MXATTN_CUDA is
# set), then its pytest suite runs: NumPy and ml_dtypes on the CPU engines here, PyTorch CUDA
# tests where a GPU and a CUDA build are. Not under --asan: the interpreter is not instrumented.
if [ "$preset" = release ]; then
  export PIP_BREAK_SYSTEM_PACKAGES=1  # Debian's Python is externally managed; CI owns the machine
  python3 -m pip install -q "nanobind>=2" "scikit-build-core>=0.10" pytest numpy ml_dtypes
  python3 -m pip install -q --no-build-isolation .
  python3 -m pytest -q python/tests
fi
