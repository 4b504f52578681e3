"""Append attempts over raftlog.v1.Log/AppendStream, for the harness's own client (client.py).

A StreamTransport keeps one AppendStream call open to the node its writer is talking to and sends one
request at a time, waiting for that request's answer at most the attempt's timeout. Every attempt ends
in a client.Outcome that client.append() classifies exactly like a unary Append's:
  - an AppendStreamResult's code and ErrorInfo count like a unary status with that code and trailer;
  - a stream that ends (its status and raftlog-error-bin trailer) counts like a unary call ending so:
    a broken or cancelled stream is unknown, a refusal at open (TOO_MANY_PENDING) a definite failure;
  - no answer within the timeout is DEADLINE_EXCEEDED (unknown);
  - an answer that breaks the API's contract (a wrong request_id, several results for one request, code
    0 without a response, a stream ending OK before the client half-closed) is PROTOCOL_ERROR: unknown
    for the append, and an anomaly for the `stream-protocol` checker.
After any of these but a per-result refusal the call is cancelled; the retry opens a new stream.

Threads per open stream, both ended and joined by close(): gRPC's request-consumer thread, which pulls
requests from a queue through _request_iterator() (returns at close: the call half-closes), and a reader
thread that moves each response, then the stream's end, into the answers queue. Every wait is bounded.
"""
import queue
import threading

import grpc

from . import client

PROTOCOL_ERROR = "PROTOCOL_ERROR"
# Answers the reader may queue while the writer has not taken them: one request is unanswered at a time,
# so more than this is a server sending answers nobody asked for; the stream is then cancelled.
MAX_ANSWERS_QUEUED = 4
REQUEST_POLL_S = 0.1            # the request iterator re-checks `closed` this often
READER_JOIN_TIMEOUT_S = 2.0     # a cancelled call's reader ends at once; this only bounds the wait
GRACEFUL_CLOSE_TIMEOUT_S = 1.0  # at a writer's exit: wait this long for the stream to end OK

_CODE_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}
_HALF_CLOSE = object()


def status_code_name(code):
    """The grpc.StatusCode name of an AppendStreamResult's int code, as unary attempts record it."""
    return _CODE_NAMES.get(code, "CODE_%d" % code)


class StreamEnd:
    """How a stream ended: status code name, reason word and leader (from the trailer), message."""

    def __init__(self, code, reason="", leader=None, message=""):
        self.code, self.reason, self.leader, self.message = code, reason, leader, message


def protocol_error(message):
    return client.Outcome(code=PROTOCOL_ERROR, message=message, stream_broken=True)


def result_outcome(result, request_id, by_address):
    """The Outcome of an AppendStreamResult answering `request_id` (by_address: leader address -> node)."""
    if result.request_id != request_id:
        return protocol_error("an answer for request_id %d while %d was unanswered" % (result.request_id, request_id))
    if result.code == 0:
        if not result.HasField("response"):
            return protocol_error("code 0 without a response for request_id %d" % request_id)
        return client.Outcome(response=result.response)
    info = result.error_info
    leader = by_address.get(info.leader_address) if info.leader_address else None
    # The stream stays usable after a refusal (proto/raftlog/v1/client.proto).
    return client.Outcome(code=status_code_name(result.code), reason=info.reason, leader=leader,
                          message=result.message)


def response_outcome(response, request_id, by_address):
    """The Outcome of an AppendStreamResponse received while only `request_id` was unanswered."""
    if len(response.results) != 1:
        return protocol_error("%d results in one message while one request was unanswered" % len(response.results))
    return result_outcome(response.results[0], request_id, by_address)


def end_outcome(end):
    """The Outcome of an append whose stream ended before answering it."""
    if end.code == "OK":
        return protocol_error("the stream ended OK with a request unanswered")
    return client.Outcome(code=end.code, reason=end.reason, leader=end.leader, message=end.message,
                          stream_broken=True)


def timeout_outcome(timeout_s):
    return client.Outcome(code="DEADLINE_EXCEEDED", message="no answer on the stream within %.2f s" % timeout_s,
                          stream_broken=True)


class AppendStreamSession:
    """One open AppendStream call to one node, carrying one append at a time."""

    def __init__(self, cluster, node):
        self.cluster, self.node = cluster, node
        self._requests = queue.Queue()  # at most one request plus the half-close marker (checked in append)
        self._answers = queue.Queue()   # at most MAX_ANSWERS_QUEUED responses plus one StreamEnd (see _read)
        self._closed = threading.Event()
        self._ended = threading.Event()
        self.end = None                 # the StreamEnd, once the reader saw it
        self._next_request_id = 1
        self._call = cluster.log_stub(node).AppendStream(self._request_iterator(), timeout=None)
        self._reader = threading.Thread(target=self._read, name="append-stream-n%s" % node, daemon=True)
        self._reader.start()

    def _request_iterator(self):
        # Runs on gRPC's consumer thread. Returning half-closes the call.
        while not self._closed.is_set():
            try:
                item = self._requests.get(timeout=REQUEST_POLL_S)
            except queue.Empty:
                continue
            if item is _HALF_CLOSE:
                return
            yield item

    def _read(self):
        end = None
        try:
            for response in self._call:
                if self._answers.qsize() >= MAX_ANSWERS_QUEUED:
                    end = StreamEnd(PROTOCOL_ERROR, message="more than %d answers nobody asked for" %
                                    MAX_ANSWERS_QUEUED)
                    self._call.cancel()
                    break
                self._answers.put(response)
            if end is None:
                end = StreamEnd("OK")
        except grpc.RpcError as e:
            reason, leader = self.cluster.error_info(e)
            end = StreamEnd(client.rpc_code_name(e), reason, leader, e.details() if hasattr(e, "details") else "")
        except Exception as e:  # e.g. the channel was closed under the call: the stream is gone
            end = StreamEnd("UNKNOWN", message=repr(e))
        self.end = end
        self._answers.put(end)
        self._ended.set()

    def ended(self):
        return self._ended.is_set()

    def died_idle(self):
        """The stream broke (not OK, not a contract violation) while no request was unanswered and
        nothing unasked-for arrived: no append was sent on it, so it is simply replaced."""
        return (self._ended.is_set() and self.end.code not in ("OK", PROTOCOL_ERROR)
                and self._answers.qsize() == 1)

    def append(self, request, timeout_s):
        """Sends `request` (an AppendRequest) and waits at most `timeout_s` for its answer."""
        if self._closed.is_set():
            raise RuntimeError("append on a closed AppendStream session")
        try:
            early = self._answers.get_nowait()
        except queue.Empty:
            early = None
        if isinstance(early, StreamEnd):  # ended while idle; the request was never sent
            if early.code == "OK":
                return protocol_error("the stream ended OK before the client half-closed")
            return end_outcome(early)
        if early is not None:
            return protocol_error("an answer arrived while no request was unanswered")
        if not self._requests.empty():
            raise AssertionError("a request is still queued: one append at a time")
        request_id = self._next_request_id
        self._next_request_id += 1
        self._requests.put(self.cluster.pb2.AppendStreamRequest(request_id=request_id, append=request))
        try:
            item = self._answers.get(timeout=max(0.0, timeout_s))
        except queue.Empty:
            return timeout_outcome(timeout_s)
        if isinstance(item, StreamEnd):
            if item.code == PROTOCOL_ERROR:
                return protocol_error(item.message)
            return end_outcome(item)
        return response_outcome(item, request_id, self.cluster.by_address)

    def close(self, graceful_timeout_s=0.0):
        """Half-closes the call, waits up to `graceful_timeout_s` for it to end, then cancels it and joins
        the reader. Idempotent. Returns the StreamEnd seen (None if the reader did not end in time)."""
        if not self._closed.is_set():
            self._closed.set()
            self._requests.put(_HALF_CLOSE)
            if graceful_timeout_s > 0:
                self._ended.wait(graceful_timeout_s)
            self._call.cancel()
        self._reader.join(READER_JOIN_TIMEOUT_S)
        return self.end


class StreamTransport:
    """Append attempts over one AppendStream call at a time (client.append's `transport`)."""

    name = "stream"

    def __init__(self, cluster):
        self.cluster = cluster
        self.session = None
        self.streams_opened = 0

    def _drop(self):
        if self.session is not None:
            self.session.close()
            self.session = None

    def attempt(self, node, request, timeout_s):
        session = self.session
        if session is not None and session.node != node:
            self._drop()  # talking to another node now
        elif session is not None and session.died_idle():
            self._drop()  # the node died or stopped between appends: nothing was sent on that stream
        if self.session is None:
            self.session = AppendStreamSession(self.cluster, node)
            self.streams_opened += 1
        outcome = self.session.append(request, timeout_s)
        if outcome.stream_broken:
            self._drop()
        return outcome

    def close(self):
        """Ends the open stream: half-close and a bounded wait for its OK end, then cancel."""
        if self.session is not None:
            self.session.close(GRACEFUL_CLOSE_TIMEOUT_S)
            self.session = None
