#!/usr/bin/env bash
# deploy/local/cluster up and add when a node's exec is slow, and what a failed add leaves behind
# (ctest local_cluster_add_test). RAFTLOG_BIN points at a wrapper raftlogd that sleeps before it
# execs the real one, so right after the start the new process is still the wrapper: `up` and `add`
# must wait for it (not take it for dead, nor wait forever for a live process). Then: --timeout-ms
# out of raftlogctl's range is refused before any node starts; a new node whose join is refused, and
# one whose `members add` fails (a stand-in raftlogctl refuses it while $work/refuse-add exists),
# are stopped and forgotten (not running, not in status, ENDPOINTS or `health`); ids the leader
# lists as retired are skipped; a later `up` keeps the store flags it was made with.
# Usage: local_cluster_add_test.sh BIN_DIR
set -euo pipefail
real_bin=$(realpath "$1")
repo=$(cd "$(dirname "$0")/../.." && pwd)
cluster=$repo/deploy/local/cluster
unset RAFTLOG_CLUSTER_DIR
work=$(mktemp -d /tmp/raftlog-cluster-add-test.XXXXXX)
dir=$work/c
cleanup() {
  "$cluster" down --dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

source "$(dirname "$0")/cluster_test_lib.sh"

# The slow exec: a wrapper named raftlogd (the script looks for $RAFTLOG_BIN/raftlogd) that sleeps
# 3 s (far longer than the script takes to look at a node it started), then execs the real binary
# in the same process.
mkdir -p "$work/bin"
printf '#!/bin/sh\nsleep 3\nexec %q "$@"\n' "$real_bin/raftlogd" >"$work/bin/raftlogd"
chmod +x "$work/bin/raftlogd"
printf '#!/bin/sh\nif [ -e %q ] && [ "$1 $2" = "members add" ]; then\n  echo "members add: FAILED_PRECONDITION: refused by the test (TEST_REFUSAL)" >&2; exit 1\nfi\nexec %q "$@"\n' \
  "$work/refuse-add" "$real_bin/raftlogctl" >"$work/bin/raftlogctl"
chmod +x "$work/bin/raftlogctl"
export RAFTLOG_BIN=$work/bin
ctl() { "$real_bin/raftlogctl" --cluster-dir "$dir" "$@"; }
voter_ids() { ctl members list --no-headers | awk '$3 == "voter" || $3 == "leader" {print $1}' | sort -n | tr '\n' ' '; }
# Runs the cluster script with a bound (a hang fails the check instead of the whole test run).
bounded() { timeout 90 "$cluster" "$@" --dir "$dir"; }

# Ids 1..6: 3 founders, 4 and 6 added, 5 retired by hand.
read -r base metrics_base < <(free_port_block 6)
[[ -n "$base" ]] || { echo "no free ports" >&2; exit 1; }

# ---- up with slow execs
started=$(date +%s)
out=$(bounded up --base-port "$base" --metrics-base-port "$metrics_base" --segment-size 1MiB \
  --max-entry-size 64KiB 2>&1) && rc=0 || rc=$?
check "up exits 0 although every raftlogd execs 3 s late (rc $rc: $out)" test "$rc" -eq 0
check "... within 30 s ($(($(date +%s) - started)) s)" test "$(($(date +%s) - started))" -lt 30

# ---- argument errors are found before anything starts
for bad in 0 4294967296 99999999999 -5 soon; do
  out=$(bounded add --timeout-ms "$bad" 2>&1) && rc=0 || rc=$?
  check "add --timeout-ms $bad exits 2" test "$rc" -eq 2
done
check "... naming the range" contains "$out" "1..4294967295"
check "... and started no node" test "$(cluster_processes)" -eq 3
check "... nor made node 4's directory" test ! -e "$dir/n4"

# Node 4 was stopped and forgotten: not running, not listed, not in ENDPOINTS, health unaffected.
expect_node_4_forgotten() {
  check "$1: node 4 does not keep running" test "$(cluster_processes)" -eq 3
  check "$1: node 4 has no joined mark" test ! -e "$dir/n4/joined"
  check "$1: node 4 is not in the endpoints" test "$("$cluster" endpoints --dir "$dir")" = \
    "127.0.0.1:$base,127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2))"
  check "$1: status does not list node 4" bash -c '! "$1" status --dir "$2" | grep -q "^node 4:"' _ "$cluster" "$dir"
  ctl health >/dev/null && rc=0 || rc=$?
  check "$1: raftlogctl health exits 0" test "$rc" -eq 0
}

# ---- a refused join: a learner added by hand holds node 4's address
ctl members add 9 "127.0.0.1:$((base + 3))" --learner >/dev/null
out=$(bounded add 2>&1) && rc=0 || rc=$?
check "an add whose node's join is refused exits 1 (rc $rc)" test "$rc" -eq 1
check "... showing the node's reason" contains "$out" "the same address"
check "... and saying node 4 was stopped and forgotten" contains "$out" "node 4 did not start; it was stopped and forgotten"
expect_node_4_forgotten "refused join"
ctl members remove 9 >/dev/null

# ---- a refused members add (the stand-in raftlogctl): the node had started and answered
touch "$work/refuse-add"
out=$(bounded add 2>&1) && rc=0 || rc=$?
rm -f "$work/refuse-add"
check "an add whose members add fails exits 1 (rc $rc)" test "$rc" -eq 1
check "... with raftlogctl's reason" contains "$out" "TEST_REFUSAL"
check "... and says node 4 was stopped and forgotten" contains "$out" "node 4 is not a member; it was stopped and forgotten"
expect_node_4_forgotten "refused members add"

# ---- the ids the leader lists as retired are skipped: 5 retired by hand (added and removed)
ctl members add 5 "127.0.0.1:$((base + 4))" --learner >/dev/null
ctl members remove 5 >/dev/null

# ---- add with a slow exec: node 4 (free again), then 6 (5 and 9 are retired)
started=$(date +%s)
out=$(bounded add 2>&1) && rc=0 || rc=$?
check "add exits 0 although the new raftlogd execs 3 s late (rc $rc: $out)" test "$rc" -eq 0
check "... within 60 s ($(($(date +%s) - started)) s)" test "$(($(date +%s) - started))" -lt 60
check "... and adds node 4 at the next port" contains "$out" "node 4: 127.0.0.1:$((base + 3))"
out=$(bounded add 2>&1) && rc=0 || rc=$?
check "the next add exits 0 (rc $rc: $out)" test "$rc" -eq 0
check "... under id 6: retired id 5 is skipped" contains "$out" "node 6: 127.0.0.1:$((base + 5))"
check "the voters are 1 2 3 4 6" test "$(voter_ids)" = "1 2 3 4 6 "
status=$("$cluster" status --dir "$dir")
check "status calls the added nodes added" contains "$status" ", added"
check "... and has no node 5" bash -c '! grep -q "^node 5:" <<<"$1"' _ "$status"

# ---- a later up keeps the store flags the cluster was made with
bounded down >/dev/null
out=$(bounded up 2>&1) && rc=0 || rc=$?
check "up on the kept directory exits 0 (rc $rc: $out)" test "$rc" -eq 0
check "... with its 1MiB segments" grep -qx "SEGMENT_SIZE=1MiB" "$dir/cluster.env"
check "... and its 64KiB entry limit" grep -qx "MAX_ENTRY_SIZE=64KiB" "$dir/cluster.env"
check "... on every node (5 running)" test "$(pgrep -f -- "--data-dir $dir/n.* --segment-size 1MiB" | wc -l)" -eq 5

bounded down --purge >/dev/null
check "down --purge leaves no node running" test "$(cluster_processes)" -eq 0
if ((failures > 0)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all checks passed"
