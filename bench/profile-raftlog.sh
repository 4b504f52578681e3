#!/usr/bin/env bash
# Profiles the raftlog leader under the 64-client unary 1 KiB load (the cell issue 7 targets):
#
#   bench/profile-raftlog.sh [--clients N] [--seconds S] [--all] [--keep-data] [--out DIR (default /tmp/raftlog-profile-out)]
#
# Starts 3 raftlogd (sync flush) on loopback, runs `raftlog-bench cluster` for S + 8 seconds and, from
# second 4, records on the leader for S seconds (default 8):
#   - perf record -g --call-graph dwarf  -> DIR/breakdown.txt (bench/perf_breakdown.py: per thread,
#     per activity) and DIR/top-symbols.txt
#   - per-thread CPU time and context switches from /proc      -> DIR/threads.txt
#   - perf stat syscall counts (msync, futex, sendmsg, ...)    -> DIR/syscalls.txt
#   - perf trace of msync durations on the leader              -> DIR/msync.txt
# With --all, also each follower and the load generator (`raftlog-bench`, i.e. the client library),
# recorded the same way at the same time -> DIR/breakdown-follower-N.txt, DIR/breakdown-client.txt
# (and their top-symbols-*.txt). Four recorders at once cost CPU: take the totals per append from
# bench/ab-cpu.sh, the split per layer from these. With --keep-data the perf.data files are kept in
# DIR (for `perf report --children -i DIR/perf.data`).
# Needs perf (Debian: linux-perf) and root (or perf_event_paranoid <= 1). Every wait is bounded.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
bin=$repo/${BUILD_DIR:-build}/bin
clients=64
seconds=8
all=false
keep_data=false
out=/tmp/raftlog-profile-out

die() { echo "profile-raftlog: $*" >&2; exit 1; }
while (($# > 0)); do
  case "$1" in
    --clients) clients=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --all) all=true; shift ;;
    --keep-data) keep_data=true; shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
{ [[ "$seconds" =~ ^[0-9]+$ ]] && ((seconds >= 2 && seconds <= 120)); } || die "--seconds must be 2..120"
command -v perf >/dev/null || die "no perf (apt-get install linux-perf)"
for tool in raftlog-bench raftlogd raftlogctl; do [[ -x "$bin/$tool" ]] || die "no $bin/$tool: build first"; done
mkdir -p "$out"
work=$(mktemp -d /tmp/raftlog-profile.XXXXXX)
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do { wait "$pid"; } 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

read -r -a ports <<<"$(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(3)]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))')"
members="1=127.0.0.1:${ports[0]},2=127.0.0.1:${ports[1]},3=127.0.0.1:${ports[2]}"
endpoints="127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"
# Plaintext peers authenticate with a shared secret (docs/security.md).
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$work/peer-secret")
cluster_id="profile-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
for i in 1 2 3; do
  "$bin/raftlogd" --id "$i" --members "$members" --data-dir "$work/n$i" --flush-mode sync --log-level warn \
    --cluster-id "$cluster_id" --peer-secret-file "$work/peer-secret" \
    </dev/null >"$work/n$i.log" 2>&1 &
  pids+=("$!")
done
leader=""
for _ in $(seq 1 100); do
  leader=$("$bin/raftlogctl" status --endpoints "$endpoints" --json 2>/dev/null |
    /usr/bin/python3 -c '
import json, sys
for line in sys.stdin:  # one JSON object per node
    try:
        node = json.loads(line)
    except ValueError:
        continue
    if node.get("role") == "leader":
        print(node.get("id", ""))
        break' || true)
  [[ -n "$leader" ]] && break
  sleep 0.2
done
[[ -n "$leader" ]] || die "no leader within 20 s"
lpid=${pids[$((leader - 1))]}
echo "leader: node $leader, pid $lpid" >&2

thread_snapshot() {  # tid comm cpu_ticks voluntary_switches involuntary_switches
  local t
  for t in /proc/"$1"/task/*; do
    echo "$(basename "$t") $(tr ' ' '_' <"$t/comm") $(awk '{s = $0; sub(/.*\) /, "", s); split(s, f, " "); print f[12] + f[13]}' "$t/stat") $(awk '/^voluntary_ctxt/ {v = $2} /^nonvoluntary_ctxt/ {n = $2} END {print v, n}' "$t/status")"
  done 2>/dev/null | sort
}

"$bin/raftlog-bench" cluster --endpoints "$endpoints" --clients "$clients" --entry-size 1KiB \
  --duration $((seconds + 8)) --server-pids "$(IFS=,; echo "${pids[*]}")" >"$out/load.txt" 2>"$work/load.err" &
load=$!
sleep 4
thread_snapshot "$lpid" >"$work/t0"
perf stat -e 'syscalls:sys_enter_msync,syscalls:sys_enter_fdatasync,syscalls:sys_enter_futex,syscalls:sys_enter_sendmsg,syscalls:sys_enter_recvmsg,syscalls:sys_enter_epoll_wait,context-switches' \
  -p "$lpid" -o "$out/syscalls.txt" -- sleep "$seconds" &
stat=$!
perf trace -p "$lpid" -e msync -o "$work/msync.trace" -- sleep "$seconds" >/dev/null 2>&1 &
trace=$!
others=()  # "label pid" of the other processes recorded with --all
if $all; then
  for i in 1 2 3; do
    ((i == leader)) || others+=("follower-$i ${pids[$((i - 1))]}")
  done
  others+=("client $load")
fi
recorders=()
for ((k = 0; k < ${#others[@]}; k++)); do
  read -r label pid <<<"${others[$k]}"
  perf record -F 499 -g --call-graph dwarf,16384 -p "$pid" -o "$work/perf-$label.data" -- sleep "$seconds" \
    2>"$work/record-$label.err" &
  recorders+=("$!")
done
perf record -F 499 -g --call-graph dwarf,16384 -p "$lpid" -o "$work/perf.data" -- sleep "$seconds" 2>"$work/record.err"
wait "$stat" "$trace" ${recorders[@]+"${recorders[@]}"} || true
thread_snapshot "$lpid" >"$work/t1"
wait "$load" || true
join "$work/t0" "$work/t1" | awk -v s="$seconds" '{printf "%-8s %-18s cpu_ms_per_s=%6.1f voluntary_switches_per_s=%7.1f involuntary_per_s=%6.1f\n", $1, $2, ($7 - $3) * 10 / s, ($8 - $4) / s, ($9 - $5) / s}' |
  sort -t= -k2 -nr >"$out/threads.txt"
/usr/bin/python3 - "$work/msync.trace" >"$out/msync.txt" <<'EOF'
import re, sys
d = sorted(float(m.group(1)) for line in open(sys.argv[1]) if "msync" in line
           for m in [re.search(r"\(\s*([0-9.]+) ms\)", line)] if m)
if d:
    print(f"msync calls={len(d)} p50_ms={d[len(d) // 2]:.2f} p90_ms={d[int(len(d) * .9)]:.2f} "
          f"p99_ms={d[int(len(d) * .99)]:.2f} max_ms={d[-1]:.2f}")
EOF
perf script -i "$work/perf.data" -F tid,comm,ip,sym,dso 2>/dev/null | /usr/bin/python3 "$here/perf_breakdown.py" >"$out/breakdown.txt"
perf report -i "$work/perf.data" --no-children --sort dso,sym -g none --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' |
  head -60 >"$out/top-symbols.txt" || true  # head closing the pipe early is not a failure
for ((k = 0; k < ${#others[@]}; k++)); do
  read -r label pid <<<"${others[$k]}"
  perf script -i "$work/perf-$label.data" -F tid,comm,ip,sym,dso 2>/dev/null |
    /usr/bin/python3 "$here/perf_breakdown.py" >"$out/breakdown-$label.txt"
  perf report -i "$work/perf-$label.data" --no-children --sort dso,sym -g none --stdio 2>/dev/null |
    grep -v '^#' | grep -v '^$' | head -60 >"$out/top-symbols-$label.txt" || true
done
if $keep_data; then cp "$work"/perf*.data "$out/"; fi
grep '^RESULT' "$out/load.txt" || true
echo "profile of the leader in $out: breakdown.txt threads.txt syscalls.txt msync.txt top-symbols.txt" >&2
