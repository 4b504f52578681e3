#!/bin/sh
# Docker HEALTHCHECK (and a Kubernetes exec readiness probe where the gRPC probe cannot be used, with
# TLS): healthy when the local node's gRPC health service (grpc.health.v1.Health) says SERVING, that
# is, the node has recovered and knows a leader (docs/operations.md). Debian packages no
# grpc_health_probe, so `raftlogctl health` asks.
#
# TLS: set RAFTLOG_HEALTHCHECK_FLAGS, e.g. "--tls-ca /etc/raftlog/tls/ca.crt" (plus --tls-cert and
# --tls-key when the node requires client certificates); the node's certificate must be valid for
# 127.0.0.1.
set -eu
port=${RAFTLOG_CLIENT_PORT:-7001}
# shellcheck disable=SC2086  # RAFTLOG_HEALTHCHECK_FLAGS is a list of flags
exec raftlogctl health --endpoints "127.0.0.1:${port}" --timeout-ms 3000 ${RAFTLOG_HEALTHCHECK_FLAGS:-} >/dev/null
