#!/usr/bin/env bash
# Installs cuobjdump and nvdisasm, which dump the machine code (SASS) that
# tests/cuda/check_prefill_sass.py checks, from the PyPI packages nvidia-cuda-cuobjdump and
# nvidia-cuda-nvdisasm into .deps/cuda-tools/bin (ignored by git), where CMake looks after the CUDA
# toolkit's own bin folder. Does nothing where the toolkit beside nvcc has both.
#
# Usage: scripts/fetch_cuda_tools.sh [version]     (default: the pinned version below)
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION="${1:-13.5.37}"
DEST=.deps/cuda-tools/bin
nvcc_dir="$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")"
if [ -x "$nvcc_dir/cuobjdump" ] && [ -x "$nvcc_dir/nvdisasm" ]; then
  echo "cuobjdump and nvdisasm already in $nvcc_dir"
  exit 0
fi
if [ -x "$DEST/cuobjdump" ] && [ -x "$DEST/nvdisasm" ] &&
  [ "$(cat .deps/cuda-tools/VERSION 2>/dev/null)" = "$VERSION" ]; then
  echo "cuobjdump and nvdisasm $VERSION already in $DEST"
  exit 0
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: \
  "nvidia-cuda-cuobjdump==$VERSION" "nvidia-cuda-nvdisasm==$VERSION" -d "$WORK"
python3 - "$WORK" "$DEST" <<'PY'
import glob, os, sys, zipfile
work, dest = sys.argv[1], sys.argv[2]
os.makedirs(dest, exist_ok=True)
for tool in ("cuobjdump", "nvdisasm"):
    wheels = glob.glob(os.path.join(work, f"nvidia_cuda_{tool}-*.whl"))
    if not wheels:
        sys.exit(f"no {tool} wheel downloaded")
    with zipfile.ZipFile(wheels[0]) as z:
        names = [n for n in z.namelist() if n.endswith("/bin/" + tool)]
        if not names:
            sys.exit(f"{wheels[0]}: no bin/{tool}")
        with z.open(names[0]) as src, open(os.path.join(dest, tool), "wb") as out:
            out.write(src.read())
    os.chmod(os.path.join(dest, tool), 0o755)
PY
echo "$VERSION" > .deps/cuda-tools/VERSION
echo "cuobjdump and nvdisasm $VERSION installed in $DEST"
