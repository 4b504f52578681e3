#!/usr/bin/env bash
# CPU per acknowledged append, two builds side by side (issue 17):
#
#   bench/ab-cpu.sh --a BIN_DIR --b BIN_DIR [--rounds R (3)] [--seconds S (6)] [--cell "FLAGS"]...
#
# For each round and each cell, first build A then build B: starts 3 raftlogd of that build (sync
# flush, loopback, fresh data), runs that build's `raftlog-bench cluster --endpoints ... --server-pids
# ... --entry-size 1KiB --duration S FLAGS` and prints one line: ops/s, p50, p99, server CPU per
# entry (all three nodes, from the bench's RESULT line), the leader's and each follower's CPU per
# entry (utime+stime from /proc/PID/stat around the run) and the load generator's CPU per entry
# (utime+stime of the bench process, /usr/bin/time). CPU per append is far less sensitive to a
# shared machine's other load than ops/s. A cell is raftlog-bench flags, default "--clients 64".
# Every wait is bounded (leader: 20 s; a cell: S + 30 s); only the processes it started are killed.
set -euo pipefail

a="" b="" rounds=3 seconds=6 cells=()
die() { echo "ab-cpu: $*" >&2; exit 2; }
while (($# > 0)); do
  case "$1" in
    --a) a=$2; shift 2 ;;
    --b) b=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --cell) cells+=("$2"); shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
[[ -n "$a" && -n "$b" ]] || die "--a and --b are required"
{ [[ "$rounds" =~ ^[0-9]+$ ]] && ((rounds >= 1 && rounds <= 20)); } || die "--rounds must be 1..20"
{ [[ "$seconds" =~ ^[0-9]+$ ]] && ((seconds >= 1 && seconds <= 120)); } || die "--seconds must be 1..120"
((${#cells[@]} > 0)) || cells=("--clients 64")
for dir in "$a" "$b"; do
  for tool in raftlogd raftlogctl raftlog-bench; do [[ -x "$dir/$tool" ]] || die "no $dir/$tool"; done
done

live_pids=()  # the raftlogd of the cell running now; killed on any exit
stop_nodes() {
  local p
  for p in ${live_pids[@]+"${live_pids[@]}"}; do kill -9 "$p" 2>/dev/null || true; done
  for p in ${live_pids[@]+"${live_pids[@]}"}; do wait "$p" 2>/dev/null || true; done
  live_pids=()
}
trap stop_nodes EXIT

cpu_ticks() { awk '{s = $0; sub(/.*\) /, "", s); split(s, f, " "); print f[12] + f[13]}' "/proc/$1/stat"; }

run_cell() {  # BIN LABEL FLAGS...
  local bin=$1 label=$2
  shift 2
  local work pids=() ports members endpoints leader="" i
  work=$(mktemp -d /tmp/raftlog-ab-cpu.XXXXXX)
  read -r -a ports <<<"$(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(3)]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))')"
  members="1=127.0.0.1:${ports[0]},2=127.0.0.1:${ports[1]},3=127.0.0.1:${ports[2]}"
  endpoints="127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"
  (umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$work/peer-secret")
  local cluster_id
  cluster_id="ab-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
  for i in 1 2 3; do
    "$bin/raftlogd" --id "$i" --members "$members" --data-dir "$work/n$i" --flush-mode sync --log-level warn \
      --cluster-id "$cluster_id" --peer-secret-file "$work/peer-secret" \
      </dev/null >"$work/n$i.log" 2>&1 &
    pids+=("$!")
    live_pids+=("$!")
  done
  for _ in $(seq 1 100); do
    "$bin/raftlogctl" status --endpoints "$endpoints" --json 2>/dev/null | grep -q '"role": *"leader"' && break
    sleep 0.2
  done
  "$bin/raftlogctl" status --endpoints "$endpoints" --json 2>/dev/null | grep -q '"role": *"leader"' ||
    echo "ab-cpu: no leader within 20 s ($work/n*.log)" >&2
  local before=() after=()
  for i in 0 1 2; do before+=("$(cpu_ticks "${pids[$i]}")"); done
  /usr/bin/time -f "%U %S" -o "$work/time" timeout $((seconds + 30)) "$bin/raftlog-bench" cluster \
    --endpoints "$endpoints" --server-pids "$(IFS=,; echo "${pids[*]}")" --entry-size 1KiB \
    --duration "$seconds" "$@" >"$work/out" 2>"$work/err" || true
  for i in 0 1 2; do after+=("$(cpu_ticks "${pids[$i]}")"); done
  leader=$("$bin/raftlogctl" status --endpoints "$endpoints" --json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
for line in sys.stdin:
    try:
        node = json.loads(line)
    except ValueError:
        continue
    if node.get("role") == "leader":
        print(node.get("id", ""))
        break' || true)
  /usr/bin/python3 - "$label" "$*" "$(grep '^RESULT' "$work/out" | tail -1)" "$(cat "$work/time")" \
    "${before[*]}" "${after[*]}" "${leader:-0}" <<'EOF'
import os, sys
label, flags, result, times, before, after, leader = sys.argv[1:8]
kv = dict(x.split("=", 1) for x in result.split()[1:] if "=" in x)
entries = int(kv.get("ops", 0)) * int(kv.get("batch", 1))
tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
node_us = [(int(y) - int(x)) * tick_us / max(entries, 1) for x, y in zip(before.split(), after.split())]
client_us = sum(float(t) for t in times.split()[-2:]) * 1e6 / max(entries, 1)
leader = int(leader)
roles = (f"leader={node_us[leader - 1]:.1f} followers=" +
         ",".join(f"{u:.1f}" for i, u in enumerate(node_us) if i != leader - 1)) if leader else "leader=?"
print(f"{label:6s} [{flags}] entries/s={kv.get('entries_per_s', '?')} p50_ms={kv.get('p50_ms', '?')} "
      f"p99_ms={kv.get('p99_ms', '?')} server_us_per_entry={kv.get('server_cpu_us_per_entry', '?')} "
      f"({roles}) client_us_per_entry={client_us:.1f} failures={kv.get('failures', '?')}", flush=True)
EOF
  stop_nodes
  rm -rf "$work"
}

for round in $(seq 1 "$rounds"); do
  for cell in "${cells[@]}"; do
    read -r -a flags <<<"$cell"
    run_cell "$a" "A r$round" "${flags[@]}"
    run_cell "$b" "B r$round" "${flags[@]}"
  done
done
