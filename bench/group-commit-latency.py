#!/usr/bin/env python3
"""Latency of consumer group commits and fetches next to one-entry appends, on a local 3-node
cluster of raftlogd processes (sync flush, 127.0.0.1), through the Python client: 200 sequential
calls each, median and 90th percentile. Bounded: 600 calls, one cluster, removed at the end.

    PYTHONPATH=clients/python:build/clients/python/gen:clients/python/tests RAFTLOGD=build/bin/raftlogd \
        /usr/bin/python3 bench/group-commit-latency.py
"""
import time

import raftlog
from raftlog.v1 import client_pb2
from local_cluster import LocalCluster

CALLS = 200


def main():
    cluster = LocalCluster(nodes=3)
    try:
        cluster.start_all()
        client = raftlog.Client(cluster.endpoints, retry_deadline=15.0)
        leader = cluster.leader(client)
        client.log_stub(cluster.address(leader)).Append(client_pb2.AppendRequest(
            entries=[b"x"] * 100, attributes=[client_pb2.EntryAttributes(topic="orders")] * 100), timeout=10)
        for name, call in (("commit", lambda i: client.commit_offset("g", "orders", i % 100)),
                           ("fetch", lambda i: client.fetch_offsets("g")),
                           ("append", lambda i: client.append([b"y"]))):
            latencies = []
            for i in range(CALLS):
                started = time.perf_counter()
                call(i)
                latencies.append((time.perf_counter() - started) * 1000)
            latencies.sort()
            print("%s: %d sequential calls, median %.2f ms, p90 %.2f ms"
                  % (name, CALLS, latencies[CALLS // 2], latencies[CALLS * 9 // 10]))
    finally:
        cluster.close()


if __name__ == "__main__":
    main()
