"""The harness's own gRPC client for raftlog (not the C++ client library, whose bugs it must not
share), following docs/client-protocol.md. Error details are read and retries decided by the
repository's Python client package (clients/python: raftlog.errors decodes the standard
grpc-status-details-bin trailer, falling back to raftlog-error-bin; raftlog._retry is the retry loop:
which statuses and reasons are retried, one redirect hop without sleeping, the backoff); proto_gen
makes that package importable. What stays here is what a test harness needs on top: every attempt
recorded, and each append classified as ok / definite failure / unknown for the checkers. An
append attempt travels either as a unary Log/Append (UnaryTransport, here) or over a
Log/AppendStream call (append_stream.StreamTransport); both yield an Outcome that is classified and
retried the same way.
"""
import threading
import time

import grpc

from . import proto_gen

# The Python client package needs its generated modules before it can be imported.
proto_gen.generate(proto_gen.default_cache_root())
from raftlog import _retry  # noqa: E402
from raftlog import errors as raftlog_errors  # noqa: E402

ERROR_INFO_KEY = raftlog_errors.RAFTLOG_ERROR_KEY
STATUS_DETAILS_KEY = raftlog_errors.STATUS_DETAILS_KEY

# Reason words (docs/client-protocol.md, section 2) whose status guarantees that this attempt's
# append was never proposed: the node refused it before handing it to Raft. UNAVAILABLE
# (LEADERSHIP_LOST / SHUTTING_DOWN), DEADLINE_EXCEEDED and transport errors are unknown. Stricter than
# the Python package's list (raftlog._retry.DEFINITE_REASONS) on purpose: MALFORMED_REQUEST and
# UNIMPLEMENTED, which the harness never provokes, count as unknown, so a server bug there cannot
# turn an applied append into a "fail" the checkers would trust.
DEFINITE_FAILURE_REASONS = {
    "NOT_LEADER", "NO_LEADER", "EMPTY_APPEND", "ENTRY_TOO_LARGE", "TOO_MANY_ENTRIES",
    "APPEND_TOO_LARGE", "BAD_SEQUENCE", "SEQUENCE_TOO_OLD", "SEQUENCE_REUSED", "DISK_FULL",
    "DISK_WATERMARK", "TOO_MANY_PENDING",
}
# The protocol's backoff (docs/client-protocol.md, section 3): 20 ms doubling to 500 ms, +25% jitter.
BACKOFF_MIN_S, BACKOFF_MAX_S = 0.02, 0.5
MAX_ATTEMPTS_PER_APPEND = 1000  # the deadline normally ends an append's retries first

CHANNEL_OPTIONS = [
    # gRPC's default reconnect backoff (1 s doubling to 120 s) would hide a restarted node for minutes.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    # After a failed connection gRPC re-resolves the target, at most once per this interval (default
    # 30 s); even for an IP literal that throttle kept a restarted node unreachable for ~5 s.
    ("grpc.dns_min_time_between_resolutions_ms", 100),
    ("grpc.max_receive_message_length", 64 << 20),
]


class Attempt:
    def __init__(self, node, code, reason, message):
        self.node, self.code, self.reason, self.message = node, code, reason, message

    def definite_failure(self):
        return self.reason in DEFINITE_FAILURE_REASONS

    def to_json(self):
        return {"node": self.node, "code": self.code, "reason": self.reason}


class Cluster:
    """Channels to every node, by node id; thread-safe."""

    def __init__(self, pb2, pb2_grpc, addresses):
        self.pb2, self.pb2_grpc = pb2, pb2_grpc
        self.addresses = dict(addresses)  # node id -> "host:port"
        self.by_address = {a: i for i, a in self.addresses.items()}
        self._lock = threading.Lock()
        self._channels = {}
        self.leader_hint = None

    def _channel(self, node):
        with self._lock:
            channel = self._channels.get(node)
            if channel is None:
                channel = grpc.insecure_channel(self.addresses[node], options=CHANNEL_OPTIONS)
                self._channels[node] = channel
            return channel

    def log_stub(self, node):
        return self.pb2_grpc.LogStub(self._channel(node))

    def admin_stub(self, node):
        return self.pb2_grpc.AdminStub(self._channel(node))

    def topics_stub(self, node):
        """raftlog.v1.Topics on `node` (stubs from proto_gen.generate, imported on first use)."""
        return proto_gen.topics_modules()[1].TopicsStub(self._channel(node))

    def close(self):
        with self._lock:
            for channel in self._channels.values():
                channel.close()
            self._channels.clear()

    def error_info(self, rpc_error):
        """(reason, leader_node_or_None) from a failed call's trailers, decoded by the Python client
        package: the standard grpc-status-details-bin, else raftlog-error-bin (docs/errors.md)."""
        try:
            trailers = rpc_error.trailing_metadata() or ()
        except Exception:  # a locally generated error has no trailers
            trailers = ()
        reason, metadata = raftlog_errors.details_from_trailers(trailers)
        return reason, self.leader_node(metadata.get("leader_address", ""))

    def leader_node(self, leader_address):
        """The node id of a leader hint's address (None for no hint, or an address not in the cluster)."""
        return self.by_address.get(leader_address) if leader_address else None

    def status(self, node, timeout_s=0.5):
        try:
            return self.log_stub(node).Status(self.pb2.StatusRequest(), timeout=timeout_s)
        except grpc.RpcError:
            return None

    def find_leader(self, nodes=None, timeout_s=0.5):
        """The node id that says it is leader and that a majority of answering nodes agree on."""
        named = {}
        leaders = set()
        for node in nodes or self.addresses:
            st = self.status(node, timeout_s)
            if st is None:
                continue
            if st.leader_id:
                named[st.leader_id] = named.get(st.leader_id, 0) + 1
            if st.role == self.pb2.ROLE_LEADER:
                leaders.add(st.node_id)
        for leader in leaders:
            if named.get(leader, 0) > len(self.addresses) // 2:
                return leader
        return None


def rpc_code_name(rpc_error):
    try:
        return rpc_error.code().name
    except Exception:
        return "UNKNOWN"


class Outcome:
    """What one append attempt ended with, whichever RPC carried it: the response (ok), or the status
    code name, reason word, leader hint (node id or None) and message of the refusal or failure.
    `stream_broken` (AppendStream only): the call can carry no more appends and must be replaced."""

    def __init__(self, response=None, code="OK", reason="", leader=None, message="", stream_broken=False):
        self.response, self.code, self.reason, self.leader = response, code, reason, leader
        self.message, self.stream_broken = message, stream_broken


class UnaryTransport:
    """Each attempt is one unary Log/Append call."""

    name = "unary"

    def __init__(self, cluster):
        self.cluster = cluster

    def attempt(self, node, request, timeout_s):
        try:
            return Outcome(response=self.cluster.log_stub(node).Append(request, timeout=timeout_s))
        except grpc.RpcError as e:
            reason, leader = self.cluster.error_info(e)
            return Outcome(code=rpc_code_name(e), reason=reason, leader=leader,
                           message=e.details() if hasattr(e, "details") else "")

    def close(self):
        pass


class _Stopped(Exception):
    """The workload is stopping: no further attempt."""


def outcome_error(outcome, cluster, node):
    """The raftlog.errors exception an unsuccessful Outcome stands for, for raftlog._retry's rules."""
    code = getattr(grpc.StatusCode, outcome.code, grpc.StatusCode.UNKNOWN)
    if not isinstance(code, grpc.StatusCode):
        code = grpc.StatusCode.UNKNOWN  # PROTOCOL_ERROR, or a code number gRPC lacks
    metadata = {}
    if outcome.leader is not None and outcome.leader in cluster.addresses:  # not a retired node
        metadata["leader_address"] = cluster.addresses[outcome.leader]
    error = raftlog_errors.make_error(code, outcome.message, outcome.reason, metadata, cluster.addresses[node])
    if outcome.stream_broken:
        error.stream_ended = True
    return error


def append(cluster, rng, client_id, sequence, values, deadline_s, attempt_timeout_s=2.0, stop=None,
           transport=None, sleep=time.sleep, attributes=None):
    """Appends `values` (bytes) as one append with (client_id, sequence), retrying with the same pair by
    docs/client-protocol.md (raftlog._retry.run: NOT_LEADER is followed at once, one hop, a second
    redirect in a row sleeps the backoff first; TOO_MANY_PENDING waits and stays on the node;
    NO_LEADER, UNAVAILABLE and DEADLINE_EXCEEDED wait and move to the next node; a broken
    AppendStream is retried; nothing else is: DISK_FULL, DISK_WATERMARK, the INVALID_ARGUMENT and
    SEQUENCE_* reasons, CANCELLED, ...), until ok, a refusal that is not retried, `deadline_s`
    (monotonic) or `stop` is set. `transport` carries each attempt (UnaryTransport by default, or
    append_stream.StreamTransport); the retry policy and the classification of the attempts do not
    depend on it. `sleep` is the backoff's sleep (tests record it). `attributes`: None, or one
    [topic, [keys]] per value (AppendRequest.attributes).
    Returns (type, response_or_None, final_node, attempts)."""
    if transport is None:
        transport = UnaryTransport(cluster)
    attempts = []
    request = cluster.pb2.AppendRequest(entries=list(values), client_id=client_id, sequence=sequence)
    for topic, keys in attributes or ():
        request.attributes.add(topic=topic, keys=list(keys))
    ordered = sorted(cluster.addresses)
    endpoints = _retry.Endpoints([cluster.addresses[n] for n in ordered])
    first = cluster.leader_hint or rng.choice(ordered)
    endpoints.prefer(cluster.addresses[first])

    def attempt(address, timeout_s):
        if stop is not None and stop.is_set() and attempts:
            raise _Stopped()
        node = cluster.by_address.get(address)
        if node is None:
            # The membership nemesis retired this node after the endpoint list was taken: nothing is
            # sent, so it is like an unreachable node (retried on the next one).
            raise raftlog_errors.make_error(grpc.StatusCode.UNAVAILABLE, "node retired", "", {},
                                            address)
        outcome = transport.attempt(node, request, timeout_s)
        if outcome.response is not None:
            cluster.leader_hint = node
            return outcome.response, node
        attempts.append(Attempt(node, outcome.code, outcome.reason, outcome.message))
        if cluster.leader_hint == node and outcome.reason != "TOO_MANY_PENDING":
            cluster.leader_hint = None
        raise outcome_error(outcome, cluster, node)

    remaining = deadline_s - time.monotonic()
    if remaining > 0:
        try:
            response, node = _retry.run("append", attempt, endpoints, attempt_timeout_s, remaining,
                                        _retry.Backoff(BACKOFF_MIN_S, BACKOFF_MAX_S, rng), sleep=sleep,
                                        max_attempts=MAX_ATTEMPTS_PER_APPEND)
            return "ok", response, node, attempts
        except (raftlog_errors.RaftlogError, _Stopped):
            pass  # the attempts say how it ended
    final_node = attempts[-1].node if attempts else first
    if attempts and all(a.definite_failure() for a in attempts):
        return "fail", None, final_node, attempts
    return "info", None, final_node, attempts


def read(cluster, node, from_index, max_entries, linearizable, timeout_s=2.0):
    """One Read attempt on one node (a linearizable read follows at most one redirect)."""
    request = cluster.pb2.ReadRequest(from_index=from_index, max_entries=max_entries, linearizable=linearizable)
    for _ in range(2):
        try:
            return cluster.log_stub(node).Read(request, timeout=timeout_s), node, None
        except grpc.RpcError as e:
            reason, leader = cluster.error_info(e)
            if reason == "NOT_LEADER" and leader is not None and leader != node:
                node = leader
                continue
            return None, node, Attempt(node, rpc_code_name(e), reason, "")
    return None, node, None


def read_all(cluster, node, timeout_s=3.0, max_rounds=100000):
    """Every entry of `node`'s committed log (non-linearizable reads), and its commit index."""
    entries = []
    commit_index = 0
    next_index = 1
    for _ in range(max_rounds):
        try:
            response = cluster.log_stub(node).Read(
                cluster.pb2.ReadRequest(from_index=next_index, max_entries=1024, linearizable=False),
                timeout=timeout_s)
        except grpc.RpcError as e:
            if rpc_code_name(e) == "OUT_OF_RANGE" and next_index == 1:
                break  # nothing committed on this node
            raise
        commit_index = max(commit_index, response.commit_index)
        if not response.entries:
            break
        entries.extend(response.entries)
        next_index = entries[-1].index + 1
        if next_index > response.commit_index:
            break
    return entries, commit_index


def entry_to_json(entry):
    return {"index": entry.index, "term": entry.term, "type": int(entry.type),
            "client_id": entry.client_id, "sequence": entry.sequence,
            "payload": entry.payload.decode("utf-8", errors="backslashreplace")}
