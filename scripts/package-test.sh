#!/usr/bin/env bash
# Builds the .deb packages of a build tree with CPack and installs them with dpkg into a scratch root
# (ctest package_deb_test; about a minute): checks the control fields (Depends from dpkg-shlibdeps,
# resolved by apt's simulation on this Debian 12 system), the files (binaries, systemd unit naming the installed
# raftlogd, protos, headers, CMake package), runs every installed binary's --version, builds a
# program against the installed client library with find_package(raftlog), and removes the packages.
#
#   scripts/package-test.sh [--build-dir DIR]      (default: build)
# Exit 0 when every check passed, 1 otherwise, 77 (skipped) without dpkg-deb/cpack.
# The bash -c snippets take their values as arguments: single quotes are meant.
# shellcheck disable=SC2016
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=build
while (($# > 0)); do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    *) echo "usage: $0 [--build-dir DIR]" >&2; exit 2 ;;
  esac
done
build_dir=$(realpath "$build_dir")
for tool in cpack dpkg dpkg-deb; do
  command -v "$tool" >/dev/null || { echo "SKIP: no $tool"; exit 77; }
done
work=$(mktemp -d /tmp/raftlog-package-test.XXXXXX)
trap 'rm -rf "$work"' EXIT

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
check() { local what=$1; shift; if "$@"; then echo "ok: $what"; else fail "$what"; fi; }

echo "== cpack"
(cd "$work" && cpack -G DEB -B "$work/out" --config "$build_dir/CPackConfig.cmake" >"$work/cpack.log" 2>&1) \
  || { cat "$work/cpack.log" >&2; echo "FAIL: cpack" >&2; exit 1; }
server_deb=$(find "$work/out" -maxdepth 1 -name 'raftlog_*.deb' | head -n1)
dev_deb=$(find "$work/out" -maxdepth 1 -name 'raftlog-dev_*.deb' | head -n1)
[[ -n "$server_deb" && -n "$dev_deb" ]] || { ls -l "$work/out" >&2; echo "FAIL: expected raftlog_*.deb and raftlog-dev_*.deb" >&2; exit 1; }
echo "made $(basename "$server_deb") ($(du -h "$server_deb" | cut -f1)), $(basename "$dev_deb")"

echo "== control fields"
field() { dpkg-deb --field "$1" "$2"; }
check "package name raftlog" test "$(field "$server_deb" Package)" = raftlog
project_version=$(sed -nE 's/^project\(raftlog VERSION ([0-9.]+).*/\1/p' CMakeLists.txt)
check "version is the project's ($project_version)" test "$(field "$server_deb" Version)" = "$project_version"
depends=$(field "$server_deb" Depends)
check "Depends names gRPC and protobuf (dpkg-shlibdeps): $depends" bash -c '[[ "$1" == *libgrpc++* && "$1" == *libprotobuf* ]]' _ "$depends"
# The Depends resolve on this Debian 12 system: apt's simulation (no change, no lock) installs the
# package and nothing else, since the build machine has every runtime library (virtual packages such
# as libspdlog1.10-fmt9 are resolved through their providers).
if command -v apt-get >/dev/null; then
  simulation=$(apt-get install -s "$server_deb" 2>&1) || true
  others=$(grep '^Inst ' <<<"$simulation" | grep -v '^Inst raftlog ' || true)
  check "apt resolves every Depends with what is installed${others:+ (would also install: $others)}" \
    bash -c 'grep -q "^Inst raftlog " <<<"$1" && ! grep "^Inst " <<<"$1" | grep -qv "^Inst raftlog "' _ "$simulation"
fi

echo "== files"
contents=$(dpkg-deb --contents "$server_deb" | awk '{print $NF}')
dev_contents=$(dpkg-deb --contents "$dev_deb" | awk '{print $NF}')
for path in ./usr/bin/raftlogd ./usr/bin/raftlogctl ./usr/bin/raftlog-bench ./usr/bin/raftlog-sim \
            ./usr/lib/systemd/system/raftlogd.service ./usr/share/doc/raftlog/examples/raftlogd.conf; do
  check "raftlog has $path" grep -qx -- "$path" <<<"$contents"
done
for path in ./usr/include/raftlog/client/client.h ./usr/include/raftlog/client/producer.h \
            ./usr/include/raftlog/api_errors/error_details.h ./usr/share/raftlog/proto/raftlog/v1/client.proto \
            ./usr/share/raftlog/proto/raftlog/v1/error_model.proto ./usr/lib/cmake/raftlog/raftlogConfig.cmake; do
  check "raftlog-dev has $path" grep -qx -- "$path" <<<"$dev_contents"
done
check "raftlog-dev has the static client library" grep -q '/libraftlog_client\.a$' <<<"$dev_contents"

echo "== dpkg -i into a scratch root"
root=$work/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/log"
touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
# Chrootless maintainer scripts (the scratch root has no shell); the postinst sees DPKG_ROOT and
# leaves this system's users alone. Dependencies are checked above against this system instead.
dpkg_root=(dpkg --root="$root" --log="$root/var/log/dpkg.log" --force-script-chrootless --force-depends)
if "${dpkg_root[@]}" -i "$server_deb" "$dev_deb" >"$work/dpkg.log" 2>&1; then
  echo "ok: dpkg -i raftlog raftlog-dev"
else
  cat "$work/dpkg.log" >&2
  fail "dpkg -i"
fi
check "dpkg records both installed" bash -c \
  'dpkg --root="$1" -l raftlog raftlog-dev 2>/dev/null | grep -c "^ii" | grep -qx 2' _ "$root"
for tool in raftlogd raftlogctl raftlog-bench raftlog-sim; do
  out=$("$root/usr/bin/$tool" --version 2>&1) || true
  check "installed $tool --version: $out" bash -c '[[ "$1" =~ ^$2\ [0-9]+\.[0-9]+\.[0-9]+\ \(revision\ [A-Za-z0-9._+-]+\)$ ]]' _ "$out" "$tool"
done
check "the installed unit runs the installed raftlogd" grep -q '^ExecStart=/usr/bin/raftlogd ' "$root/usr/lib/systemd/system/raftlogd.service"
# The installed raftlogd runs a one-node cluster that the installed raftlogctl finds a leader in.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$root/usr/bin/raftlogd" --id 1 --members "1=127.0.0.1:$port" --data-dir "$work/data" --segment-size 8MiB \
  --max-entry-size 64KiB --bootstrap-new-cluster >"$work/raftlogd.log" 2>&1 &
node=$!
leader=""
for _ in $(seq 1 100); do
  leader=$("$root/usr/bin/raftlogctl" leader --endpoints "127.0.0.1:$port" --timeout-ms 500 2>/dev/null) && break
  sleep 0.1
done
kill -TERM "$node" 2>/dev/null || true
wait "$node" 2>/dev/null || true
check "the installed raftlogd serves a one-node cluster ($leader)" test "$leader" = "node 1 at 127.0.0.1:$port (term 1)"

echo "== a program built against the installed client library"
if cmake -S tests/deploy/package_consumer -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$root/usr" \
     -DCMAKE_BUILD_TYPE=Release >"$work/consumer.log" 2>&1 &&
   cmake --build "$work/consumer" >>"$work/consumer.log" 2>&1; then
  check "consumer runs" test "$("$work/consumer/consumer")" = "ok 2"
else
  cat "$work/consumer.log" >&2
  fail "building against the installed raftlog-dev"
fi

echo "== dpkg -r"
if "${dpkg_root[@]}" -r raftlog-dev raftlog >"$work/dpkg-r.log" 2>&1; then echo "ok: dpkg -r"; else cat "$work/dpkg-r.log" >&2; fail "dpkg -r"; fi
check "the binaries are gone after removal" test ! -e "$root/usr/bin/raftlogd"

if ((failures > 0)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all package checks passed"
