#!/usr/bin/env bash
# Installs every Debian 12 package that building and testing raftlog needs.
# Idempotent: packages already present are skipped, so a second run is a no-op.
# Must run as root (or with sudo available) on a fresh Debian 12 machine.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc libssl-dev openssl
  libabsl-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev
  prometheus-cpp-dev
  python3 python3-grpcio python3-protobuf python3-grpc-tools
  iproute2 procps psmisc
  # deploy/ checks (scripts/check-deploy.sh): promtool, yamllint, shellcheck, the compose schema
  prometheus yamllint python3-yaml shellcheck docker-compose
  # jepsen/ (fault injection): iptables rules in namespaces, libfaketime, plots
  iptables faketime python3-matplotlib
)

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
