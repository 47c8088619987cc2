#!/usr/bin/env bash
# Installs what mxattn needs and is missing: build tools, test libraries and nlohmann-json (the
# benchmarks' JSON) from Debian, numpy and ml_dtypes (the independent MX cross-check) from PyPI.
# Safe to run again: it installs only what is absent.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi

need_apt=()
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
command -v ninja >/dev/null 2>&1 || need_apt+=(ninja-build)
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3 python3-pip)
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev libgmock-dev)
[ -f /usr/include/benchmark/benchmark.h ] || need_apt+=(libbenchmark-dev)
[ -f /usr/include/nlohmann/json.hpp ] || need_apt+=(nlohmann-json3-dev)
# Open MPI: the MPI backend of sequence parallelism and its tests under mpirun.
{ command -v mpicxx && command -v mpirun; } >/dev/null 2>&1 || need_apt+=(libopenmpi-dev openmpi-bin)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "bootstrap: installing ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

# CUDA C++20 needs CMake 3.28 or later; Debian 12 has 3.25, so take one from PyPI (see env.sh).
. "$(dirname "$0")/env.sh"
if ! mxattn_cmake_ok cmake; then
  echo "bootstrap: installing CMake >= 3.28 from PyPI"
  python3 -m pip install -q "cmake>=3.28,<4" || python3 -m pip install -q --break-system-packages "cmake>=3.28,<4"
fi

if ! python3 -c "import numpy, ml_dtypes" >/dev/null 2>&1; then
  echo "bootstrap: installing numpy and ml_dtypes from PyPI"
  python3 -m pip install -q numpy ml_dtypes || python3 -m pip install -q --break-system-packages numpy ml_dtypes
fi

# The prefill engine builds on the CUTLASS/CuTe headers (PyPI nvidia-cutlass), where nvcc is, and
# its machine-code check reads the kernels with cuobjdump (PyPI, where the toolkit lacks it); the
# benchmarks' JSON library goes to .deps too, for the device machine, which has no network.
if command -v nvcc >/dev/null 2>&1; then
  "$(dirname "$0")/fetch_cutlass.sh"
  "$(dirname "$0")/fetch_cuda_tools.sh"
  "$(dirname "$0")/fetch_json.sh"
fi
