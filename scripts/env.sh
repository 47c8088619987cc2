# Sourced by the scripts: puts a CMake recent enough for CUDA C++20 (3.28 or later) first on PATH.
# Debian 12 ships 3.25, whose nvcc support stops at C++17; bootstrap.sh then installs one from PyPI.
mxattn_cmake_ok() {
  local v
  v=$("${1:-cmake}" --version 2>/dev/null | head -1 | awk '{print $3}')
  [ -n "$v" ] && [ "$(printf '%s\n3.28.0\n' "$v" | sort -V | head -1)" = "3.28.0" ]
}
if ! mxattn_cmake_ok cmake; then
  pip_cmake_dir=$(python3 -c "import cmake; print(cmake.CMAKE_BIN_DIR)" 2>/dev/null || true)
  if [ -n "$pip_cmake_dir" ] && mxattn_cmake_ok "$pip_cmake_dir/cmake"; then
    export PATH="$pip_cmake_dir:$PATH"
  fi
fi
