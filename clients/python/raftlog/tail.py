"""Tail: follows the log from an index on, across node failures (docs/client-protocol.md, section 6).

It keeps `next_index`, the next index not yet delivered. When a stream ends for a reason another node
(or a moment) can fix, it opens Tail(next_index) on the next endpoint after a backoff; an entry below
next_index is skipped, one above it is a gap: ProtocolError, never delivered. It ends with the error
when the range is refused (INDEX_TRIMMED, BAD_INDEX_RANGE, ...) or when it has had no working stream
for the client's retry_deadline: the clock restarts at each entry and at the end of an established
stream (one the node accepted, which it signals at once with the raftlog-tail-accepted initial
metadata, or one that delivered an entry), so a stream idle on a quiet log for longer than the
deadline still resumes elsewhere when its node fails. A node that neither accepts nor ends a stream
within call_timeout (unreachable, wedged) is left for the next endpoint.
"""
import threading
import time

import grpc

from . import errors
from ._stubs import client_pb2
from .types import Entry

# Stream ends worth another stream, on another node (the C++ library's list, client/tail.cpp).
_RESUMED_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED,
                            grpc.StatusCode.ABORTED, grpc.StatusCode.RESOURCE_EXHAUSTED})
ACCEPTED_KEY = "raftlog-tail-accepted"  # src/api_errors/error_details.h
MAX_STREAMS_PER_TAIL = 1_000_000  # a bound on reconnects; the stall deadline ends a dead cluster's tail first


def worth_resuming(error):
    return error.code in _RESUMED_CODES or isinstance(error, errors.LeaderError)


def wait_until_accepted(call, timeout):
    """Waits for the stream's initial metadata: True when the node accepted the Tail (the headers
    carry ACCEPTED_KEY), False when it refused it (the stream ended without it, or a node from before
    the signal sent headers with its first entry), None when neither came within `timeout`: the call
    is then cancelled."""
    received = threading.Event()
    gave_up = threading.Event()

    def give_up():
        if not received.is_set():
            gave_up.set()
            call.cancel()

    timer = threading.Timer(timeout, give_up)
    timer.daemon = True
    timer.start()
    try:
        metadata = call.initial_metadata() or ()
    finally:
        received.set()
        timer.cancel()
    if gave_up.is_set():
        return None
    return any(key == ACCEPTED_KEY for key, _ in metadata)


class Tail:
    """Iterable of Entry. Thread-safe close(); `next_index` is where a new tail would resume."""

    def __init__(self, client, from_index, max_bytes_per_message=0):
        if from_index < 1:
            raise errors.InvalidRequestError(grpc.StatusCode.INVALID_ARGUMENT, "indexes start at 1", "BAD_INDEX_RANGE")
        self._client = client
        self.next_index = from_index
        self._max_bytes = max_bytes_per_message
        self._lock = threading.Lock()
        self._call = None
        self._closed = threading.Event()
        self.streams_opened = 0  # for tests and diagnostics: how many Tail calls this tail made
        self.endpoint = ""       # the node of the current (or last) stream

    def close(self):
        self._closed.set()
        with self._lock:
            if self._call is not None:
                self._call.cancel()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __iter__(self):
        client = self._client
        target = client.endpoints.preferred
        backoff = client._backoff()
        stall_since = time.monotonic()  # when the tail last had a working stream
        for _ in range(MAX_STREAMS_PER_TAIL):
            if self._closed.is_set():
                return
            progressed = False
            ended = None
            self.endpoint = target
            call = client.log_stub(target).Tail(
                client_pb2.TailRequest(from_index=self.next_index, max_bytes_per_message=self._max_bytes))
            with self._lock:
                self._call = call
            self.streams_opened += 1
            accepted = wait_until_accepted(call, client.call_timeout)
            try:
                if accepted is None and not self._closed.is_set():
                    raise errors.UnavailableError(grpc.StatusCode.UNAVAILABLE,
                                                  "the node did not accept the tail stream within %.0f ms"
                                                  % (client.call_timeout * 1000), endpoint=target)
                for message in call:
                    for wire in message.entries:
                        if wire.index < self.next_index:
                            continue  # delivered before the reconnect
                        if wire.index > self.next_index:
                            raise errors.ProtocolError(grpc.StatusCode.DATA_LOSS, "tail jumped from index %d to %d"
                                                       % (self.next_index, wire.index), endpoint=target)
                        self.next_index += 1
                        progressed = True
                        yield Entry.from_wire(wire)
                ended = errors.UnavailableError(grpc.StatusCode.UNAVAILABLE, "the server ended the tail stream",
                                                endpoint=target)
            except grpc.RpcError as error:
                ended = errors.from_rpc_error(error, target)
            except errors.UnavailableError as error:  # not accepted in time (above)
                ended = error
            finally:
                with self._lock:
                    self._call = None
                call.cancel()
            if self._closed.is_set():
                return
            if progressed or accepted:
                stall_since = time.monotonic()  # an established stream ended: the first failure
            if progressed:
                backoff.reset()
                client.endpoints.prefer(target)
            if not worth_resuming(ended):
                raise ended
            stalled = time.monotonic() - stall_since
            if stalled > client.retry_deadline:
                raise ended.with_message("tail: no node served index %d for %.0f ms; last error: %s"
                                         % (self.next_index, stalled * 1000, ended))
            target = client.endpoints.next_after(target)
            self._closed.wait(backoff.next_sleep())
