#!/usr/bin/env bash
# Validates deploy/: Prometheus config, alert rules and their unit tests, YAML style, the Grafana
# dashboard (parses, its PromQL parses, every metric it uses is documented and every documented
# metric is shown), the Kubernetes and Compose files, the Dockerfile's runtime packages, the
# container scripts, and the systemd unit. Registered with ctest as deploy_config_check.
#
#   scripts/check-deploy.sh [--bin-dir DIR] [--metrics-url URL]... [--no-live]
#
# --bin-dir DIR      where raftlogd and raftlogctl are (default: build/bin); used for the Dockerfile's
#                    library check, the container script tests, the systemd check and the live scrape
# --metrics-url URL  also check that every metric the dashboard and alerts use is in this scrape
#                    (repeatable; give every node's, or at least the leader's: peer series exist only there)
# --no-live          without --metrics-url, the script starts a 3-node cluster on 127.0.0.1 from
#                    --bin-dir and checks its scrapes, when raftlogd has --metrics-addr; this skips that
#
# Tools it needs (scripts/install-deps.sh installs them): promtool (prometheus), yamllint, python3-yaml,
# and shellcheck; docker-compose and systemd-analyze are used when they work and skipped otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

bin_dir=$repo/build/bin
metrics_urls=()
live=1
while (($# > 0)); do
  case "$1" in
    --bin-dir) bin_dir=$2; shift 2 ;;
    --metrics-url) metrics_urls+=("$2"); shift 2 ;;
    --no-live) live=0; shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "check-deploy: unknown argument $1" >&2; exit 2 ;;
  esac
done

work=$(mktemp -d)
# Every raftlogd this script starts is listed in $work/pids (steps run in subshells, so a shell
# array would lose them) and stopped on exit: SIGTERM, up to 10 s to flush, then SIGKILL.
track_pid() { echo "$1" >>"$work/pids"; }
cleanup() {
  local pid attempt
  if [[ -f "$work/pids" ]]; then
    while read -r pid; do kill -TERM "$pid" 2>/dev/null || true; done <"$work/pids"
    while read -r pid; do
      for attempt in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
    done <"$work/pids"
  fi
  rm -rf "$work"
}
trap cleanup EXIT

passed=0
failed=0
skipped=0
# step NAME COMMAND...: runs one check, shows its output when it fails (and its "note:" lines).
step() {
  local name=$1 started=$SECONDS; shift
  # A subshell, so that a step dying on an unset variable fails that step, not the whole script.
  if ("$@") >"$work/step.out" 2>&1; then
    passed=$((passed + 1)); echo "PASS  $name ($((SECONDS - started)) s)"
    grep 'note:' "$work/step.out" | sed 's/^/      /' || true
  else
    failed=$((failed + 1)); echo "FAIL  $name ($((SECONDS - started)) s)"; sed 's/^/      /' "$work/step.out"
  fi
}
skip() { skipped=$((skipped + 1)); echo "SKIP  $1: $2"; }
# free_ports N: N TCP ports on 127.0.0.1 that were free a moment ago.
free_ports() {
  python3 -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks: s.close()' "$1"
}

for tool in promtool yamllint shellcheck python3; do
  command -v "$tool" >/dev/null || { echo "check-deploy: $tool is missing (run scripts/install-deps.sh)" >&2; exit 1; }
done
python3 -c 'import yaml' 2>/dev/null || { echo "check-deploy: python3-yaml is missing (run scripts/install-deps.sh)" >&2; exit 1; }
checker=(python3 deploy/ci/check_deploy.py)

# ---- YAML and shell style
step "yamllint deploy/" yamllint --strict -c deploy/.yamllint deploy
step "shellcheck container scripts and this script" shellcheck deploy/docker/entrypoint.sh deploy/docker/healthcheck.sh deploy/docker/k8s-start.sh deploy/k8s/raftlog-members scripts/check-deploy.sh

# ---- Prometheus: every config (each also loads alerts.yml), the rules, and their unit tests
for config in deploy/prometheus/prometheus*.yml; do
  step "promtool check config $config" promtool check config "$config"
done
step "promtool check rules alerts.yml" promtool check rules deploy/prometheus/alerts.yml
step "promtool test rules alerts_test.yml" promtool test rules deploy/prometheus/alerts_test.yml

# ---- Grafana: JSON, metric names against docs/metrics.md, and every panel's PromQL through promtool
step "dashboard and alerts use documented metrics; dashboard shows all" "${checker[@]}" metrics
dashboard_rules() {
  "${checker[@]}" dashboard-rules "$work/dashboard-rules.yml" && promtool check rules "$work/dashboard-rules.yml"
}
step "dashboard PromQL parses (promtool)" dashboard_rules
step "grafana provisioning files parse" python3 -c '
import sys, yaml
for path in sys.argv[1:]:
    doc = yaml.safe_load(open(path))
    assert doc.get("apiVersion") == 1, path + ": apiVersion must be 1"
    assert doc.get("datasources") or doc.get("providers"), path + ": no datasources or providers"
' deploy/grafana/provisioning/datasources/*.yml deploy/grafana/provisioning/dashboards/*.yml

# ---- Kubernetes and Compose structure
step "kubernetes manifests fit together" "${checker[@]}" k8s
# The membership check refuses what could never start (review of bootstrap5, notes 8 and 9): fed
# ConfigMaps of its own, since the shipped one is right.
step "kubernetes membership check refuses one founder and a new cluster's wrong next-id" python3 -c '
import sys
sys.path.insert(0, "deploy/ci")
import check_deploy as c
def problems(ordinals, next_id):
    p = c.Problems("k8s-selftest")
    maps = {"raftlog-members": {"data": {"bootstrap-ordinals": ordinals, "join-ids": "",
                                          "join-seeds": "a:1", "next-id": next_id}}}
    c.check_k8s_membership(maps, [], 3, p)
    return " | ".join(p.items)
assert problems("0 1 2", "4") == "", problems("0 1 2", "4")
one = problems("0", "2")
assert "a one-founder StatefulSet can never start" in one, one
high = problems("0 1 2", "10")
assert "if this is a new cluster, next-id must be 4" in high, high
'
step "compose members, volumes and scrape targets agree" "${checker[@]}" compose
if command -v docker-compose >/dev/null; then
  step "docker-compose config" docker-compose -f deploy/compose/docker-compose.yml config -q
elif docker compose version >/dev/null 2>&1; then
  step "docker compose config" docker compose -f deploy/compose/docker-compose.yml config -q
else
  skip "compose schema" "neither docker-compose nor the docker compose plugin is installed"
fi

# ---- Docker image: runtime packages cover the binaries' libraries; the container scripts behave
if [[ -x "$bin_dir/raftlogd" && -x "$bin_dir/raftlogctl" ]]; then
  step "Dockerfile runtime packages provide every library of the binaries" "${checker[@]}" docker "$bin_dir"
else
  skip "Dockerfile runtime packages" "no binaries in $bin_dir (build first)"
fi

# The entry point with stand-ins for hostname and raftlogd that print what they were given.
entrypoint_case() {
  local expected=$1 host=$2; shift 2
  local fake=$work/fake-bin
  mkdir -p "$fake"
  printf '#!/bin/sh\necho %s\n' "$host" >"$fake/hostname"
  printf '#!/bin/sh\necho "raftlogd $*"\n' >"$fake/raftlogd"
  chmod +x "$fake/hostname" "$fake/raftlogd"
  local got
  got=$(env -i PATH="$fake:/usr/bin:/bin" "$@" sh deploy/docker/entrypoint.sh --members x)
  if [[ "$got" != "$expected" ]]; then
    echo "host $host, env $*: expected '$expected', got '$got'"
    return 1
  fi
}
entrypoint_cases() {
  echo 'id = 9' >"$work/node.conf"
  entrypoint_case "raftlogd --id=1 --data-dir=/var/lib/raftlog --members x" raftlog-0 &&
    entrypoint_case "raftlogd --id=3 --data-dir=/var/lib/raftlog --members x" raftlog-2 &&
    entrypoint_case "raftlogd --id=12 --data-dir=/var/lib/raftlog --members x" my-log-11 &&
    entrypoint_case "raftlogd --id=2 --data-dir=/var/lib/raftlog --members x" raftlog-0 RAFTLOG_ID=2 &&
    entrypoint_case "raftlogd --data-dir=/var/lib/raftlog --members x" raftlog1 &&
    entrypoint_case "raftlogd --data-dir=/data --members x" db RAFTLOG_DATA_DIR=/data &&
    entrypoint_case "raftlogd --config=$work/node.conf --data-dir=/var/lib/raftlog --members x" host RAFTLOG_CONFIG="$work/node.conf" &&
    ! entrypoint_case "unreadable config is refused" host RAFTLOG_CONFIG=/nonexistent/raftlog.conf 2>/dev/null
}
step "container entry point derives the node id" entrypoint_cases

# The health probe script against real nodes: a single-node cluster (its own leader, SERVING),
# node 1 of a 3-node cluster whose peers never start (answers, knows no leader), and a closed port.
health_expect() {
  local expected=$1 port=$2 rc=0
  PATH="$bin_dir:$PATH" RAFTLOG_CLIENT_PORT=$port sh deploy/docker/healthcheck.sh || rc=$?
  if ((rc != expected)); then echo "healthcheck on port $port: exit $rc, expected $expected"; return 1; fi
}
health_cases() {
  local ports pid_leader pid_alone rc=0 attempt
  read -r -a ports <<<"$(free_ports 4)"
  mkdir -p "$work/health/leader" "$work/health/alone"
  "$bin_dir/raftlogd" --id 1 --members "1=127.0.0.1:${ports[0]}" --data-dir "$work/health/leader" \
    --segment-size 1MiB --max-entry-size 64KiB --bootstrap-new-cluster >"$work/health/leader.log" 2>&1 </dev/null &
  pid_leader=$!; track_pid "$pid_leader"
  (umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$work/health/peer-secret")
  "$bin_dir/raftlogd" --id 1 --members "1=127.0.0.1:${ports[1]},2=127.0.0.1:${ports[2]},3=127.0.0.1:${ports[3]}" \
    --cluster-id check-deploy-alone --peer-secret-file "$work/health/peer-secret" \
    --data-dir "$work/health/alone" --segment-size 1MiB --max-entry-size 64KiB >"$work/health/alone.log" 2>&1 </dev/null &
  pid_alone=$!; track_pid "$pid_alone"
  # Bounded waits (20 s each): the single node elects itself; the lone node answers status requests.
  for attempt in $(seq 1 100); do
    health_expect 0 "${ports[0]}" >/dev/null 2>&1 && break
    ((attempt < 100)) || { echo "single-node cluster never became SERVING"; cat "$work/health/leader.log"; return 1; }
    sleep 0.2
  done
  for attempt in $(seq 1 100); do
    "$bin_dir/raftlogctl" status --endpoints "127.0.0.1:${ports[1]}" --timeout-ms 1000 >/dev/null 2>&1 && break
    ((attempt < 100)) || { echo "lone node never answered"; cat "$work/health/alone.log"; return 1; }
    sleep 0.2
  done
  health_expect 1 "${ports[1]}" || rc=1
  health_expect 1 "${ports[2]}" || rc=1
  kill -TERM "$pid_leader" "$pid_alone"
  return "$rc"
}
if [[ -x "$bin_dir/raftlogd" && -x "$bin_dir/raftlogctl" ]]; then
  step "container health probe: healthy only with a leader" health_cases
else
  skip "container health probe" "no binaries in $bin_dir"
fi

# ---- systemd unit: verified with the real binary path swapped in, when systemd-analyze works here
systemd_verify() {
  # Any warning (an unknown key, a bad value) fails: systemd-analyze only prints them and exits 0.
  local out
  out=$(systemd-analyze verify --man=no "$1" 2>&1) || { echo "$out"; return 1; }
  if [[ -n "$out" ]]; then echo "$out"; return 1; fi
}
if ! command -v systemd-analyze >/dev/null; then
  skip "systemd unit" "systemd-analyze is not installed"
elif [[ ! -x "$bin_dir/raftlogd" ]]; then
  skip "systemd unit" "no $bin_dir/raftlogd to stand in for /usr/local/bin/raftlogd"
else
  mkdir -p "$work/units"
  printf '[Service]\nExecStart=/bin/true\n' >"$work/units/probe.service"
  if ! systemd_verify "$work/units/probe.service" >/dev/null 2>&1; then
    skip "systemd unit" "systemd-analyze verify does not work in this environment"
  else
    sed "s|/usr/local/bin/raftlogd|$bin_dir/raftlogd|" deploy/systemd/raftlogd.service >"$work/units/raftlogd.service"
    step "systemd-analyze verify raftlogd.service" systemd_verify "$work/units/raftlogd.service"
  fi
fi

# ---- metric names in a real scrape: given URLs, or a 3-node cluster on loopback started here
start_live_cluster() {
  local ports metrics_ports members="" id
  read -r -a ports <<<"$(free_ports 6)"
  metrics_ports=("${ports[@]:3:3}")
  for id in 1 2 3; do members+="${members:+,}$id=127.0.0.1:${ports[$((id - 1))]}"; done
  mkdir -p "$work/live"
  (umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$work/live/peer-secret")
  for id in 1 2 3; do
    mkdir -p "$work/live/n$id"
    "$bin_dir/raftlogd" --id "$id" --members "$members" --data-dir "$work/live/n$id" \
      --cluster-id check-deploy-live --peer-secret-file "$work/live/peer-secret" \
      --metrics-addr "127.0.0.1:${metrics_ports[$((id - 1))]}" --segment-size 1MiB --max-entry-size 64KiB \
      >"$work/live/n$id.log" 2>&1 </dev/null &
    track_pid $!
    metrics_urls+=("http://127.0.0.1:${metrics_ports[$((id - 1))]}/metrics")
  done
  live_endpoints=${members//[0-9]=/}
}
if ((${#metrics_urls[@]} == 0)) && ((live)); then
  if [[ ! -x "$bin_dir/raftlogd" ]]; then
    skip "live scrape" "no $bin_dir/raftlogd"
  # Not grep -q: it exits at the first match, raftlogd then dies of SIGPIPE, and pipefail made this
  # branch skip the live scrape every time.
  elif ! "$bin_dir/raftlogd" --help 2>&1 | grep -- '--metrics-addr' >/dev/null; then
    skip "live scrape" "$bin_dir/raftlogd has no --metrics-addr yet"
  else
    start_live_cluster
    # Bounded wait for an elected leader, then some traffic so that labelled series exist: appends
    # through every node (followers refuse with NOT_LEADER, the leader commits) and a read.
    if "$bin_dir/raftlogctl" append --endpoints "$live_endpoints" --timeout-ms 20000 --value warm-up >/dev/null; then
      for endpoint in ${live_endpoints//,/ }; do
        "$bin_dir/raftlogctl" append --endpoints "$endpoint" --timeout-ms 2000 --value "via $endpoint" >/dev/null 2>&1 || true
      done
      "$bin_dir/raftlogctl" read --endpoints "$live_endpoints" --from 1 --count 10 >/dev/null 2>&1 || true
      sleep 1  # peer gauges and flush counters settle within a few heartbeats (40 ms each)
    else
      echo "FAIL  live cluster: no leader within 20 s"; failed=$((failed + 1))
      tail -n 5 "$work"/live/n*.log | sed 's/^/      /'
      metrics_urls=()
    fi
  fi
fi
if ((${#metrics_urls[@]} > 0)); then
  step "dashboard and alert metrics exist in the scrape" "${checker[@]}" scrape "${metrics_urls[@]}"
  scrape_lint() {
    local url
    for url in "${metrics_urls[@]}"; do
      python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' "$url" |
        promtool check metrics || return 1
    done
  }
  step "promtool check metrics on the scrapes" scrape_lint
fi

echo "check-deploy: $passed passed, $failed failed, $skipped skipped"
((failed == 0))
