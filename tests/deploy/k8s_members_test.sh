#!/usr/bin/env bash
# deploy/k8s/raftlog-members against a stand-in kubectl (tests/deploy/fake_kubectl.py) that creates
# pods by running the real start script (deploy/docker/k8s-start.sh) on per-claim directories, with
# the raftlog-members ConfigMap of deploy/k8s/configmap.yaml (ctest k8s_members_test). Checks: 3 -> 5
# gives the new pods fresh ids and makes them members, 5 -> 3 removes them before their pods and
# claims go, growing again never reuses an id, replacing a founder's dead volume removes the old
# node and adds the new one at the same address, a restarted pod keeps its id, and usage errors.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
tool=$repo/deploy/k8s/raftlog-members
work=$(mktemp -d /tmp/raftlog-k8s-members-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
export FAKE_K8S_DIR=$work K8S_START_SCRIPT=$repo/deploy/docker/k8s-start.sh
export KUBECTL=$work/kubectl NAMESPACE=raftlog TIMEOUT_S=5
# Debian's interpreter directly: a version manager's shim on PATH costs seconds per call under load.
py=/usr/bin/python3
[[ -x "$py" ]] || py=python3
printf '#!/bin/sh\nexec %s %s "$@"\n' "$py" "$repo/tests/deploy/fake_kubectl.py" >"$KUBECTL"
chmod +x "$KUBECTL"

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
check() { local what=$1; shift; if "$@"; then echo "ok: $what"; else fail "$what"; fi; }
# state EXPR: a Python expression over the fake cluster's state `s`.
state() { "$py" -c 'import json,sys; s=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$work/state.json" "$1"; }
member_ids() { state '" ".join(str(m["id"]) for m in sorted(s["members"], key=lambda m: m["id"]))'; }

configmap=$("$py" -c '
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["metadata"]["name"] == "raftlog-members"]
print(json.dumps(docs[0]["data"]))' "$repo/deploy/k8s/configmap.yaml")
"$py" "$repo/tests/deploy/fake_kubectl.py" --init "$configmap"
check "the founders bootstrap as nodes 1..3" test "$(member_ids)" = "1 2 3"

# ---- usage
"$tool" scale 0 >/dev/null 2>&1 && rc=0 || rc=$?
check "scale 0 exits 2" test "$rc" -eq 2
"$tool" scale many >/dev/null 2>&1 && rc=0 || rc=$?
check "scale with a non-number exits 2" test "$rc" -eq 2
"$tool" replace 7 >/dev/null 2>&1 && rc=0 || rc=$?
check "replace of a pod that does not exist exits 2" test "$rc" -eq 2
"$tool" frobnicate >/dev/null 2>&1 && rc=0 || rc=$?
check "an unknown command exits 2" test "$rc" -eq 2
check "--help exits 0" bash -c '"$1" --help >/dev/null' _ "$tool"

# ---- grow 3 -> 5
out=$("$tool" scale 5 2>&1) && rc=0 || rc=$?
check "scale 5 exits 0" test "$rc" -eq 0
check "the members are 1..5" test "$(member_ids)" = "1 2 3 4 5"
check "raftlog-3 joined as node 4 at its own address" test "$(state 's["pods"]["3"]["output"]')" = \
  "id=4 --members=4=raftlog-3.raftlog-headless.raftlog.svc.cluster.local:7001 --join=$(state 's["configmap"]["join-seeds"]')"
check "join-ids records both new pods" test "$(state 's["configmap"]["join-ids"]')" = "3=4 4=5"
check "next-id moved on" test "$(state 's["configmap"]["next-id"]')" = 6

# ---- shrink 5 -> 3: each member removed before its pod and claim go
events_before=$(state 'len(s["events"])')
out=$("$tool" scale 3 2>&1) && rc=0 || rc=$?
check "scale 3 exits 0" test "$rc" -eq 0
check "the members are 1..3" test "$(member_ids)" = "1 2 3"
check "the removed pods' claims are deleted" test "$(state 'sorted(s["pvcs"])')" = "['0', '1', '2']"
# The order of the changes: remove 5, scale to 4, remove 4, scale to 3.
order=$(state '" ".join(("remove" if "members remove" in e else "scale") for e in s["events"]['"$events_before"':] if "members remove" in e or e.startswith("kubectl scale"))')
check "each member was removed before its pod went ($order)" test "$order" = "remove scale remove scale"
check "join-ids forgets the removed pods" test "$(state 's["configmap"]["join-ids"]')" = ""

# ---- growing again never reuses an id
"$tool" scale 4 >/dev/null
check "raftlog-3 comes back as node 6, not 4" test "$(member_ids)" = "1 2 3 6"

# ---- a founder's volume dies
out=$("$tool" replace 1 2>&1) && rc=0 || rc=$?
check "replace 1 exits 0" test "$rc" -eq 0
check "... saying which node replaced which" grep -q "node 2 replaced by node 7" <<<"$out"
check "node 2 left and node 7 took raftlog-1's address" test "$(state '[m["id"] for m in s["members"] if m["address"].startswith("raftlog-1.")]')" = "[7]"
check "the members are 1 3 6 7" test "$(member_ids)" = "1 3 6 7"
check "raftlog-1 is no longer a bootstrap pod" test "$(state 's["configmap"]["bootstrap-ordinals"]')" = "0 2"
# A restart of the pod (the volume kept) starts the same node.
"$KUBECTL" -n raftlog delete pod raftlog-1
check "a restarted pod keeps its id" test "$(state 's["pods"]["1"]["node_id"]')" = 7

# ---- an id retired outside this tool (raftlogctl members remove) above next-id is never taken
"$py" - "$work/state.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["retired_ids"].append(40)
json.dump(s, open(sys.argv[1], "w"))
PY
"$tool" scale 5 >/dev/null
check "raftlog-4 skips retired id 40: node 41" test "$(state 's["pods"]["4"]["node_id"]')" = 41
"$tool" scale 4 >/dev/null

# ---- a pod without an assigned id refuses to start (what `kubectl scale` alone would do)
"$KUBECTL" -n raftlog scale statefulset raftlog --replicas=5
check "kubectl scale alone: raftlog-4 has no id and does not run" test "$(state 's["pods"]["4"]["phase"]')" = CrashLoopBackOff
check "... and says why" grep -q "no id in RAFTLOG_JOIN_IDS" <<<"$(state 's["pods"]["4"]["output"]')"
"$KUBECTL" -n raftlog scale statefulset raftlog --replicas=4
"$KUBECTL" -n raftlog delete pvc data-raftlog-4 --ignore-not-found

if command -v shellcheck >/dev/null; then check "shellcheck raftlog-members" shellcheck "$tool"; fi
if ((failures > 0)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all checks passed"
