#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: installs packages, builds, starts a local 3-node cluster
# on 127.0.0.1 and shows it working: a leader is elected, appends commit, every node serves them, the
# leader is killed with kill -9, a new leader takes writes at once, and the old leader rejoins.
# The cluster is stopped and its data removed at the end (set KEEP=1 to keep it running).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
bin=${BUILD_DIR:-build}/bin
export RAFTLOG_BIN=$PWD/$bin
export RAFTLOG_CLUSTER_DIR=${RAFTLOG_CLUSTER_DIR:-$(mktemp -d /tmp/raftlog-demo.XXXXXX)}
cluster=deploy/local/cluster
ctl="$bin/raftlogctl"
if [[ "${KEEP:-0}" != 1 ]]; then
  trap '"$cluster" down >/dev/null 2>&1 || true; rm -rf "$RAFTLOG_CLUSTER_DIR"' EXIT
fi

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
# The first "id" of a status line is the node's own (later ones are its peers').
leader_id() { "$ctl" status --json | grep '"role":"leader"' | head -n1 | sed 's/^{"endpoint":"[^"]*","id":\([0-9]*\),.*/\1/'; }

step "start a 3-node cluster (data in $RAFTLOG_CLUSTER_DIR)"
"$cluster" up --nodes 3
"$ctl" status

step "append three entries (each acknowledged once a majority has fsynced it)"
printf 'order-1001\norder-1002\norder-1003\n' | "$ctl" append

step "read them back from every node"
for endpoint in $("$cluster" endpoints | tr ',' ' '); do
  echo "-- $endpoint"
  "$ctl" read --from 1 --endpoints "$endpoint"
done

leader=$(leader_id)
step "kill -9 the leader (node $leader) and keep writing"
"$cluster" kill "$leader"
start=$(date +%s%N)
"$ctl" append --value "order-1004 (written after the leader died)"
echo "write accepted by the new leader $(( ($(date +%s%N) - start) / 1000000 )) ms after the kill"
"$ctl" status || true

step "restart node $leader: it rejoins and catches up"
"$cluster" restart "$leader"
sleep 1
"$ctl" read --from 1 --linearizable
"$ctl" status
step "done: this is raftlog. (KEEP=1 keeps the cluster running; deploy/local/cluster --help for more.)"
