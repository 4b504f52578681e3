"""Fake raftlog nodes: in-process gRPC servers on 127.0.0.1 whose Log methods answer from a script,
so the client's retry, redirect and classification rules can be tested without a cluster. Refusals
carry the details the way a real node sends them (docs/errors.md): grpc-status-details-bin with a
google.rpc.Status holding an ErrorInfo, and raftlog-error-bin."""
import concurrent.futures
import threading
import time

import grpc

from raftlog.v1 import client_pb2, client_pb2_grpc, error_model_pb2


def status_details(code, message, reason, metadata):
    info = error_model_pb2.ErrorInfo(reason=reason, domain="raftlog.v1", metadata=metadata)
    status = error_model_pb2.Status(code=code.value[0], message=message)
    status.details.add().Pack(info)
    return status.SerializeToString()


class Refusal:
    def __init__(self, code, reason, metadata=None, message="refused", legacy_only=False, ends_stream=False,
                 delay=0.0):
        self.code, self.reason, self.metadata, self.message = code, reason, dict(metadata or {}), message
        self.legacy_only, self.ends_stream = legacy_only, ends_stream
        self.delay = delay  # seconds an ends_stream refusal waits before ending the stream

    def abort(self, context):
        legacy = client_pb2.ErrorInfo(reason=self.reason, leader_address=self.metadata.get("leader_address", ""),
                                      leader_id=int(self.metadata.get("leader_id", "0")))
        trailers = [("raftlog-error-bin", legacy.SerializeToString())]
        if not self.legacy_only:
            trailers.append(("grpc-status-details-bin",
                             status_details(self.code, self.message, self.reason, self.metadata)))
        context.set_trailing_metadata(trailers)
        context.abort(self.code, self.message)


class FakeNode(client_pb2_grpc.LogServicer):
    """answers: a list consumed one per Append call; each a Refusal, an AppendResponse, or a callable
    (request, context) -> AppendResponse. When exhausted, the last one repeats."""

    def __init__(self, answers=None, stream_answers=None):
        self.answers = list(answers or [])
        self.stream_answers = list(stream_answers or [])
        self.streams_opened = 0
        self.status = None       # a StatusResponse to answer Status with (None: UNIMPLEMENTED)
        self.tails = []          # one script per Tail call (see Tail)
        self.accept_tails = True  # False: a node that never sends a Tail's "accepted" headers
        self.tail_requests = []
        self.requests = []  # every AppendRequest received, in order
        self.unary_time_remaining = []  # seconds left until each unary call's deadline, on arrival
        self.lock = threading.Lock()
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4))
        client_pb2_grpc.add_LogServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.address = "127.0.0.1:%d" % self.port
        self.server.start()

    def stop(self):
        self.server.stop(grace=None)

    def _next(self):
        with self.lock:
            if len(self.answers) > 1:
                return self.answers.pop(0)
            return self.answers[0]

    def _answer(self, request, context):
        with self.lock:
            self.requests.append(request)
            self.unary_time_remaining.append(context.time_remaining())
        answer = self._next()
        if callable(answer):
            answer = answer(request, context)
        if isinstance(answer, Refusal):
            answer.abort(context)
        return answer

    def Append(self, request, context):
        return self._answer(request, context)

    def Read(self, request, context):
        return self._answer(request, context)

    def AppendStream(self, request_iterator, context):
        """Each request is answered from the same script as Append: a Refusal becomes an
        AppendStreamResult with its code and ErrorInfo, unless it is `ends_stream`, which ends the
        whole call with it (a broken stream); no stream_answers: UNIMPLEMENTED, as an older node."""
        with self.lock:
            self.streams_opened += 1
        if not self.stream_answers:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "the fake has no AppendStream")
        for stream_request in request_iterator:
            with self.lock:
                self.requests.append(stream_request.append)
                answer = self.stream_answers.pop(0) if len(self.stream_answers) > 1 else self.stream_answers[0]
            result = client_pb2.AppendStreamResult(request_id=stream_request.request_id)
            if isinstance(answer, Refusal):
                if answer.ends_stream:
                    time.sleep(answer.delay)
                    answer.abort(context)
                result.code = answer.code.value[0]
                result.message = answer.message
                result.error_info.reason = answer.reason
                result.error_info.leader_address = answer.metadata.get("leader_address", "")
            else:
                result.response.CopyFrom(answer)
            yield client_pb2.AppendStreamResponse(results=[result])

    def Status(self, request, context):
        if self.status is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "the fake has no Status")
        return self.status

    def Tail(self, request, context):
        """Streams the entries of the next script in tails (a list of TailResponse or of float seconds
        to stay idle, then an optional final Refusal that ends the stream); a script-less stream ends
        UNAVAILABLE. A stream whose script does not start with a Refusal is accepted first (the
        raftlog-tail-accepted headers) unless accept_tails is False."""
        with self.lock:
            self.tail_requests.append(request)
            script = self.tails.pop(0) if self.tails else [Refusal(grpc.StatusCode.UNAVAILABLE, "SHUTTING_DOWN")]
        # As raftlogd: a stream it takes is signalled at once; one refused at open is not.
        if self.accept_tails and not (script and isinstance(script[0], Refusal)):
            context.send_initial_metadata((("raftlog-tail-accepted", str(request.from_index)),))
        for item in script:
            if isinstance(item, float):
                context_done = threading.Event()
                context.add_callback(context_done.set)
                context_done.wait(item)  # an idle stream on a quiet log, until the client cancels
                continue
            if isinstance(item, Refusal):
                item.abort(context)
            yield item
