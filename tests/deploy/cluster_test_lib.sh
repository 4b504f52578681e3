# Sourced by the deploy/local/cluster tests (local_cluster_script_test.sh,
# local_cluster_membership_test.sh): the pass/fail bookkeeping and the free-port search they share.
# Expects $dir (the cluster directory) to be set before cluster_processes is called.

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
check() { local what=$1; shift; if "$@"; then echo "ok: $what"; else fail "$what"; fi; }
contains() { grep -qF -- "$2" <<<"$1"; }
# raftlogd processes of this test's cluster (their --data-dir is under $dir).
cluster_processes() { pgrep -f -- "--data-dir $dir/n" | wc -l; }

# Prints "BASE METRICS_BASE": COUNT free loopback ports in a row from BASE (client ports) and COUNT
# from BASE + 100 (metrics ports), away from the defaults; prints nothing after 200 tries.
free_port_block() {
  local count=$1 py=/usr/bin/python3
  [[ -x "$py" ]] || py=python3
  "$py" - "$count" <<'PY'
import random, socket, sys
count = int(sys.argv[1])
for _ in range(200):
    base = random.randrange(20000, 30000)
    socks = []
    try:
        for port in list(range(base, base + count)) + list(range(base + 100, base + 100 + count)):
            s = socket.socket(); s.bind(("127.0.0.1", port)); socks.append(s)
        print(base, base + 100); break
    except OSError:
        pass
    finally:
        for s in socks: s.close()
PY
}
