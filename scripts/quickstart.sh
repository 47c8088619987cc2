#!/usr/bin/env bash
# Quick start: install what is missing, build, and run the main job: `mxattn run` on the default
# problem (a realistic decode step, verified against the f64 reference), on the GPU if there is one,
# else on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh
. scripts/env.sh
preset=cpu
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && command -v nvcc >/dev/null 2>&1; then
  preset=release
fi
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" --target mxattn_cli
"build/$preset/tools/mxattn" run "$@"
