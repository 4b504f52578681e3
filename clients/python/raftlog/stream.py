"""AppendStream: the appends of Client.append() over one long-lived Log/AppendStream call
(docs/client-protocol.md, section 5), which saves the per-call cost of a unary RPC.

One request is in flight at a time (the Client's append lock: one append in flight per client_id), so
the answer to wait for is always the one request unanswered. An answer's refusal is classified like a
unary status and leaves the stream open. A stream that ends, breaks the contract or answers late is
abandoned (cancelled); its unanswered request counts as unknown (maybe applied) and is retried, with
the same (client_id, sequence), on a new stream. A node that answers the stream with UNIMPLEMENTED or
RESOURCE_EXHAUSTED (too many streams, a message over its bound) is sent unary Append calls for a while.

Threads per open stream, both ended by close(): gRPC's request-consumer thread, which takes requests
from a queue (a sentinel half-closes the call), and a reader thread that queues each answer and then
the stream's end.
"""
import queue
import threading
import time

import grpc

from . import errors
from ._stubs import client_pb2

UNARY_FALLBACK_S = 30.0  # after UNIMPLEMENTED or RESOURCE_EXHAUSTED at open: unary calls to that node this long
MAX_ANSWERS_QUEUED = 8   # one request is unanswered at a time: more is a server sending answers nobody asked for
READER_JOIN_S = 2.0      # bounds the wait for a cancelled call's reader (it ends at once)
_HALF_CLOSE = object()


class _StreamEnd:
    def __init__(self, error):
        self.error = error  # None: ended OK


class _OpenStream:
    """One AppendStream call to one endpoint."""

    def __init__(self, client, endpoint):
        self.endpoint = endpoint
        self.requests = queue.Queue()
        self.answers = queue.Queue(maxsize=MAX_ANSWERS_QUEUED)
        self.call = client.log_stub(endpoint).AppendStream(self._request_iterator())
        self.ended = False
        self.reader = threading.Thread(target=self._read, name="raftlog-append-stream", daemon=True)
        self.reader.start()

    def _request_iterator(self):
        while True:
            item = self.requests.get()
            if item is _HALF_CLOSE:
                return
            yield item

    def _read(self):
        end = None
        try:
            for response in self.call:
                try:
                    self.answers.put(response, timeout=1.0)
                except queue.Full:
                    end = errors.ProtocolError(grpc.StatusCode.INTERNAL, "answers that no request asked for",
                                               endpoint=self.endpoint)
                    self.call.cancel()
                    break
        except grpc.RpcError as error:
            end = errors.from_rpc_error(error, self.endpoint)
        self._put_end(_StreamEnd(end))

    def _put_end(self, end):
        while True:  # the queue has room once the writer drains it; a cancelled stream is not read again
            try:
                self.answers.put(end, timeout=0.1)
                return
            except queue.Full:
                try:
                    self.answers.get_nowait()
                except queue.Empty:
                    pass

    def close(self, graceful):
        self.ended = True
        self.requests.put(_HALF_CLOSE)
        if not graceful:
            self.call.cancel()
        self.reader.join(READER_JOIN_S)
        if self.reader.is_alive():
            self.call.cancel()
            self.reader.join(READER_JOIN_S)


def _stream_ended(error):
    error.stream_ended = True  # its request may have been read and proposed: unknown (raftlog._retry)
    return error


class AppendStream:
    """Appends over one AppendStream call; see Client.append() for the semantics of append()."""

    def __init__(self, client):
        self._client = client
        self._stream = None
        self._next_request_id = 1
        self._unary_until = {}  # endpoint -> monotonic time until which it gets unary calls

    def append(self, entries):
        from .client import _payloads
        payloads = _payloads(entries)
        with self._client._append_lock:
            request = self._client._append_request(payloads)
            maybe_applied = []
            return self._client.run_append(
                request, lambda endpoint, timeout: self._attempt(endpoint, request, timeout, maybe_applied),
                maybe_applied)

    def close(self):
        with self._client._append_lock:
            self._drop(graceful=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _drop(self, graceful):
        if self._stream is not None:
            self._stream.close(graceful)
            self._stream = None

    def _attempt(self, endpoint, request, timeout, maybe_applied):
        started = time.monotonic()
        if self._unary_until.get(endpoint, 0) > time.monotonic():
            return self._client._unary(endpoint, "Append", request, timeout), endpoint
        if self._stream is not None and (self._stream.endpoint != endpoint or self._stream.ended):
            self._drop(graceful=True)
        if self._stream is None:
            self._stream = _OpenStream(self._client, endpoint)
        stream = self._stream
        request_id = self._next_request_id
        self._next_request_id += 1
        stream.requests.put(client_pb2.AppendStreamRequest(request_id=request_id, append=request))
        try:
            answer = stream.answers.get(timeout=timeout)
        except queue.Empty:
            self._drop(graceful=False)
            raise _stream_ended(errors.DeadlineExceededError(
                grpc.StatusCode.DEADLINE_EXCEEDED, "no answer on the AppendStream within %.1f s" % timeout,
                endpoint=endpoint)) from None
        if isinstance(answer, _StreamEnd):
            self._drop(graceful=False)
            error = answer.error or errors.ProtocolError(
                grpc.StatusCode.INTERNAL, "the stream ended OK with a request unanswered", endpoint=endpoint)
            if error.code in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.RESOURCE_EXHAUSTED):
                # No stream for this node for a while; this attempt goes unary at once. A stream cut
                # off after it read the request (a stall, a message over the bound) leaves that
                # request unknown; a refusal at open (TOO_MANY_PENDING, UNIMPLEMENTED) read nothing.
                if error.code == grpc.StatusCode.RESOURCE_EXHAUSTED and error.reason != "TOO_MANY_PENDING":
                    maybe_applied.append(error)
                self._unary_until[endpoint] = time.monotonic() + UNARY_FALLBACK_S
                # The fallback is part of this attempt: only the time left of its timeout.
                remaining = timeout - (time.monotonic() - started)
                if remaining <= 0:
                    raise _stream_ended(error)
                return self._client._unary(endpoint, "Append", request, remaining), endpoint
            raise _stream_ended(error)
        results = list(answer.results)
        if len(results) != 1 or results[0].request_id != request_id:
            self._drop(graceful=False)
            raise _stream_ended(errors.ProtocolError(
                grpc.StatusCode.INTERNAL, "answer %s while only request %d was unanswered"
                % ([r.request_id for r in results], request_id), endpoint=endpoint))
        result = results[0]
        if result.code != 0:
            raise errors.from_stream_result(result, endpoint)  # the stream stays open
        if not result.HasField("response"):
            self._drop(graceful=False)
            raise _stream_ended(errors.ProtocolError(grpc.StatusCode.INTERNAL, "code 0 without a response",
                                                     endpoint=endpoint))
        return result.response, endpoint
