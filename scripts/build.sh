#!/usr/bin/env bash
# Configures and builds raftlog into ${BUILD_DIR:-build} with Ninja (and ccache when present).
# Extra arguments go to CMake's configure step, e.g. -DRAFTLOG_SANITIZE=ON or -DCMAKE_BUILD_TYPE=Release.
# Warnings in raftlog's own code are errors here (RAFTLOG_WERROR=ON, so CI keeps the code clean);
# RAFTLOG_WERROR=OFF in the environment builds with warnings as warnings.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
# ccache: hash paths relative to the checkout, so a fresh clone elsewhere (CI) reuses earlier objects.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
werror="-DRAFTLOG_WERROR=${RAFTLOG_WERROR:-ON}"
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$werror" "$@"
elif (($# > 0)) || ! grep -qx "RAFTLOG_WERROR:BOOL=${RAFTLOG_WERROR:-ON}" "$build_dir/CMakeCache.txt"; then
  cmake -S . -B "$build_dir" "$werror" "$@"
fi
cmake --build "$build_dir" -j "${BUILD_JOBS:-$(nproc)}"
