#!/usr/bin/env bash
# raftlog against etcd 3.4 on this machine, one system at a time, same load generator (raftlog-bench),
# same durability (every acknowledged write fsynced on a majority of 3 nodes), loopback only.
#
#   bench/compare-etcd.sh [--duration S] [--clients 1,16,64,256] [--rounds R] [--trials N] [--batch B]
#                         [--batch-clients N] [--out DIR] [--keep]
#   bench/compare-etcd.sh --soak SECONDS [--retention-max-bytes BYTES]
#                                             (raftlog only: RSS over a long 64-client run)
#
#   --duration S       seconds per load cell (default 8)
#   --clients LIST     concurrent closed-loop clients per cell (default 1,16,64,256)
#   --rounds R         etcd, raftlog, etcd, raftlog, ...: R rounds of load cells (default 1); the report
#                      averages them, so slow drifts of a shared machine hit both systems alike
#   --trials N         leader kill -9 trials per system, after the last round (default 5)
#   --batch B          entries per Append in the batched raftlog cell (default 64), --batch-clients N (16)
#   --no-nats          skip NATS JetStream (by default each round also runs the load cells against a
#                      3-node JetStream cluster, stream with 3 replicas: the issue's second reference)
#   raftlog cells run twice: the client library's default (the clients, one Client each, share one
#   AppendStream call per node, and appends waiting together leave in one message) and each client
#   sending unary Append calls (the per-call gRPC cost the stream avoids).
#   --producer-lanes L each raftlog cell runs once more with the clients sharing one client::Producer
#                      of L lanes (the library coalesces their one-entry appends; default 1, 0 = skip)
#   --out DIR          where results.txt (every RESULT line), table.txt and compare-etcd.png (throughput
#                      and p99 against clients) go (default /tmp/raftlog-compare-etcd-out)
#   --keep             keep the work directory (server data and logs) instead of removing it
#   --retention-max-bytes BYTES  passed to every raftlogd (default 0: no limit), so that a long soak's
#                      disk use stays bounded; --segment-bytes BYTES sets raftlogd's --segment-size
#
# Needs a build (BUILD_DIR, default build/). Installs etcd-server, etcd-client and python3-matplotlib
# with apt-get when missing. Work directory: a fresh /tmp/raftlog-compare-etcd.XXXXXX.
# Every wait is bounded; every load cell stops by itself. See docs/benchmarks.md.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
bin=$repo/${BUILD_DIR:-build}/bin
duration=8
clients=1,16,64,256
trials=5
rounds=1
batch=64
batch_clients=16
producer_lanes=1
nats=1
out=/tmp/raftlog-compare-etcd-out
keep=0
soak=0
retention_max_bytes=0
segment_bytes=""
raftlog_metrics_ports=()  # the soak's metrics endpoints, one per node

usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
die() { echo "compare-etcd: $*" >&2; exit 1; }
log() { echo "== $(date -u +%H:%M:%S) $*" >&2; }

while (($# > 0)); do
  case "$1" in
    --duration) duration=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    --trials) trials=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --batch-clients) batch_clients=$2; shift 2 ;;
    --producer-lanes) producer_lanes=$2; shift 2 ;;
    --no-nats) nats=0; shift ;;
    --out) out=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --soak) soak=$2; shift 2 ;;
    --retention-max-bytes) retention_max_bytes=$2; shift 2 ;;
    --segment-bytes) segment_bytes=$2; shift 2 ;;
    -h|--help) usage ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
in_range() { [[ "$1" =~ ^[0-9]+$ ]] && (($1 >= $2 && $1 <= $3)); }
in_range "$duration" 1 600 || die "--duration must be 1..600"
in_range "$trials" 1 50 || die "--trials must be 1..50"
in_range "$rounds" 1 10 || die "--rounds must be 1..10"
in_range "$soak" 0 3600 || die "--soak must be 0..3600 seconds"
in_range "$producer_lanes" 0 64 || die "--producer-lanes must be 0..64"
[[ "$clients" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--clients must be a comma-separated list of numbers"
for tool in raftlog-bench raftlogd raftlogctl; do
  [[ -x "$bin/$tool" ]] || die "no $bin/$tool: build first (BUILD_DIR=build bash scripts/build.sh)"
done

# --- installation on demand (not in scripts/install-deps.sh: CI never runs this script) -------------
apt_install() {
  local runner=()
  ((EUID == 0)) || runner=(sudo)
  DEBIAN_FRONTEND=noninteractive "${runner[@]}" apt-get install -y --no-install-recommends "$@" >&2 ||
    die "apt-get install $* failed"
}
if ((soak == 0)) && ! { command -v etcd && command -v etcdctl; } >/dev/null; then
  log "installing etcd 3.4 from Debian"
  apt_install etcd-server etcd-client
fi
if ((soak == 0 && nats)) && ! command -v nats-server >/dev/null; then
  log "installing nats-server 2.9 from Debian"
  apt_install nats-server
fi
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  log "installing python3-matplotlib for the plot"
  apt_install python3-matplotlib
fi

mkdir -p "$out"
results=$out/results.txt
: >"$results"
work=$(mktemp -d /tmp/raftlog-compare-etcd.XXXXXX)
started_pids=()  # every server this script started; cleanup kills exactly these

cleanup() {
  local pid
  for pid in "${started_pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for pid in "${started_pids[@]}"; do { wait "$pid"; } 2>/dev/null || true; done
  if ((keep)); then echo "work directory kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

# N free loopback ports (bound together, so they are distinct).
free_ports() {
  /usr/bin/python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# RESULT lines of a raftlog-bench run go to stdout and to $results; progress stays on stderr.
record() { grep '^RESULT ' | tee -a "$results"; }
machine_line() {
  local load1
  load1=$(cut -d' ' -f1 /proc/loadavg)
  echo "RESULT bench=machine phase=$1 load1=$load1 cores=$(nproc) utc=$(date -u +%H:%M:%S)" | tee -a "$results"
}
join_by_comma() { local IFS=,; echo "$*"; }
status_kib() {  # status_kib PID FIELD: a kB field of /proc/PID/status, 0 if the process is gone
  local value
  value=$(awk -v key="$2:" '$1 == key {print $2}' "/proc/$1/status" 2>/dev/null || true)
  echo "${value:-0}"
}
rss_kib() { status_kib "$1" VmRSS; }
# heap_sample PORT: "KIB ROLE" for the node serving metrics on PORT: its
# raftlog_process_heap_in_use_bytes in KiB and L (leader) or F ("0 ?" when it does not answer in 2 s).
heap_sample() {
  /usr/bin/python3 - "$1" <<'PY' 2>/dev/null || echo "0 ?"
import sys, urllib.request
body = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=2).read().decode()
def value(name):
    found = [float(l.split()[-1]) for l in body.splitlines() if l.startswith(name + "{")]
    return found[0] if found else 0.0
print(int(value("raftlog_process_heap_in_use_bytes") / 1024), "L" if value("raftlog_raft_is_leader") == 1 else "F")
PY
}
# bench=rss system=S state=idle|loaded: RSS of the largest process and of all of them, and the total split
# into anonymous memory (heap, stacks: what a leak grows) and file pages (raftlog's mapped segments).
rss_line() {
  local system=$1 state=$2 max=0 total=0 anon=0 file=0 pid kib
  shift 2
  for pid in "$@"; do
    kib=$(rss_kib "$pid")
    total=$((total + kib))
    if ((kib > max)); then max=$kib; fi
    anon=$((anon + $(status_kib "$pid" RssAnon)))
    file=$((file + $(status_kib "$pid" RssFile)))
  done
  echo "RESULT bench=rss system=$system state=$state rss_max_kib=$max rss_total_kib=$total" \
    "anon_total_kib=$anon file_total_kib=$file" | tee -a "$results"
}

# --- etcd ---------------------------------------------------------------------------------------------
etcd_pids=()
etcd_client_ports=()
etcd_peer_ports=()
etcd_initial=""

start_etcd_member() {
  local i=$1
  mkdir -p "$work/etcd"
  # Defaults otherwise: fsync of the WAL on every write batch, 100 ms heartbeat, 1000 ms election timeout.
  etcd --name "e$i" --data-dir "$work/etcd/e$i" \
    --listen-client-urls "http://127.0.0.1:${etcd_client_ports[$i]}" \
    --advertise-client-urls "http://127.0.0.1:${etcd_client_ports[$i]}" \
    --listen-peer-urls "http://127.0.0.1:${etcd_peer_ports[$i]}" \
    --initial-advertise-peer-urls "http://127.0.0.1:${etcd_peer_ports[$i]}" \
    --initial-cluster "$etcd_initial" --initial-cluster-token "raftlog-bench-$$" \
    --initial-cluster-state new --logger zap --log-level warn --log-outputs "$work/etcd/e$i.log" \
    </dev/null >>"$work/etcd/e$i.stdout" 2>&1 &
  etcd_pids[i]=$!
  started_pids+=("$!")
  # The failover trials kill members with SIGKILL on purpose: no "Killed" job notice for them.
  disown "$!"
}

wait_gone() {  # bounded (10 s) wait until a process we started has exited
  for _ in $(seq 1 200); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.05
  done
  return 1
}

etcd_endpoints() {
  local i list=()
  for i in 0 1 2; do list+=("127.0.0.1:${etcd_client_ports[$i]}"); done
  join_by_comma "${list[@]}"
}

# Prints the index (0..2) of the member that reports itself leader; bounded wait of 20 s.
etcd_leader_index() {
  local i line
  for _ in $(seq 1 100); do
    for i in 0 1 2; do
      line=$(ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:${etcd_client_ports[$i]}" --command-timeout=1s \
        endpoint status 2>/dev/null || true)
      # simple output: endpoint, ID, version, db size, is leader, is learner, raft term, ...
      if [[ "$(echo "$line" | awk -F', ' '{print $5}')" == true ]]; then
        echo "$i"
        return 0
      fi
    done
    sleep 0.2
  done
  return 1
}

etcd_wait_healthy() {
  for _ in $(seq 1 100); do
    if ETCDCTL_API=3 etcdctl --endpoints "$(etcd_endpoints)" --command-timeout=1s endpoint health >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.2
  done
  die "etcd did not become healthy within 20 s; see $work/etcd/*.log"
}

start_etcd() {
  log "etcd: starting 3 members on loopback"
  read -r -a ports <<<"$(free_ports 6)"
  etcd_client_ports=("${ports[@]:0:3}")
  etcd_peer_ports=("${ports[@]:3:3}")
  etcd_initial="e0=http://127.0.0.1:${etcd_peer_ports[0]},e1=http://127.0.0.1:${etcd_peer_ports[1]},e2=http://127.0.0.1:${etcd_peer_ports[2]}"
  local i
  for i in 0 1 2; do start_etcd_member "$i"; done
  etcd_wait_healthy
  sleep 1
}

# stop_servers DIR PID...: SIGTERM, a bounded wait, SIGKILL for any that lingers, then remove DIR.
stop_servers() {
  local dir=$1 pid
  shift
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "$@"; do wait_gone "$pid" || kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$dir"
}

stop_etcd() { stop_servers "$work/etcd" "${etcd_pids[@]}"; }

etcd_loads() {
  local c leader pids
  pids=$(join_by_comma "${etcd_pids[@]}")
  rss_line etcd idle "${etcd_pids[@]}"
  machine_line "etcd_load_round_$1"
  for c in ${clients//,/ }; do
    # Every client talks to the leader: a follower would forward the Put (one more hop), which raftlog's
    # client avoids by following leader hints; so both systems are measured leader-direct.
    leader=$(etcd_leader_index) || die "etcd has no leader"
    log "etcd: $c clients x 1 KiB Put for ${duration} s against the leader e$leader"
    "$bin/raftlog-bench" etcd --endpoints "127.0.0.1:${etcd_client_ports[$leader]}" --clients "$c" \
      --value-size 1KiB --duration "$duration" --server-pids "$pids" | record || true
    if [[ "$c" == 64 ]]; then rss_line etcd loaded "${etcd_pids[@]}"; fi
  done
}

etcd_failovers() {
  machine_line etcd_failover
  local trial leader
  for trial in $(seq 1 "$trials"); do
    leader=$(etcd_leader_index) || die "etcd has no leader before failover trial $trial"
    log "etcd: failover trial $trial/$trials, killing e$leader (pid ${etcd_pids[$leader]})"
    "$bin/raftlog-bench" etcd-failover --endpoints "$(etcd_endpoints)" --leader-pid "${etcd_pids[$leader]}" |
      record || true
    wait_gone "${etcd_pids[$leader]}" || die "killed etcd member e$leader (pid ${etcd_pids[$leader]}) did not exit"
    start_etcd_member "$leader"
    etcd_wait_healthy
    sleep 2  # let the restarted member catch up before the next kill
  done
}

# --- raftlog ------------------------------------------------------------------------------------------
raftlog_pids=()
raftlog_endpoints=""

start_raftlog() {
  local ports members="" i
  read -r -a ports <<<"$(free_ports 3)"
  raftlog_endpoints=""
  for i in 1 2 3; do
    members+="${members:+,}$i=127.0.0.1:${ports[$((i - 1))]}"
    raftlog_endpoints+="${raftlog_endpoints:+,}127.0.0.1:${ports[$((i - 1))]}"
  done
  mkdir -p "$work/raftlog"
  # Plaintext peers authenticate with a shared secret (docs/security.md); each run is its own cluster.
  [[ -s "$work/raftlog/peer-secret" ]] || (umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$work/raftlog/peer-secret")
  local cluster_id
  cluster_id="bench-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
  # The soak reads each node's heap figures from its metrics endpoint.
  local metrics_flags=()
  if ((soak > 0)); then read -r -a raftlog_metrics_ports <<<"$(free_ports 3)"; fi
  for i in 1 2 3; do
    if ((soak > 0)); then metrics_flags=(--metrics-addr "127.0.0.1:${raftlog_metrics_ports[$((i - 1))]}"); fi
    # sync flush (the default, spelled out): an entry counts on a replica only once fsynced there.
    "$bin/raftlogd" --id "$i" --members "$members" --data-dir "$work/raftlog/n$i" --flush-mode sync \
      --cluster-id "$cluster_id" --peer-secret-file "$work/raftlog/peer-secret" \
      --retention-max-bytes "$retention_max_bytes" ${segment_bytes:+--segment-size "$segment_bytes"} \
      "${metrics_flags[@]}" --log-level warn </dev/null >>"$work/raftlog/n$i.log" 2>&1 &
    raftlog_pids[i - 1]=$!
    started_pids+=("$!")
  done

  for _ in $(seq 1 100); do
    if "$bin/raftlogctl" status --endpoints "$raftlog_endpoints" --json 2>/dev/null | grep -q '"role": *"leader"'; then
      return 0
    fi
    sleep 0.2
  done
  die "raftlog elected no leader within 20 s; see $work/raftlog/n*.log"
}

stop_raftlog() {
  local pid
  for pid in "${raftlog_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${raftlog_pids[@]}"; do { wait "$pid"; } 2>/dev/null || true; done
  rm -rf "$work/raftlog"
}

raw_disk() {  # $1 = streams; the disk's limit at the client batch size (entries of 56-byte header + 1 KiB)
  local seconds=$(((duration + 1) / 2))
  ((seconds >= 2)) || seconds=2
  rm -rf "$work/raw"
  log "raw disk: $1 stream(s) of write + fdatasync of $((batch * (1024 + 56))) B batches for $seconds s"
  "$bin/raftlog-bench" raw --dir "$work/raw" --streams "$1" --max-bytes 1GiB --batch-bytes "$((batch * (1024 + 56)))" \
    --seconds "$seconds" | record || true
}

raftlog_loads() {
  local pids c
  pids=$(join_by_comma "${raftlog_pids[@]}")
  rss_line raftlog idle "${raftlog_pids[@]}"
  machine_line "raftlog_load_round_$1"
  for c in ${clients//,/ }; do
    log "raftlog: $c clients x 1 KiB append, the library default (one AppendStream per node, shared), for ${duration} s"
    "$bin/raftlog-bench" cluster --endpoints "$raftlog_endpoints" --clients "$c" --entry-size 1KiB \
      --duration "$duration" --server-pids "$pids" --append-rpc stream | record || true
    if [[ "$c" == 64 ]]; then rss_line raftlog loaded "${raftlog_pids[@]}"; fi
    log "raftlog: $c clients x 1 KiB append, one unary Append call each, for ${duration} s"
    "$bin/raftlog-bench" cluster --endpoints "$raftlog_endpoints" --clients "$c" --entry-size 1KiB \
      --duration "$duration" --server-pids "$pids" --append-rpc unary | record || true
    if ((producer_lanes > 0)); then
      log "raftlog: $c clients x 1 KiB append through one Producer of $producer_lanes lanes for ${duration} s"
      "$bin/raftlog-bench" cluster --endpoints "$raftlog_endpoints" --clients "$c" --entry-size 1KiB \
        --duration "$duration" --server-pids "$pids" --producer-lanes "$producer_lanes" | record || true
    fi
  done
  # The raw loop runs right before and right after the batched cell (the cluster idle), so the disk's
  # limit is taken in the same minute as the figure compared with it.
  raw_disk 1
  log "raftlog: $batch_clients clients x $batch entries of 1 KiB per Append for ${duration} s"
  "$bin/raftlog-bench" cluster --endpoints "$raftlog_endpoints" --clients "$batch_clients" --batch "$batch" \
    --entry-size 1KiB --duration "$duration" --server-pids "$pids" | record || true
  raw_disk 1
  raw_disk 3
}

raftlog_failovers() {
  machine_line raftlog_failover
  log "raftlog: failover, $trials trials"
  "$bin/raftlog-bench" failover --trials "$trials" --writers 8 | record || true
}

# --- NATS JetStream --------------------------------------------------------------------------------------
# Three nats-server processes in one cluster, JetStream on, file storage; the bench creates the stream
# with 3 replicas. NATS 2.9 has no per-message fsync (`sync_interval` arrived in 2.10): an acknowledged
# publish is in the page cache of a majority, not on disk, so its figures are an upper reference.
nats_pids=()
nats_client_ports=()

start_nats() {
  log "nats: starting 3 JetStream servers on loopback"
  read -r -a ports <<<"$(free_ports 6)"
  nats_client_ports=("${ports[@]:0:3}")
  local route_ports=("${ports[@]:3:3}") i j routes
  mkdir -p "$work/nats"
  for i in 0 1 2; do
    routes=()
    for j in 0 1 2; do ((j == i)) || routes+=("nats-route://127.0.0.1:${route_ports[$j]}"); done
    cat >"$work/nats/n$i.conf" <<EOF
server_name: n$i
listen: 127.0.0.1:${nats_client_ports[$i]}
jetstream { store_dir: "$work/nats/n$i" }
cluster { name: raftlog-bench, listen: 127.0.0.1:${route_ports[$i]}, routes: [$(join_by_comma "${routes[@]}")] }
EOF
    nats-server -c "$work/nats/n$i.conf" </dev/null >>"$work/nats/n$i.log" 2>&1 &
    nats_pids[i]=$!
    started_pids+=("$!")
  done
  sleep 2
}

stop_nats() { stop_servers "$work/nats" "${nats_pids[@]}"; }

nats_loads() {
  local c pids endpoints
  pids=$(join_by_comma "${nats_pids[@]}")
  endpoints=$(join_by_comma "${nats_client_ports[@]/#/127.0.0.1:}")
  rss_line nats idle "${nats_pids[@]}"
  machine_line "nats_load_round_$1"
  for c in ${clients//,/ }; do
    log "nats: $c clients x 1 KiB JetStream publish (R3) for ${duration} s"
    "$bin/raftlog-bench" nats --endpoints "$endpoints" --clients "$c" --entry-size 1KiB \
      --duration "$duration" --server-pids "$pids" | record || true
    if [[ "$c" == 64 ]]; then rss_line nats loaded "${nats_pids[@]}"; fi
  done
}

# --- soak: RSS of a loaded raftlog cluster over a long run --------------------------------------------
run_soak() {
  log "soak: 64 clients against raftlog for $soak s, RSS sampled every 10 s"
  start_raftlog
  local pids
  pids=$(join_by_comma "${raftlog_pids[@]}")
  rss_line raftlog idle "${raftlog_pids[@]}"
  "$bin/raftlog-bench" cluster --endpoints "$raftlog_endpoints" --clients 64 --entry-size 1KiB \
    --duration "$soak" --server-pids "$pids" >"$work/soak.out" 2>"$work/soak.err" &
  local load_pid=$! rss=() anon=() file=() heap=() elapsed=0 r a f h pid port node_heap node_role per_node
  local soak_started=$SECONDS
  # Bounded: at most soak/10 + 2 samples; stops when the load ends.
  while kill -0 "$load_pid" 2>/dev/null && ((elapsed <= soak + 10)); do
    sleep 10
    elapsed=$((SECONDS - soak_started))  # wall time: sampling itself takes a while under load
    r=0 a=0 f=0 h=0
    for pid in "${raftlog_pids[@]}"; do
      r=$((r + $(rss_kib "$pid")))
      a=$((a + $(status_kib "$pid" RssAnon)))
      f=$((f + $(status_kib "$pid" RssFile)))
    done
    per_node=""
    for port in "${raftlog_metrics_ports[@]}"; do
      read -r node_heap node_role <<<"$(heap_sample "$port")"
      h=$((h + node_heap))
      per_node+="${per_node:+/}$node_heap$node_role"
    done
    rss+=("$r") anon+=("$a") file+=("$f") heap+=("$h")
    echo "soak t=${elapsed}s rss_total_kib=$r anon_total_kib=$a file_total_kib=$f heap_in_use_total_kib=$h" \
      "heap_in_use_kib_by_node=$per_node (L: leader)" >&2
  done
  wait "$load_pid" || true
  record <"$work/soak.out" || true
  rss_line raftlog loaded "${raftlog_pids[@]}"
  stop_raftlog
  ((${#anon[@]} >= 4)) || die "soak too short for a growth figure (need >= 40 s)"
  # Growth is judged on anonymous memory after the first quarter (caches, arenas and gRPC pools settle
  # during warm-up). File pages are the mapped log segments: they grow with the data written, belong
  # to the page cache and are reclaimable, so they are reported but are not a leak.
  local q=$((${#anon[@]} / 4)) max=0 s
  for s in "${anon[@]}"; do if ((s > max)); then max=$s; fi; done
  echo "RESULT bench=soak seconds=$soak samples=${#anon[@]} anon_after_warmup_kib=${anon[$q]}" \
    "anon_end_kib=${anon[-1]} anon_max_kib=$max" \
    "anon_growth_pct=$(awk -v a="${anon[$q]}" -v b="${anon[-1]}" 'BEGIN {printf "%.1f", (b - a) * 100 / a}')" \
    "rss_after_warmup_kib=${rss[$q]} rss_end_kib=${rss[-1]} file_end_kib=${file[-1]}" \
    "heap_in_use_after_warmup_kib=${heap[$q]} heap_in_use_end_kib=${heap[-1]}" \
    "heap_growth_pct=$(awk -v a="${heap[$q]}" -v b="${heap[-1]}" 'BEGIN {printf "%.1f", (a > 0 ? (b - a) * 100 / a : 0)}')" |
    tee -a "$results"
}

if ((soak > 0)); then
  machine_line soak
  run_soak
  exit 0
fi
machine_line start
for round in $(seq 1 "$rounds"); do
  start_etcd
  etcd_loads "$round"
  if ((round == rounds)); then etcd_failovers; fi
  stop_etcd
  if ((nats)); then
    start_nats
    nats_loads "$round"
    stop_nats
  fi
  log "raftlog: starting 3 nodes on loopback (sync flush)"
  start_raftlog
  sleep 1
  raftlog_loads "$round"
  stop_raftlog
done
raftlog_failovers
machine_line end
/usr/bin/python3 "$here/compare_report.py" --results "$results" --plot "$out/compare-etcd.png" |
  tee "$out/table.txt"
echo "outputs in $out: results.txt table.txt compare-etcd.png" >&2
