#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: installs packages, builds, and shows the store working
# through `raftlog-bench store --quick` (append in both flush modes, group commit, recovery).
# When the replicated node lands this becomes: start a local 3-node cluster and use it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
build_dir=${BUILD_DIR:-build}
demo_dir=$(mktemp -d /tmp/raftlog-demo.XXXXXX)
trap 'rm -rf "$demo_dir"' EXIT
"$build_dir/bin/raftlog-bench" store --quick --dir "$demo_dir/bench"
