#!/usr/bin/env bash
# Installs the CUTLASS and CuTe headers (the prefill engine's base for TMA, wgmma and swizzled shared
# memory layouts) from the PyPI package nvidia-cutlass into .deps/cutlass/include (ignored by git),
# where `-DMXATTN_CUTLASS_DIR=.deps/cutlass/include` finds them. The device machine has no network:
# run this here and carry `.deps` along.
#
# Usage: scripts/fetch_cutlass.sh [version]     (default: the pinned version below)
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION="${1:-4.2.0.0}"
DEST=.deps/cutlass/include
if [ -f "$DEST/cute/tensor.hpp" ] && [ "$(cat .deps/cutlass/VERSION 2>/dev/null)" = "$VERSION" ]; then
  echo "CUTLASS $VERSION headers already in $DEST"
  exit 0
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: "nvidia-cutlass==$VERSION" -d "$WORK"
WHEEL="$(ls "$WORK"/nvidia_cutlass-*.whl)"
# The wheel carries the C++ headers under cutlass_library/source/include; only cute/ and cutlass/
# are needed.
python3 - "$WHEEL" "$WORK/unpacked" <<'PY'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
prefix = "cutlass_library/source/include/"
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist()
             if n.startswith(prefix + "cute/") or n.startswith(prefix + "cutlass/")]
    if not names:
        sys.exit(f"{wheel}: no headers under {prefix}")
    z.extractall(dest, names)
PY
rm -rf .deps/cutlass
mkdir -p "$DEST"
mv "$WORK/unpacked/cutlass_library/source/include/cute" "$WORK/unpacked/cutlass_library/source/include/cutlass" "$DEST/"
echo "$VERSION" > .deps/cutlass/VERSION
echo "CUTLASS $VERSION headers installed in $DEST ($(du -sh "$DEST" | cut -f1))"
