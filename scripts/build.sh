#!/usr/bin/env bash
# Configures and builds raftlog into ${BUILD_DIR:-build} with Ninja (and ccache when present).
# Extra arguments go to CMake's configure step, e.g. -DRAFTLOG_SANITIZE=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
# ccache: hash paths relative to the checkout, so a fresh clone elsewhere (CI) reuses earlier objects.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
elif (($# > 0)); then
  cmake -S . -B "$build_dir" "$@"
fi
cmake --build "$build_dir" -j "${BUILD_JOBS:-$(nproc)}"
