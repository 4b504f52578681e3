#!/bin/sh
# Kubernetes start script of a raftlog pod (installed as raftlog-k8s-start; deploy/k8s/statefulset.yaml
# runs it). It decides how this pod's raftlogd starts, so that the StatefulSet can grow, shrink and
# replace a pod's volume with the membership changes of docs/operations.md ("Membership"):
#
#   restart    the volume holds a node already: its id is the one recorded in DIR/K8S_NODE (written
#              by this script at the node's first start) or, for volumes made before this script,
#              DIR/IDENTITY; a node that joined (DIR/JOIN) restarts with --join, a founder without.
#   bootstrap  empty volume and the pod's ordinal is in $RAFTLOG_BOOTSTRAP_ORDINALS: a founder, node
#              id = ordinal + 1, members from the config file (the cluster's first start). Only
#              while the membership never changed: once raftlog-members gave out an id
#              ($RAFTLOG_JOIN_IDS not empty, or $RAFTLOG_NEXT_ID above the founders' ids) the
#              founders' --members no longer describe the cluster, and a founder ordinal's empty
#              volume is a lost one (or a founder that never started): exit 2, replace it.
#   join       empty volume, any other ordinal: node id from $RAFTLOG_JOIN_IDS ("ORDINAL=ID ..."),
#              which deploy/k8s/raftlog-members writes before it scales up or replaces a volume; the
#              node starts with --join $RAFTLOG_JOIN_SEEDS and waits until that tool adds it.
#
# An empty volume is never started under an id the cluster knew: that id's votes and acknowledged
# entries would be forgotten (docs/operations.md). So an ordinal with an empty volume, no bootstrap
# place and no assigned id exits 2, and so does a volume whose record disagrees with itself.
#
#   raftlog-k8s-start [raftlogd flags...]    decide, record the id, exec raftlog-entrypoint
#   raftlog-k8s-start --decide               print the decision ("bootstrap 1", "join 6 ...") only
#
# Inputs: host name "<statefulset>-<ordinal>", $RAFTLOG_DATA_DIR (default /var/lib/raftlog),
# $RAFTLOG_BOOTSTRAP_ORDINALS, $RAFTLOG_JOIN_IDS, $RAFTLOG_NEXT_ID (optional: the ConfigMap's next-id),
# $RAFTLOG_JOIN_SEEDS (HOST:PORT,...) and
# $RAFTLOG_PEER_DOMAIN (the headless Service's domain: this pod's address is
# <host>.<domain>:$RAFTLOG_PORT, port default 7001). Tested by tests/deploy/k8s_start_test.sh.
set -eu

data_dir=${RAFTLOG_DATA_DIR:-/var/lib/raftlog}
record=$data_dir/K8S_NODE

fail() { echo "raftlog-k8s-start: $*" >&2; exit 2; }

# A positive decimal of at most 18 digits (a node id fits in 64 bits).
is_node_id() { case "$1" in ""|*[!0-9]*|0*) return 1 ;; *) [ "${#1}" -le 18 ] ;; esac; }

# The value of line "$1 VALUE" in file $2, or nothing.
record_field() { sed -n "s/^$1 //p" "$2" 2>/dev/null | head -n 1; }

# "ORDINAL=ID ..." -> the id assigned to ordinal $1, or nothing.
assigned_id() {
  for pair in $RAFTLOG_JOIN_IDS; do
    case "$pair" in
      "$1="*) echo "${pair#*=}"; return 0 ;;
    esac
  done
}

host=$(hostname)
ordinal=${host##*-}
case "$ordinal" in ""|*[!0-9]*) ordinal="" ;; esac
if [ "$host" = "$ordinal" ] || [ -z "$ordinal" ] || [ "${#ordinal}" -gt 9 ]; then
  fail "host name '$host' is not a StatefulSet pod name (<name>-<ordinal>)"
fi
RAFTLOG_BOOTSTRAP_ORDINALS=${RAFTLOG_BOOTSTRAP_ORDINALS:-}
RAFTLOG_JOIN_IDS=${RAFTLOG_JOIN_IDS:-}
RAFTLOG_NEXT_ID=${RAFTLOG_NEXT_ID:-}

# Why the membership is known to have changed since the founders' first start, or nothing:
# raftlog-members assigned an id (join-ids), or gave out ids since (next-id above the founders'
# ids, ordinal + 1 for the highest bootstrap ordinal: the ConfigMap starts at that + 1; scaling
# down drops join-ids entries but never lowers next-id). A founder ordinal with an empty volume is
# then never bootstrapped (drills7 M6): the founders' --members are stale, and an empty directory
# under a founder's id would vote without the log and hard state that id had.
membership_changed() {
  if [ -n "$(echo "$RAFTLOG_JOIN_IDS" | tr -d ' ')" ]; then
    echo "join-ids '$RAFTLOG_JOIN_IDS'"
    return 0
  fi
  [ -n "$RAFTLOG_NEXT_ID" ] || return 0
  is_node_id "$RAFTLOG_NEXT_ID" || fail "RAFTLOG_NEXT_ID (the ConfigMap's next-id) is '$RAFTLOG_NEXT_ID', not a node id"
  highest=-1
  for bootstrap_ordinal in $RAFTLOG_BOOTSTRAP_ORDINALS; do
    if [ "$bootstrap_ordinal" -gt "$highest" ]; then highest=$bootstrap_ordinal; fi
  done
  if [ "$RAFTLOG_NEXT_ID" -gt $((highest + 2)) ]; then
    echo "next-id $RAFTLOG_NEXT_ID (above the founders' ids 1..$((highest + 1)); if this is a new cluster, next-id must be $((highest + 2)))"
  fi
}

# Sets $mode (bootstrap | join) and $id.
decide() {
  if [ -e "$record" ]; then
    id=$(record_field node-id "$record")
    mode=$(record_field mode "$record")
    is_node_id "$id" || fail "$record has no valid node-id line"
    case "$mode" in bootstrap|join) ;; *) fail "$record has no valid mode line" ;; esac
    if [ "$mode" = join ] && [ ! -e "$data_dir/JOIN" ] && [ -e "$data_dir/IDENTITY" ]; then
      fail "$record says node $id joined, but $data_dir has an IDENTITY and no JOIN record"
    fi
    identity_id=$(record_field node-id "$data_dir/IDENTITY")
    if [ -n "$identity_id" ] && [ "$identity_id" != "$id" ]; then
      fail "$record names node $id but $data_dir/IDENTITY node $identity_id"
    fi
    return 0
  fi
  if [ -e "$data_dir/IDENTITY" ]; then  # a volume from before this script: adopt what it records
    id=$(record_field node-id "$data_dir/IDENTITY")
    is_node_id "$id" || fail "$data_dir/IDENTITY has no valid node-id line"
    if [ -e "$data_dir/JOIN" ]; then mode='join'; else mode='bootstrap'; fi
    return 0
  fi
  if [ -e "$data_dir/JOIN" ]; then
    fail "$data_dir has a JOIN record but neither K8S_NODE nor IDENTITY: cannot tell its node id"
  fi
  for name in log HARDSTATE CONFSTATE; do
    if [ -e "$data_dir/$name" ]; then
      # Written before IDENTITY existed: a founder's directory (raftlogd adopts it with a warning).
      id=$((ordinal + 1)); mode='bootstrap'
      return 0
    fi
  done
  for bootstrap_ordinal in $RAFTLOG_BOOTSTRAP_ORDINALS; do
    if [ "$bootstrap_ordinal" = "$ordinal" ]; then
      changed=$(membership_changed) || exit 2
      if [ -n "$changed" ]; then
        fail "pod $host has an empty volume and is a founder ordinal, but the cluster's membership changed since its first start ($changed): its volume was lost (or it never started), and node $((ordinal + 1)) must not start empty under its old id with the founders' members; replace it with deploy/k8s/raftlog-members replace $ordinal (docs/operations.md, \"Membership on Kubernetes\")"
      fi
      # (A membership that changed is said first: replaced founders leave fewer ordinals.) One
      # founder would found a one-member configuration, which raftlogd does only with
      # --bootstrap-new-cluster, and this script cannot tell a first start from a lost volume, so
      # it never passes that flag: say so instead of raftlogd's exit 2 at every start.
      founders=0
      for _ in $RAFTLOG_BOOTSTRAP_ORDINALS; do founders=$((founders + 1)); done
      if [ "$founders" -lt 2 ]; then
        fail "bootstrap-ordinals '$RAFTLOG_BOOTSTRAP_ORDINALS' names a single founder: a one-founder StatefulSet cannot start (a one-member cluster is founded only with --bootstrap-new-cluster, which this script never passes: it cannot tell a first start from a lost volume); found with 3 or 5 pods (bootstrap-ordinals \"0 1 2\", next-id \"4\"; docs/operations.md, \"Membership on Kubernetes\")"
      fi
      id=$((ordinal + 1)); mode='bootstrap'; return 0
    fi
  done
  id=$(assigned_id "$ordinal")
  [ -n "$id" ] || fail "pod $host has an empty volume, is not a bootstrap pod ($RAFTLOG_BOOTSTRAP_ORDINALS) and has no id in RAFTLOG_JOIN_IDS: scale or replace with deploy/k8s/raftlog-members, which assigns one"
  is_node_id "$id" || fail "RAFTLOG_JOIN_IDS gives pod $host the id '$id', not a positive number"
  mode='join'
}

decide
address="$host.${RAFTLOG_PEER_DOMAIN:-}:${RAFTLOG_PORT:-7001}"
if [ "$mode" = join ]; then
  [ -n "${RAFTLOG_PEER_DOMAIN:-}" ] || fail "RAFTLOG_PEER_DOMAIN is not set (this pod's address for --members)"
  [ -n "${RAFTLOG_JOIN_SEEDS:-}" ] || fail "RAFTLOG_JOIN_SEEDS is not set (members to --join)"
fi

if [ "${1:-}" = --decide ]; then
  if [ "$mode" = join ]; then echo "join $id $address $RAFTLOG_JOIN_SEEDS"; else echo "bootstrap $id"; fi
  exit 0
fi

# Recorded before raftlogd writes anything, so that a restart at any later point finds the same id.
if [ ! -e "$record" ]; then
  printf 'raftlog-k8s-node 1\nnode-id %s\nmode %s\n' "$id" "$mode" >"$record.tmp"
  sync -- "$record.tmp" 2>/dev/null || sync
  mv -f "$record.tmp" "$record"
  sync -- "$data_dir" 2>/dev/null || sync
fi
export RAFTLOG_ID="$id"
if [ "$mode" = join ]; then
  exec raftlog-entrypoint --members="$id=$address" --join="$RAFTLOG_JOIN_SEEDS" "$@"
fi
exec raftlog-entrypoint "$@"
