#!/usr/bin/env bash
# Downloads FlashAttention-3's forward kernels for the GPU benchmarks' anchors: the PyPI wheel
# fa3-fwd (import fa3_fwd_interface; CPython 3.9+ abi3, x86-64 manylinux 2.24, built against
# PyTorch 2.10) and einops, which it imports, into .whl/ (ignored by git). The device machine has
# no network: scripts/device.sh installs what .whl holds before the benchmarks; carry `.whl` along
# with `.deps`. Where the wheel does not load (another PyTorch, no Hopper GPU), the anchors skip
# FA3 and say why.
#
# Usage: scripts/fetch_fa3.sh [version]     (default: the pinned version below)
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION="${1:-0.0.3}"
if compgen -G ".whl/fa3_fwd-$VERSION-*.whl" >/dev/null && compgen -G ".whl/einops-*.whl" >/dev/null
then
  echo "fa3-fwd $VERSION and einops already in .whl"
  exit 0
fi
rm -f .whl/fa3_fwd-*.whl .whl/einops-*.whl
mkdir -p .whl
# The device machine's Python, not this one's: binary wheels for CPython 3.12 on x86-64 Linux.
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
  -d .whl "fa3-fwd==$VERSION" einops
echo "in .whl: $(cd .whl && ls fa3_fwd-*.whl einops-*.whl | tr '\n' ' ')($(du -sh .whl | cut -f1))"
