"""Reads every node's derived indexes after the run (raftlog.v1.Topics): each topic in full through
ReadTopic, and every key the writers used through LookupKey, from each node on its own. The
checkers (topics_checker.py) compare them with the reference log.

Each node indexes its committed log on a thread of its own (the dispatcher), so a node may answer
while its indexes still catch up: before reading, this waits (at most `timeout_s` for all nodes)
until the node's indexed_through reaches the last index read from its log, or the node reports
that its dispatcher stopped (Status.derived_problem: a storage error such as a full disk).
"""
import time

import grpc

from . import client, proto_gen, workload

MAX_TOPIC_PAGES = 10000   # ReadTopic answers per topic (1024 entries each): bounds one node's read
READ_PAGE_ENTRIES = 1024
LOOKUP_MAX_ENTRIES = 1024  # LookupKey's cap
MAX_KEYS = 2000            # keys looked up per node; the workload uses far fewer
# Never appended: every node must answer it with nothing.
ABSENT_KEY = "jepsen-never-appended"


def keys_used(history_ops):
    """Every key an append was invoked with (acknowledged or not), sorted, at most MAX_KEYS, and
    ABSENT_KEY."""
    keys = set()
    for op in history_ops:
        if op.get("f") == "append":
            for _topic, op_keys in op.get("attributes") or ():
                keys.update(op_keys)
    return sorted(keys)[:MAX_KEYS] + [ABSENT_KEY]


def _wait_indexed(cluster_client, node, stub, pb2, last_index, deadline):
    """The ListTopics answer once indexed_through >= last_index, or the last one seen at the deadline
    or once the node reports that its dispatcher stopped (it will not catch up before a restart)."""
    listing = None
    while True:
        listing = stub.ListTopics(pb2.ListTopicsRequest(), timeout=3.0)
        if listing.indexed_through >= last_index or time.monotonic() >= deadline:
            return listing
        status = cluster_client.status(node, timeout_s=3.0)
        if status is not None and status.derived_problem:
            return listing
        time.sleep(0.2)


def _read_topic(stub, pb2, topic, first_offset, end_offset):
    entries = []
    offset = first_offset
    for _ in range(MAX_TOPIC_PAGES):
        if offset >= end_offset:
            break
        response = stub.ReadTopic(pb2.ReadTopicRequest(topic=topic, from_offset=offset,
                                                       max_entries=READ_PAGE_ENTRIES), timeout=3.0)
        if not response.entries:
            break
        entries.extend([e.offset, workload.entry_tuple(e.entry)] for e in response.entries)
        offset = response.end_offset
    return entries


def read_node(cluster_client, node, last_index, keys, deadline):
    """{"indexed_through", "topics": {topic: {"first_offset", "end_offset", "entries": [[offset,
    entry], ...]}}, "keys": {key: [entry, ...]}, "problem": the node's derived_problem} for one
    node."""
    pb2 = proto_gen.topics_modules()[0]
    stub = cluster_client.topics_stub(node)
    listing = _wait_indexed(cluster_client, node, stub, pb2, last_index, deadline)
    topics = {}
    for info in listing.topics:
        topics[info.topic] = {"first_offset": info.first_offset, "end_offset": info.end_offset,
                              "entries": _read_topic(stub, pb2, info.topic, info.first_offset, info.end_offset)}
    looked_up = {}
    for key in keys:
        response = stub.LookupKey(pb2.LookupKeyRequest(key=key, max_entries=LOOKUP_MAX_ENTRIES), timeout=3.0)
        looked_up[key] = [workload.entry_tuple(e) for e in response.entries]
    status = cluster_client.status(node, timeout_s=3.0)
    # Non-empty when the node's dispatcher stopped on a storage error (a full disk, say): its
    # indexes then stay where they were until a restart (docs/design.md, "Topics, keys and time").
    problem = status.derived_problem if status is not None else "status unavailable"
    return {"indexed_through": listing.indexed_through, "topics": topics, "keys": looked_up,
            "problem": problem}


def collect(cluster_client, history_ops, final, timeout_s=30.0):
    """Adds "derived" (read_node's answer, or {"error"}) to every readable node of `final`."""
    keys = keys_used(history_ops)
    deadline = time.monotonic() + timeout_s
    for node, state in sorted(final["nodes"].items()):
        entries = state.get("entries")
        if entries is None:
            continue
        last_index = entries[-1][0] if entries else 0
        try:
            state["derived"] = read_node(cluster_client, node, last_index, keys, deadline)
        except grpc.RpcError as e:
            state["derived"] = {"error": "%s: %s" % (client.rpc_code_name(e), e.details())}
