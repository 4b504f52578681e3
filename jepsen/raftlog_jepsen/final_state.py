"""Brings the healed cluster to rest and reads every node's committed log through the API, then its
derived indexes (topics and keys, derived_state.py)."""
import random
import time

import grpc

from . import client, derived_state, workload


def wait_for_leader(cluster_client, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        leader = cluster_client.find_leader()
        if leader is not None:
            return leader
        time.sleep(0.1)
    return None


def wait_converged(cluster_client, timeout_s):
    """Waits until every node reports the same commit and last index. Returns the statuses seen."""
    deadline = time.monotonic() + timeout_s
    statuses = {}
    while time.monotonic() < deadline:
        statuses = {node: cluster_client.status(node) for node in cluster_client.addresses}
        if all(s is not None for s in statuses.values()):
            commits = {s.commit_index for s in statuses.values()}
            lasts = {s.last_index for s in statuses.values()}
            if len(commits) == 1 and len(lasts) == 1:
                break
        time.sleep(0.2)
    return statuses


BARRIER_CLIENT_ID = 1


def collect(cluster_client, history, converge_timeout_s=30.0):
    """{"leader", "nodes": {id: {"commit_index", "entries", "derived"} | {"error"}}} after the cluster
    settled ("derived": derived_state.read_node's answer or {"error"})."""
    leader = wait_for_leader(cluster_client, converge_timeout_s)
    if leader is not None:
        # A barrier write, recorded like any append: once it commits, the leader has committed every
        # entry of earlier terms that it holds.
        payload = b"final-barrier"
        values = [workload.compact(payload)]
        invoke = history.now()
        outcome, response, node, attempts = client.append(
            cluster_client, random.Random(0), BARRIER_CLIENT_ID, 1, [payload], time.monotonic() + 10.0)
        op = {"f": "append", "process": "final", "client_id": BARRIER_CLIENT_ID, "sequence": 1, "values": values,
              "invoke": invoke, "complete": history.now(), "type": outcome, "node": node,
              "attempts": [a.to_json() for a in attempts[-10:]], "attempt_count": len(attempts),
              "transport": "unary"}
        if response is not None:
            op.update(first_index=response.first_index, last_index=response.last_index, term=response.term,
                      duplicate=response.duplicate)
        history.record(op)
    wait_converged(cluster_client, converge_timeout_s)
    nodes = {}
    for node in sorted(cluster_client.addresses):
        try:
            entries, commit_index = client.read_all(cluster_client, node)
            nodes[node] = {"commit_index": commit_index, "entries": [workload.entry_tuple(e) for e in entries]}
        except grpc.RpcError as e:
            nodes[node] = {"error": "%s: %s" % (client.rpc_code_name(e), e.details())}
    final = {"leader": leader, "nodes": nodes}
    derived_state.collect(cluster_client, list(history.ops), final, converge_timeout_s)
    return final
