#!/bin/sh
# Container entry point: starts raftlogd with its node id and data directory filled in.
#
# The node id comes from, in order: $RAFTLOG_ID; the host name of a StatefulSet pod
# ("<name>-<ordinal>" -> ordinal + 1, so raftlog-0 is node 1); nothing (then --id must be in the
# arguments or in the --config file). Node ids start at 1 because 0 means "no node" in Raft.
# Every argument is passed on to raftlogd, so `docker run IMAGE --id 2 --members ...` works too.
# If the first argument is not a flag (e.g. `raftlogctl status`), it is run as a command instead.
set -eu

case "${1:-}" in
  ""|-*) ;;
  *) exec "$@" ;;
esac

id_flag=""
if [ -n "${RAFTLOG_ID:-}" ]; then
  id_flag="--id=${RAFTLOG_ID}"
else
  host=$(hostname)
  ordinal=${host##*-}
  case "$ordinal" in
    ""|*[!0-9]*) ;;  # not a StatefulSet pod name: leave the id to the flags or the config file
    *) if [ "$host" != "$ordinal" ]; then id_flag="--id=$((ordinal + 1))"; fi ;;
  esac
fi

config_flag=""
if [ -n "${RAFTLOG_CONFIG:-}" ]; then
  [ -r "$RAFTLOG_CONFIG" ] || { echo "raftlog-entrypoint: cannot read RAFTLOG_CONFIG=$RAFTLOG_CONFIG" >&2; exit 2; }
  config_flag="--config=${RAFTLOG_CONFIG}"
fi

# Command-line flags override the config file, and later flags override earlier ones, so the
# caller's arguments come last.
# shellcheck disable=SC2086  # the *_flag variables are empty or one word without spaces
exec raftlogd $config_flag $id_flag --data-dir="${RAFTLOG_DATA_DIR:-/var/lib/raftlog}" "$@"
