"""raftlog.Client: leader discovery, redirects, idempotent appends, reads, tails that resume across
failover, and node status, following docs/client-protocol.md.

Thread-safe. Appends of one Client (append(), and its append_stream() sessions and Producers) are
serialized: one append in flight per client_id (docs/client-protocol.md, section 4, rule 2). Use one
Client per concurrent writer, or a Producer to batch the entries of many threads into shared appends.
"""
import random
import threading
import time

import grpc

from . import _retry, errors
from ._stubs import client_pb2, client_pb2_grpc, groups_pb2, groups_pb2_grpc
from .types import (AppendResult, Entry, GroupListing, GroupOffsets, GroupSummary, GroupTopicOffset, NodeStatus,
                    ReadResult)

MAX_ENDPOINTS = 64
# A read(count=...) asks for at most this many entries in all, so one call's memory is bounded.
MAX_READ_COUNT = 1_000_000
# gRPC message bound of the client, both ways: above any node's send bound (docs/client-protocol.md, section 7).
MAX_MESSAGE_BYTES = (64 << 20) + (64 << 10)
STATUS_TIMEOUT_S = 0.5  # one Status call while discovering the leader

CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    # gRPC's default reconnect backoff (1 s growing to 120 s) would hide a restarted node for minutes.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    # Re-resolution after a failed connection is throttled (30 s by default), even for IP literals.
    ("grpc.dns_min_time_between_resolutions_ms", 100),
]


def parse_endpoints(endpoints):
    """A list of "host:port" strings from a list or a comma-separated string; ValueError when empty,
    malformed, duplicated or longer than MAX_ENDPOINTS."""
    items = endpoints.split(",") if isinstance(endpoints, str) else list(endpoints)
    parsed = []
    for item in items:
        item = str(item).strip()
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError("bad endpoint %r: want host:port with a port 1..65535" % item)
        if item in parsed:
            raise ValueError("endpoint %s named twice" % item)
        parsed.append(item)
    if not parsed or len(parsed) > MAX_ENDPOINTS:
        raise ValueError("want 1..%d endpoints, got %d" % (MAX_ENDPOINTS, len(parsed)))
    return parsed


def _payloads(entries):
    """The entries as a list of bytes; a single bytes value is not taken for a list of ints."""
    if isinstance(entries, (bytes, bytearray, memoryview, str)):
        raise TypeError("append takes a list of bytes entries, not one %s" % type(entries).__name__)
    payloads = []
    for entry in entries:
        if not isinstance(entry, (bytes, bytearray, memoryview)):
            raise TypeError("an entry must be bytes, not %s (encode text first)" % type(entry).__name__)
        payloads.append(bytes(entry))
    if not payloads:
        raise errors.InvalidRequestError(grpc.StatusCode.INVALID_ARGUMENT, "append needs at least one entry",
                                         "EMPTY_APPEND")
    return payloads


class Client:
    """A client of one raftlog cluster.

    endpoints        "host:port" client addresses of any subset of the nodes (list or comma-separated)
    client_id        the idempotency id (docs/client-protocol.md, section 4); None: a random one. 0
                     disables deduplication: a retry after an unknown outcome may then append twice
    first_sequence   the sequence of the first append (>= 1); a restarted writer with a fixed client_id
                     must continue after the highest sequence it used
    call_timeout     seconds one attempt (one RPC) may take
    retry_deadline   seconds all attempts of one call may take together
    backoff_min/max  seconds slept between attempts: doubling from min to max, plus up to 25% jitter
    credentials      grpc.ChannelCredentials for TLS (docs/security.md); None: plaintext
    discover_leader  before the first call that needs the leader, ask each endpoint's Status which node
                     leads (saves that call a redirect); False: start at the first endpoint
    """

    def __init__(self, endpoints, client_id=None, first_sequence=1, call_timeout=2.0, retry_deadline=10.0,
                 backoff_min=0.02, backoff_max=0.5, credentials=None, discover_leader=True):
        if client_id is None:
            client_id = random.SystemRandom().randrange(1, 1 << 64)
        if not 0 <= client_id < 1 << 64:
            raise ValueError("client_id must be 0..2^64-1")
        if not 1 <= first_sequence < 1 << 64:
            raise ValueError("first_sequence must be 1..2^64-1 (sequences start at 1)")
        if not (call_timeout > 0 and retry_deadline > 0 and 0 < backoff_min <= backoff_max):
            raise ValueError("timeouts must be positive and backoff_min <= backoff_max")
        self.client_id = client_id
        self.call_timeout, self.retry_deadline = float(call_timeout), float(retry_deadline)
        self.backoff_min, self.backoff_max = float(backoff_min), float(backoff_max)
        self.endpoints = _retry.Endpoints(parse_endpoints(endpoints))
        self._credentials = credentials
        self._channels = {}
        self._channels_lock = threading.Lock()
        self._append_lock = threading.Lock()  # one append in flight per client_id
        self._sequence_lock = threading.Lock()
        self._next_sequence = first_sequence
        self._discovered = not discover_leader
        self._rng = random.Random(client_id)

    # -- plumbing ----------------------------------------------------------------------------------
    def channel(self, endpoint):
        with self._channels_lock:
            channel = self._channels.get(endpoint)
            if channel is None:
                if self._credentials is None:
                    channel = grpc.insecure_channel(endpoint, options=CHANNEL_OPTIONS)
                else:
                    channel = grpc.secure_channel(endpoint, self._credentials, options=CHANNEL_OPTIONS)
                self._channels[endpoint] = channel
            return channel

    def log_stub(self, endpoint):
        return client_pb2_grpc.LogStub(self.channel(endpoint))

    def admin_stub(self, endpoint):
        return client_pb2_grpc.AdminStub(self.channel(endpoint))

    def close(self):
        with self._channels_lock:
            for channel in self._channels.values():
                channel.close()
            self._channels.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _backoff(self):
        return _retry.Backoff(self.backoff_min, self.backoff_max, self._rng)

    def _run(self, what, attempt, on_error=None):
        return _retry.run(what, attempt, self.endpoints, self.call_timeout, self.retry_deadline, self._backoff(),
                          on_error)

    def _unary(self, endpoint, method, request, timeout, admin=False):
        stub = self.admin_stub(endpoint) if admin else self.log_stub(endpoint)
        try:
            return getattr(stub, method)(request, timeout=timeout)
        except grpc.RpcError as error:
            raise errors.from_rpc_error(error, endpoint) from None

    @property
    def next_sequence(self):
        """The sequence the next append will use."""
        with self._sequence_lock:
            return self._next_sequence

    def _take_sequence(self):
        with self._sequence_lock:
            sequence = self._next_sequence
            self._next_sequence += 1
            return sequence

    # -- leader discovery --------------------------------------------------------------------------
    def _discover_leader(self):
        """Once, before the first call that needs the leader: prefer the endpoint that says it leads,
        or that the others name (saves the first call a redirect). No answer changes nothing."""
        if self._discovered:
            return
        self._discovered = True
        for endpoint in self.endpoints.configured:
            try:
                status = self.status(endpoint, timeout=STATUS_TIMEOUT_S)
            except errors.RaftlogError:
                continue
            if status.role == "leader":
                self.endpoints.prefer(endpoint)
                return
            if status.leader_address:
                self.endpoints.prefer(status.leader_address)
                return

    # -- appends -----------------------------------------------------------------------------------
    def append(self, entries):
        """Appends `entries` (a list of bytes, at least one) atomically, once, at contiguous indexes;
        returns an AppendResult once they are committed. Every retry reuses this call's
        (client_id, sequence). Raises AppendOutcomeUnknownError when it gave up while an attempt may
        have been applied, else the typed error of the refusal (nothing was written)."""
        payloads = _payloads(entries)
        with self._append_lock:
            request = self._append_request(payloads)
            return self.run_append(request, lambda endpoint, timeout: (
                self._unary(endpoint, "Append", request, timeout), endpoint))

    def _append_request(self, payloads):
        return client_pb2.AppendRequest(entries=payloads, client_id=self.client_id, sequence=self._take_sequence())

    def run_append(self, request, attempt, maybe_applied=None):
        """The retry loop of one append (the caller holds the append lock): attempt(endpoint, timeout)
        returns (AppendResponse, endpoint) or raises a RaftlogError, with `stream_ended` set on it when
        a stream ended with the request unanswered. `maybe_applied` collects the attempts whose outcome
        is unknown (an attempt may add to it without raising)."""
        self._discover_leader()
        if maybe_applied is None:
            maybe_applied = []

        def on_error(error):
            if not _retry.attempt_was_definite(error, unary=not getattr(error, "stream_ended", False)):
                maybe_applied.append(error)

        try:
            response, endpoint = self._run("append", attempt, on_error)
        except errors.RaftlogError as error:
            if maybe_applied:
                raise errors.AppendOutcomeUnknownError(
                    error.code, "the append may have been applied (%d attempt(s) had an unknown outcome): %s"
                    % (len(maybe_applied), error.message), error.reason, error.metadata, error.endpoint,
                    request.sequence, error) from None
            raise
        count = len(request.entries)
        if response.first_index == 0 or response.last_index - response.first_index + 1 != count:
            raise errors.ProtocolError(grpc.StatusCode.INTERNAL, "an append of %d entries answered with indexes "
                                       "%d..%d" % (count, response.first_index, response.last_index),
                                       endpoint=endpoint)
        return AppendResult(response.first_index, response.last_index, response.term, response.duplicate,
                            request.sequence, endpoint)

    def append_stream(self):
        """An AppendStream session (raftlog.stream.AppendStream): the same appends as append(), sent
        over one long-lived AppendStream call. Close it (or use `with`)."""
        from .stream import AppendStream
        return AppendStream(self)

    # -- reads -------------------------------------------------------------------------------------
    def read(self, from_index, count=1024, linearizable=False, max_bytes=0):
        """Up to `count` committed entries from `from_index` on (fewer when the log ends first), as a
        ReadResult. Makes as many Read calls as the node's answer bounds need. A linearizable read goes
        to the leader and reflects every append that completed before it started; otherwise any node
        answers from its own committed log."""
        if from_index < 1:
            raise errors.InvalidRequestError(grpc.StatusCode.INVALID_ARGUMENT, "indexes start at 1", "BAD_INDEX_RANGE")
        if not 1 <= count <= MAX_READ_COUNT:
            raise ValueError("count must be 1..%d" % MAX_READ_COUNT)
        if linearizable:
            self._discover_leader()
        entries = []
        commit_index = 0
        endpoint = ""
        for _ in range(count):  # each round returns at least one entry or ends the loop
            next_index = from_index + len(entries)
            request = client_pb2.ReadRequest(from_index=next_index, max_entries=min(count - len(entries), 1 << 31),
                                             max_bytes=max_bytes, linearizable=linearizable)
            response, endpoint = self._run("read", lambda target, timeout: (
                self._unary(target, "Read", request, timeout), target))
            commit_index = response.commit_index
            for wire in response.entries:
                if wire.index != from_index + len(entries):
                    raise errors.ProtocolError(grpc.StatusCode.INTERNAL, "read returned index %d where %d was expected"
                                               % (wire.index, from_index + len(entries)), endpoint=endpoint)
                entries.append(Entry.from_wire(wire))
            if not response.entries or len(entries) >= count or entries[-1].index >= commit_index:
                break
        return ReadResult(entries[:count], commit_index, endpoint)

    def tail(self, from_index=1, max_bytes_per_message=0):
        """A raftlog.tail.Tail: iterate it for committed entries from `from_index` on, each index
        exactly once, following the log as it grows and resuming on another node when one fails.
        close() (from any thread) ends it."""
        from .tail import Tail
        return Tail(self, from_index, max_bytes_per_message)

    # -- status ------------------------------------------------------------------------------------
    def status(self, endpoint=None, timeout=None):
        """One node's view of itself (a NodeStatus): `endpoint`, or the preferred one. No retries."""
        endpoint = endpoint or self.endpoints.preferred
        response = self._unary(endpoint, "Status", client_pb2.StatusRequest(), timeout or self.call_timeout)
        return NodeStatus.from_wire(endpoint, response)

    def status_all(self, timeout=None):
        """[(endpoint, NodeStatus or RaftlogError)] for every configured endpoint, in order."""
        answers = []
        for endpoint in self.endpoints.configured:
            try:
                answers.append((endpoint, self.status(endpoint, timeout)))
            except errors.RaftlogError as error:
                answers.append((endpoint, error))
        return answers

    def leader(self, timeout=None):
        """The NodeStatus of the node that says it leads; NoLeaderError when none does."""
        for endpoint, status in self.status_all(timeout):
            if isinstance(status, NodeStatus) and status.role == "leader":
                self.endpoints.prefer(endpoint)
                return status
        raise errors.NoLeaderError(grpc.StatusCode.FAILED_PRECONDITION, "no configured node says it is the leader",
                                   "NO_LEADER")

    # -- admin -------------------------------------------------------------------------------------
    def transfer_leadership(self, target_id):
        """Asks the leader (found by redirects) to hand leadership to node `target_id`; returns
        (leader_id, term). A TRANSFER_* refusal is raised, not retried: leadership may have moved
        anyway (docs/client-protocol.md, "Admin"); read status() before trying again."""
        if target_id < 1:
            raise ValueError("target_id must be a node id (>= 1)")
        self._discover_leader()
        request = client_pb2.TransferLeadershipRequest(target_id=target_id)
        response = self._run("transfer-leadership", lambda endpoint, timeout: self._unary(
            endpoint, "TransferLeadership", request, timeout, admin=True))
        return response.leader_id, response.term

    # -- consumer groups (docs/client-protocol.md, "Consumer groups") -------------------------------
    def _groups_call(self, what, method, request):
        self._discover_leader()

        def attempt(endpoint, timeout):
            try:
                stub = groups_pb2_grpc.GroupsStub(self.channel(endpoint))
                return getattr(stub, method)(request, timeout=timeout), endpoint
            except grpc.RpcError as error:
                raise errors.from_rpc_error(error, endpoint) from None
        return self._run(what, attempt)

    def commit_offset(self, group, topic, offset):
        """Sets `group`'s offset for `topic` (the next offset it will read) through the replicated
        log; returns (index, term) of the commit entry once it is committed. Retrying is harmless (the
        same value again); the last commit in log order wins."""
        if not 0 <= offset < 1 << 64:
            raise ValueError("offset must be 0..2^64-1")
        request = groups_pb2.CommitOffsetRequest(group=group, topic=topic, offset=offset)
        response, _ = self._groups_call("commit-offset", "CommitOffset", request)
        return response.index, response.term

    def fetch_offsets(self, group, topics=()):
        """The group's committed offsets (every topic it has, or only `topics`), as GroupOffsets; sees
        every commit acknowledged before the call, on whichever node leads."""
        request = groups_pb2.FetchOffsetsRequest(group=group, topics=list(topics))
        response, endpoint = self._groups_call("fetch-offsets", "FetchOffsets", request)
        return GroupOffsets([GroupTopicOffset(o.topic, o.offset, o.commit_index)
                                   for o in response.offsets], response.read_index, endpoint)

    def list_groups(self):
        """Every consumer group with its number of topics, as a GroupListing."""
        response, endpoint = self._groups_call("list-groups", "ListGroups", groups_pb2.ListGroupsRequest())
        return GroupListing([GroupSummary(g.group, g.topics, g.unknown_topics) for g in response.groups],
                                  response.complete, response.read_index, endpoint)

    def flush(self, endpoint):
        """Forces a flush on `endpoint`; returns its flushed index. No retries."""
        return self._unary(endpoint, "Flush", client_pb2.FlushRequest(), self.call_timeout, admin=True).flushed_index

    def trim(self, endpoint, before_index):
        """Asks `endpoint` to delete its whole segments below `before_index`, as far as its safety
        limit allows; returns (first_index, limit). Each node trims its own log. No retries."""
        response = self._unary(endpoint, "Trim", client_pb2.TrimRequest(before_index=before_index),
                               self.call_timeout, admin=True)
        return response.first_index, response.limit
