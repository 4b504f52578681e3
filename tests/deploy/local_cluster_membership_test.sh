#!/usr/bin/env bash
# deploy/local/cluster add | remove | replace end to end (ctest local_cluster_membership_test): a
# 3-node cluster grows to 5 with `add`, node 2 is killed and replaced, shrinks back to 3 with
# `remove`, while a writer appends; then every entry acknowledged before and during the changes
# reads back, at the same index, from each remaining member, the removed and replaced nodes are
# stopped and stay stopped, and a later `up` restarts the members on their recorded ports. Also the
# refusals (bad or unknown ids, a removed node, a removal that would leave no quorum), `status`
# listing added and removed nodes, and `down --purge` stopping added nodes.
# Usage: local_cluster_membership_test.sh BIN_DIR
set -euo pipefail
bin=$(realpath "$1")
repo=$(cd "$(dirname "$0")/../.." && pwd)
cluster=$repo/deploy/local/cluster
export RAFTLOG_BIN=$bin
unset RAFTLOG_CLUSTER_DIR
# Debian's interpreter directly: a version manager's shim on PATH costs seconds per call under load.
py=/usr/bin/python3
[[ -x "$py" ]] || py=python3
work=$(mktemp -d /tmp/raftlog-cluster-membership-test.XXXXXX)
dir=$work/c
writer=""
cleanup() {
  [[ -z "$writer" ]] || kill "$writer" 2>/dev/null || true
  "$cluster" down --dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

source "$(dirname "$0")/cluster_test_lib.sh"
ctl() { "$bin/raftlogctl" --cluster-dir "$dir" "$@"; }
# The members' ids (voters and learners) as the leader lists them, space-separated, ascending.
member_ids() { ctl members list --json | "$py" -c 'import json,sys; print(" ".join(str(m["id"]) for m in sorted(json.load(sys.stdin)["members"], key=lambda m: m["id"])))'; }
voter_ids() { ctl members list --json | "$py" -c 'import json,sys; print(" ".join(str(m["id"]) for m in sorted(json.load(sys.stdin)["members"], key=lambda m: m["id"]) if m["role"] == "voter"))'; }

# Eight client and eight metrics ports in a row (ids 1..8: 3 founders, 3 added, room for one more).
read -r base metrics_base < <(free_port_block 8)
[[ -n "$base" ]] || { echo "no free ports" >&2; exit 1; }

"$cluster" up --dir "$dir" --base-port "$base" --metrics-base-port "$metrics_base" --segment-size 1MiB --max-entry-size 64KiB >/dev/null
for i in $(seq 1 20); do echo "before-$i"; done | ctl append --timeout-ms 10000 >"$work/before.out"
check "20 entries appended before any change" test "$(grep -c '^appended at index' "$work/before.out")" -eq 20

# ---- usage errors and refusals before anything changes
"$cluster" add 4 --dir "$dir" >/dev/null 2>&1 && rc=0 || rc=$?
check "add with an id exits 2 (the id is chosen by the script)" test "$rc" -eq 2
"$cluster" remove --dir "$dir" >/dev/null 2>&1 && rc=0 || rc=$?
check "remove without an id exits 2" test "$rc" -eq 2
out=$("$cluster" remove 9 --dir "$dir" 2>&1) && rc=0 || rc=$?
check "remove of an unknown node exits 1" test "$rc" -eq 1
check "... naming the nodes there are" contains "$out" "no node 9"
"$cluster" replace x --dir "$dir" >/dev/null 2>&1 && rc=0 || rc=$?
check "replace with a non-numeric id exits 2" test "$rc" -eq 2
"$cluster" add --timeout-ms soon --dir "$dir" >/dev/null 2>&1 && rc=0 || rc=$?
check "a bad --timeout-ms exits 2" test "$rc" -eq 2
check "a refused add started no node" test "$(cluster_processes)" -eq 3

# ---- a writer appends during every change (bounded: 600 appends or the stop file)
(
  for i in $(seq 1 600); do
    [[ -e "$work/stop-writer" ]] && break
    if out=$("$bin/raftlogctl" --cluster-dir "$dir" append --value "during-$i" --timeout-ms 5000 2>/dev/null); then
      echo "during-$i ${out#appended at index }" >>"$work/acked"
    fi
    sleep 0.02
  done
) &
writer=$!

# ---- grow 3 -> 5
out=$("$cluster" add --dir "$dir" 2>&1) && rc=0 || rc=$?
check "add exits 0" test "$rc" -eq 0
check "add says node 4 joined at the next port" contains "$out" "node 4: 127.0.0.1:$((base + 3))"
"$cluster" add --dir "$dir" >/dev/null
check "after two adds the voters are 1..5" test "$(voter_ids)" = "1 2 3 4 5"
status=$("$cluster" status --dir "$dir")
check "status lists added node 5 as running" contains "$status" "node 5: running"
check "the cluster's endpoints include the added nodes" contains "$("$cluster" endpoints --dir "$dir")" "127.0.0.1:$((base + 4))"
check "added nodes restart with their JOIN record" bash -c '"$1" restart 4 --dir "$2" >/dev/null && test -f "$2/n4/data/JOIN"' _ "$cluster" "$dir"

# ---- replace a dead node
"$cluster" kill 2 --dir "$dir" >/dev/null
out=$("$cluster" replace 2 --dir "$dir" 2>&1) && rc=0 || rc=$?
check "replace of killed node 2 exits 0" test "$rc" -eq 0
check "... by node 6" contains "$out" "node 2 replaced by node 6"
check "after the replace the voters are 1 3 4 5 6" test "$(voter_ids)" = "1 3 4 5 6"
out=$("$cluster" restart 2 --dir "$dir" 2>&1) && rc=0 || rc=$?
check "a replaced node cannot be restarted" test "$rc" -eq 1
check "... its id is retired" contains "$out" "retired"
out=$("$cluster" replace 2 --dir "$dir" 2>&1) && rc=0 || rc=$?
check "replacing it again exits 1" test "$rc" -eq 1

# ---- shrink 5 -> 3, one of them the leader if it is 4 or 5
out=$("$cluster" remove 5 --dir "$dir" 2>&1) && rc=0 || rc=$?
check "remove 5 exits 0" test "$rc" -eq 0
"$cluster" remove 4 --dir "$dir" >/dev/null
check "after two removes the members are 1 3 6" test "$(member_ids)" = "1 3 6"
status=$("$cluster" status --dir "$dir")
check "status shows node 4 removed" contains "$status" "node 4: removed"
check "status shows node 2 removed" contains "$status" "node 2: removed"
check "status shows node 6 running" contains "$status" "node 6: running"
check "removed nodes are stopped (3 processes left)" test "$(cluster_processes)" -eq 3
check "the endpoints are the 3 members" test "$("$cluster" endpoints --dir "$dir")" = "127.0.0.1:$base,127.0.0.1:$((base + 2)),127.0.0.1:$((base + 5))"
out=$("$cluster" remove 4 --dir "$dir" 2>&1) && rc=0 || rc=$?
check "removing a removed node exits 1" test "$rc" -eq 1
"$cluster" stop 3 --dir "$dir" >/dev/null
# The leader refuses the removal only once it has noticed node 3 gone (no answer within an election
# timeout, counted in its ticks, which a loaded machine slows): until then it proposes the change,
# which cannot commit. Wait (at most 10 s) until the leader reports node 3 silent for 1 s.
node3_silent() {
  ctl status --json --timeout-ms 2000 2>/dev/null | "$py" -c '
import json, sys
for line in sys.stdin:
    node = json.loads(line)
    if node.get("role") == "leader":
        sys.exit(0 if any(p["id"] == 3 and p["last_contact_ms"] >= 1000 for p in node.get("peers", [])) else 1)
sys.exit(1)'
}
for _ in $(seq 1 100); do node3_silent && break; sleep 0.1; done
out=$("$cluster" remove 1 --dir "$dir" 2>&1) && rc=0 || rc=$?
check "removing a voter while another one is down exits 1 (no quorum would be left)" test "$rc" -eq 1
check "... with the leader's reason" contains "$out" "WOULD_LOSE_QUORUM"
"$cluster" restart 3 --dir "$dir" >/dev/null

# ---- every acknowledged entry reads back from each remaining member
touch "$work/stop-writer"
wait "$writer" || true
writer=""
acked=$(wc -l <"$work/acked" 2>/dev/null || echo 0)
check "the writer had appends acknowledged during the changes ($acked)" test "$acked" -ge 20
final=$(ctl append --value final-barrier --timeout-ms 10000)
final_index=${final#appended at index }; final_index=${final_index%% *}
for id in 1 3 6; do
  port=$((base + id - 1))
  for _ in $(seq 1 100); do  # bounded (10 s): the member applies the barrier
    "$bin/raftlogctl" read --endpoints "127.0.0.1:$port" --from "$final_index" --count 1 --json 2>/dev/null |
      grep -q final-barrier && break
    sleep 0.1
  done
  "$bin/raftlogctl" read --endpoints "127.0.0.1:$port" --from 1 --count 100000 --json >"$work/read-$id.jsonl"
  check "node $id holds every entry acknowledged before and during the changes, at its index" \
    "$py" - "$work/read-$id.jsonl" "$work/before.out" "$work/acked" <<'EOF'
import json, sys
entries = {}
for line in open(sys.argv[1]):
    e = json.loads(line)
    entries[e["index"]] = e.get("payload", e.get("value"))
expected = {}
for k, line in enumerate(open(sys.argv[2]), start=1):
    expected[int(line.split()[3])] = "before-%d" % k
for line in open(sys.argv[3]):
    value, index = line.split()[:2]
    expected[int(index)] = value
missing = [(i, v) for i, v in expected.items() if entries.get(i) != v]
if missing:
    print("missing or different:", missing[:10], "of", len(expected)); sys.exit(1)
EOF
done

# ---- a later up restarts the members (the added node too, with its JOIN record) on the same ports
"$cluster" down --dir "$dir" >/dev/null
"$cluster" up --dir "$dir" --base-port "$((base + 50))" >/dev/null 2>&1 && rc=0 || rc=$?
check "up with other ports than the recorded addresses exits 2" test "$rc" -eq 2
out=$("$cluster" up --dir "$dir" 2>&1) && rc=0 || rc=$?
check "up again exits 0" test "$rc" -eq 0
check "... with the members' endpoints" test "$(head -n1 <<<"$out")" = "127.0.0.1:$base,127.0.0.1:$((base + 2)),127.0.0.1:$((base + 5))"
check "... and only the members run" test "$(cluster_processes)" -eq 3
check "the members are still 1 3 6" test "$(member_ids)" = "1 3 6"

# ---- down --purge stops the added nodes too
"$cluster" down --purge --dir "$dir" >/dev/null
check "down --purge leaves no node running" test "$(cluster_processes)" -eq 0
check "down --purge deletes the directory" test ! -e "$dir"

if command -v shellcheck >/dev/null; then check "shellcheck deploy/local/cluster" shellcheck "$cluster"; fi
if ((failures > 0)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all checks passed"
