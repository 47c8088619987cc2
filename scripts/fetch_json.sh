#!/usr/bin/env bash
# Copies the nlohmann-json headers and CMake package (Debian's nlohmann-json3-dev, which
# scripts/bootstrap.sh installs) into .deps/nlohmann_json (ignored by git), the prefix where the
# benchmarks' find_package(nlohmann_json) looks when the system has none. The device machine has
# no network and no such package: run this here and carry `.deps` along.
#
# Usage: scripts/fetch_json.sh
set -euo pipefail
cd "$(dirname "$0")/.."

DEST=.deps/nlohmann_json
if [ -f "$DEST/include/nlohmann/json.hpp" ] &&
  [ -f "$DEST/share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake" ]; then
  echo "nlohmann-json $(cat "$DEST/VERSION" 2>/dev/null) already in $DEST"
  exit 0
fi

# The installed package, or else its .deb unpacked (apt-get download needs no root).
ROOT=/
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
if [ ! -f /usr/include/nlohmann/json.hpp ] || [ ! -d /usr/share/cmake/nlohmann_json ]; then
  (cd "$WORK" && apt-get download nlohmann-json3-dev >/dev/null)
  dpkg-deb -x "$WORK"/nlohmann-json3-dev_*.deb "$WORK/root"
  ROOT="$WORK/root"
fi
rm -rf "$DEST"
mkdir -p "$DEST/include" "$DEST/share/cmake"
cp -r "$ROOT/usr/include/nlohmann" "$DEST/include/"
# The package's targets file finds the headers three folders above itself: $DEST/include.
cp -r "$ROOT/usr/share/cmake/nlohmann_json" "$DEST/share/cmake/"
sed -n 's/.*PACKAGE_VERSION "\([0-9.]*\)".*/\1/p' \
  "$DEST/share/cmake/nlohmann_json/nlohmann_jsonConfigVersion.cmake" | head -1 >"$DEST/VERSION"
echo "nlohmann-json $(cat "$DEST/VERSION") installed in $DEST ($(du -sh "$DEST" | cut -f1))"
