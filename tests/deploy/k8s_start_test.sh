#!/usr/bin/env bash
# deploy/docker/k8s-start.sh's decisions (ctest k8s_start_test): which pods bootstrap, join under an
# assigned id or restart under their recorded id, and which refuse to start (exit 2), with stand-ins
# for `hostname` and `raftlog-entrypoint` that print what they were given. No Kubernetes needed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
script=$repo/deploy/docker/k8s-start.sh
work=$(mktemp -d /tmp/raftlog-k8s-start-test.XXXXXX)
trap 'rm -rf "$work"' EXIT

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
check() { local what=$1; shift; if "$@"; then echo "ok: $what"; else fail "$what"; fi; }

seeds=raftlog-0.h.ns.svc.cluster.local:7001,raftlog-1.h.ns.svc.cluster.local:7001
# run HOST DATA_DIR [VAR=value...] -- ARGS: runs the script as pod HOST; prints its output, sets rc.
run() {
  local host=$1 data=$2; shift 2
  local env_vars=()
  while (($# > 0)) && [[ "$1" != -- ]]; do env_vars+=("$1"); shift; done
  shift
  local fake=$work/bin-$host
  mkdir -p "$fake"
  printf '#!/bin/sh\necho %s\n' "$host" >"$fake/hostname"
  printf '#!/bin/sh\necho "entrypoint RAFTLOG_ID=$RAFTLOG_ID $*"\n' >"$fake/raftlog-entrypoint"
  chmod +x "$fake/hostname" "$fake/raftlog-entrypoint"
  out=$(env -i PATH="$fake:/usr/bin:/bin" RAFTLOG_DATA_DIR="$data" RAFTLOG_PEER_DOMAIN=h.ns.svc.cluster.local \
    RAFTLOG_BOOTSTRAP_ORDINALS="0 1 2" RAFTLOG_JOIN_SEEDS="$seeds" "${env_vars[@]}" sh "$script" "$@" 2>&1) && rc=0 || rc=$?
}
fresh() { rm -rf "${work:?}/$1"; mkdir -p "$work/$1"; echo "$work/$1"; }

# ---- empty volumes
d=$(fresh a); run raftlog-0 "$d" -- --decide
check "founder ordinal 0 with an empty volume bootstraps as node 1" test "$out" = "bootstrap 1"
d=$(fresh a); run raftlog-2 "$d" -- --decide
check "founder ordinal 2 bootstraps as node 3" test "$out" = "bootstrap 3"
d=$(fresh a); run raftlog-3 "$d" RAFTLOG_JOIN_IDS="3=4 4=5" -- --decide
check "ordinal 3 with an assigned id joins under it" test "$out" = "join 4 raftlog-3.h.ns.svc.cluster.local:7001 $seeds"
d=$(fresh a); run raftlog-4 "$d" RAFTLOG_JOIN_IDS="3=4 4=5" -- --decide
check "ordinal 4 joins as node 5" test "$out" = "join 5 raftlog-4.h.ns.svc.cluster.local:7001 $seeds"
d=$(fresh a); run raftlog-13 "$d" RAFTLOG_JOIN_IDS="3=4 1=9" -- --decide
check "ordinal 13 is not ordinal 3's or 1's entry: refused" test "$rc" -eq 2
d=$(fresh a); run raftlog-1 "$d" RAFTLOG_BOOTSTRAP_ORDINALS="0 2" RAFTLOG_JOIN_IDS="1=7" -- --decide
check "a replaced founder (ordinal dropped from bootstrap) joins under its new id" test "$out" = "join 7 raftlog-1.h.ns.svc.cluster.local:7001 $seeds"
d=$(fresh a); run raftlog-1 "$d" RAFTLOG_BOOTSTRAP_ORDINALS="0 2" -- --decide
check "an empty non-founder without an id exits 2" test "$rc" -eq 2
check "... saying why" grep -q "no id in RAFTLOG_JOIN_IDS" <<<"$out"
# ---- a founder ordinal's empty volume once the membership changed (drills7 M6): the founders'
# --members no longer describe the cluster, and the empty volume is a lost one (or a founder that
# never started): never bootstrapped under its old id
d=$(fresh a); run raftlog-1 "$d" RAFTLOG_JOIN_IDS="3=4 4=5" RAFTLOG_NEXT_ID=6 -- --decide
check "a founder's empty volume in a grown cluster (join-ids) exits 2" test "$rc" -eq 2
check "... saying to replace it with raftlog-members" grep -q "replace it with deploy/k8s/raftlog-members replace 1" <<<"$out"
d=$(fresh a); run raftlog-1 "$d" RAFTLOG_JOIN_IDS="3=4 4=5" -- --decide
check "... also without RAFTLOG_NEXT_ID (a StatefulSet from before it)" test "$rc" -eq 2
d=$(fresh a); run raftlog-0 "$d" RAFTLOG_NEXT_ID=6 -- --decide
check "a founder's empty volume after 3 -> 5 -> 3 (join-ids empty again, next-id 6) exits 2" test "$rc" -eq 2
check "... naming next-id" grep -q "next-id 6" <<<"$out"
d=$(fresh a); run raftlog-2 "$d" RAFTLOG_BOOTSTRAP_ORDINALS="0 2" RAFTLOG_NEXT_ID=5 -- --decide
check "a founder's empty volume after another founder was replaced exits 2" test "$rc" -eq 2
d=$(fresh a); run raftlog-2 "$d" RAFTLOG_NEXT_ID=4 -- --decide
check "a founder's empty volume of a cluster never changed (next-id 4) bootstraps" test "$out" = "bootstrap 3"
d=$(fresh a); run raftlog-0 "$d" RAFTLOG_NEXT_ID=x -- --decide
check "a malformed next-id exits 2" test "$rc" -eq 2
# ---- review of bootstrap5, notes 8 and 9: refusals that say what a new cluster needs
d=$(fresh a); run raftlog-0 "$d" RAFTLOG_NEXT_ID=10 -- --decide
check "a new cluster's founder with next-id 10 (not 4) exits 2" test "$rc" -eq 2
check "... saying a new cluster's next-id must be 4" grep -q "if this is a new cluster, next-id must be 4" <<<"$out"
d=$(fresh a); run raftlog-0 "$d" RAFTLOG_BOOTSTRAP_ORDINALS="0" RAFTLOG_NEXT_ID=2 -- --decide
check "a one-founder StatefulSet's founder exits 2 up front" test "$rc" -eq 2
check "... saying one founder cannot start" grep -q "names a single founder: a one-founder StatefulSet cannot start" <<<"$out"
d=$(fresh a); run raftlog-2 "$d" RAFTLOG_BOOTSTRAP_ORDINALS="2" RAFTLOG_JOIN_IDS="0=4 1=5" RAFTLOG_NEXT_ID=6 -- --decide
check "one founder ordinal left after two replacements: the membership change is named" grep -q "membership changed since its first start" <<<"$out"
d=$(fresh a); run raftlog-3 "$d" RAFTLOG_JOIN_IDS="3=0" -- --decide
check "id 0 is refused" test "$rc" -eq 2
d=$(fresh a); run raftlog-3 "$d" RAFTLOG_JOIN_IDS="3=x" -- --decide
check "a non-numeric id is refused" test "$rc" -eq 2
d=$(fresh a); run raftlog "$d" -- --decide
check "a host name without an ordinal exits 2" test "$rc" -eq 2
d=$(fresh a); run raftlog-3 "$d" RAFTLOG_JOIN_IDS="3=4" RAFTLOG_PEER_DOMAIN= -- --decide
check "joining without RAFTLOG_PEER_DOMAIN exits 2" test "$rc" -eq 2

# ---- the first start records the id; later starts use the record, whatever the ConfigMap says
d=$(fresh b); run raftlog-3 "$d" RAFTLOG_JOIN_IDS="3=4" -- --log-level debug
check "a joining start execs the entry point with --members self and --join" \
  test "$out" = "entrypoint RAFTLOG_ID=4 --members=4=raftlog-3.h.ns.svc.cluster.local:7001 --join=$seeds --log-level debug"
check "it records node-id and mode in K8S_NODE" grep -qx "node-id 4" "$d/K8S_NODE"
check "... mode join" grep -qx "mode join" "$d/K8S_NODE"
run raftlog-3 "$d" RAFTLOG_JOIN_IDS="3=11" -- --decide
check "a restart keeps the recorded id even when join-ids changed" test "$out" = "join 4 raftlog-3.h.ns.svc.cluster.local:7001 $seeds"
d=$(fresh c); run raftlog-1 "$d" -- 
check "a founder's start execs the entry point with RAFTLOG_ID only" test "$out" = "entrypoint RAFTLOG_ID=2 "
run raftlog-1 "$d" RAFTLOG_BOOTSTRAP_ORDINALS="" -- --decide
check "a founder restarts as a founder after its ordinal left the bootstrap list" test "$out" = "bootstrap 2"
run raftlog-1 "$d" RAFTLOG_JOIN_IDS="3=4" RAFTLOG_NEXT_ID=5 -- --decide
check "a founder's volume that holds its node restarts as a founder in a grown cluster" test "$out" = "bootstrap 2"

# ---- volumes written before this script, and inconsistent ones
d=$(fresh d); printf 'raftlog-identity 1\ncluster-id x\nnode-id 6\ncrc32c 0\n' >"$d/IDENTITY"; touch "$d/JOIN"
run raftlog-3 "$d" -- --decide
check "a joined volume without K8S_NODE restarts under IDENTITY's id with --join" test "$out" = "join 6 raftlog-3.h.ns.svc.cluster.local:7001 $seeds"
d=$(fresh d); printf 'raftlog-identity 1\ncluster-id x\nnode-id 2\ncrc32c 0\n' >"$d/IDENTITY"
run raftlog-1 "$d" RAFTLOG_BOOTSTRAP_ORDINALS="" -- --decide
check "a founder's volume without K8S_NODE restarts as that founder" test "$out" = "bootstrap 2"
d=$(fresh d); mkdir "$d/log"
run raftlog-2 "$d" RAFTLOG_BOOTSTRAP_ORDINALS="" -- --decide
check "a pre-IDENTITY founder volume (log/ only) restarts as ordinal + 1" test "$out" = "bootstrap 3"
d=$(fresh d); touch "$d/JOIN"
run raftlog-3 "$d" RAFTLOG_JOIN_IDS="3=4" -- --decide
check "a JOIN record with no id recorded anywhere exits 2" test "$rc" -eq 2
d=$(fresh d); printf 'raftlog-k8s-node 1\nnode-id 4\nmode join\n' >"$d/K8S_NODE"
printf 'raftlog-identity 1\ncluster-id x\nnode-id 5\ncrc32c 0\n' >"$d/IDENTITY"; touch "$d/JOIN"
run raftlog-3 "$d" -- --decide
check "K8S_NODE and IDENTITY naming different ids exit 2" test "$rc" -eq 2
d=$(fresh d); printf 'raftlog-k8s-node 1\nnode-id 4\nmode join\n' >"$d/K8S_NODE"
printf 'raftlog-identity 1\ncluster-id x\nnode-id 4\ncrc32c 0\n' >"$d/IDENTITY"
run raftlog-3 "$d" -- --decide
check "a joined node whose JOIN record is gone exits 2" test "$rc" -eq 2
d=$(fresh d); printf 'raftlog-k8s-node 1\nnode-id 04x\nmode join\n' >"$d/K8S_NODE"
run raftlog-3 "$d" -- --decide
check "a damaged K8S_NODE exits 2" test "$rc" -eq 2

if command -v shellcheck >/dev/null; then check "shellcheck k8s-start.sh" shellcheck "$script"; fi
if ((failures > 0)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all checks passed"
