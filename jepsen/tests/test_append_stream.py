"""Unit tests of the harness's AppendStream client (raftlog_jepsen/append_stream.py): the classification
of every kind of answer, checked directly and against fake in-process gRPC nodes that script their
answers, with the same scripts run over the unary Append so both transports are shown to classify
alike; and that no stream or thread outlives a transport.
Run: /usr/bin/python3 -m unittest discover -s jepsen/tests"""
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import unittest
from concurrent import futures

import grpc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from raftlog_jepsen import append_stream, checker, client, proto_gen, workload  # noqa: E402

_stub_dir = tempfile.mkdtemp(prefix="rlj-stubs-")
pb2, pb2_grpc = proto_gen.generate(_stub_dir)

# Generous for a loaded 2-core CI machine: only the "hang" scripts ever wait for it.
ATTEMPT_TIMEOUT_S = 1.0
HANG_TIMEOUT_S = 0.4    # the "hang" scripts' attempts: they time out by design
HANG_LIMIT_S = 5.0  # a fake node's "hang" ends by itself after this, whatever the client does
FAILED_PRECONDITION, UNAVAILABLE, RESOURCE_EXHAUSTED = 9, 14, 8


def tearDownModule():
    shutil.rmtree(_stub_dir, ignore_errors=True)


def error_trailer(reason, leader_address=""):
    info = pb2.ErrorInfo(reason=reason, leader_address=leader_address)
    return ((client.ERROR_INFO_KEY, info.SerializeToString()),)


class FakeNode(pb2_grpc.LogServicer):
    """Answers each append (unary or on a stream) with the next action of its script:
      ("ok",)                          committed at the next index
      ("refuse", code, reason, leader) an error status (unary) / result (stream) with that ErrorInfo
      ("hang",)                        no answer until the client gives up
      ("end", code, reason)            the stream ends with that status (unary: the call does)
      ("wrong-id",) ("two-results",) ("ok-without-response",)   stream-only contract violations
      ("ok-then-end", code, reason)    stream only: answers ok, then ends the stream with that status
    A script that runs out answers "ok"."""

    def __init__(self, addresses, budget):
        self.addresses = addresses  # node id -> address, for leader hints
        self.budget = budget        # shared by the cluster's nodes: ends the client's retries
        self.script = []
        self.lock = threading.Lock()
        self.streams_opened = 0
        self.received = []  # (client_id, sequence) of every append received
        self.next_index = 1
        self.refuse_streams = None  # (code, reason): refuse every AppendStream at open

    def _next(self, append):
        self.budget.spend()
        with self.lock:
            self.received.append((append.client_id, append.sequence))
            return self.script.pop(0) if self.script else ("ok",)

    def _response(self, append):
        with self.lock:
            first = self.next_index
            self.next_index += len(append.entries)
        return pb2.AppendResponse(first_index=first, last_index=first + len(append.entries) - 1, term=1)

    @staticmethod
    def _end(context, code, reason):
        """Ends the stream: OK (code 0) by returning, else with `code` and the reason's ErrorInfo."""
        if code == 0:
            return
        context.set_trailing_metadata(error_trailer(reason))
        context.abort(code_enum(code), "ended: " + reason)

    @staticmethod
    def _hang(context):
        deadline = time.monotonic() + HANG_LIMIT_S
        while context.is_active() and time.monotonic() < deadline:
            time.sleep(0.01)

    def Append(self, request, context):
        action = self._next(request)
        if action[0] == "ok":
            return self._response(request)
        if action[0] == "refuse":
            _, code, reason, leader = action
            context.set_trailing_metadata(error_trailer(reason, self.addresses.get(leader, "")))
            context.abort(code_enum(code), "refused: " + reason)
        if action[0] == "hang":
            self._hang(context)
            context.abort(grpc.StatusCode.CANCELLED, "gave up")
        if action[0] == "end":
            _, code, reason = action
            context.set_trailing_metadata(error_trailer(reason))
            context.abort(code_enum(code), "ended: " + reason)
        raise AssertionError("no unary form of %r" % (action,))

    def AppendStream(self, request_iterator, context):
        with self.lock:
            self.streams_opened += 1
        if self.refuse_streams is not None:
            self.budget.spend()
            code, reason = self.refuse_streams
            context.set_trailing_metadata(error_trailer(reason))
            context.abort(code_enum(code), "stream refused: " + reason)
        for request in request_iterator:
            action = self._next(request.append)
            rid = request.request_id
            if action[0] == "ok":
                yield pb2.AppendStreamResponse(results=[pb2.AppendStreamResult(
                    request_id=rid, response=self._response(request.append))])
            elif action[0] == "refuse":
                _, code, reason, leader = action
                info = pb2.ErrorInfo(reason=reason, leader_address=self.addresses.get(leader, ""))
                yield pb2.AppendStreamResponse(results=[pb2.AppendStreamResult(
                    request_id=rid, code=code, message="refused: " + reason, error_info=info)])
            elif action[0] == "hang":
                self._hang(context)
                return
            elif action[0] == "end":
                _, code, reason = action
                self._end(context, code, reason)
                return
            elif action[0] == "wrong-id":
                yield pb2.AppendStreamResponse(results=[pb2.AppendStreamResult(
                    request_id=rid + 7, response=self._response(request.append))])
            elif action[0] == "two-results":
                yield pb2.AppendStreamResponse(results=[
                    pb2.AppendStreamResult(request_id=rid, response=self._response(request.append)),
                    pb2.AppendStreamResult(request_id=rid, response=self._response(request.append))])
            elif action[0] == "ok-then-end":  # answers, then ends the stream before the next request
                yield pb2.AppendStreamResponse(results=[pb2.AppendStreamResult(
                    request_id=rid, response=self._response(request.append))])
                _, code, reason = action
                self._end(context, code, reason)
                return
            elif action[0] == "ok-without-response":
                yield pb2.AppendStreamResponse(results=[pb2.AppendStreamResult(request_id=rid)])


def code_enum(code):
    return {c.value[0]: c for c in grpc.StatusCode}[code]


class AnswerBudget:
    """Sets `stop` (client.append's stop event: no attempt after it) once `left` answers were given,
    so a run of refusals ends after a fixed number of attempts rather than at a deadline that could
    cut the last attempt short (DEADLINE_EXCEEDED) on a slow machine."""

    def __init__(self):
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.left = None

    def reset(self, left):
        with self.lock:
            self.left = left
            self.stop.clear()

    def spend(self):
        with self.lock:
            if self.left is not None:
                self.left -= 1
                if self.left <= 0:
                    self.stop.set()


class FakeCluster:
    def __init__(self, count):
        self.budget = AnswerBudget()
        self.servers = {}
        self.nodes = {}
        addresses = {}
        for node_id in range(1, count + 1):
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
            port = server.add_insecure_port("127.0.0.1:0")
            addresses[node_id] = "127.0.0.1:%d" % port
            self.servers[node_id] = server
        for node_id, server in self.servers.items():
            self.nodes[node_id] = FakeNode(addresses, self.budget)
            pb2_grpc.add_LogServicer_to_server(self.nodes[node_id], server)
            server.start()
        self.client = client.Cluster(pb2, pb2_grpc, addresses)
        for node_id in addresses:  # connected up front: the attempts' timeouts then measure only the answers
            grpc.channel_ready_future(self.client._channel(node_id)).result(timeout=10)

    def stop(self):
        self.client.close()
        for server in self.servers.values():
            server.stop(grace=None).wait(5)


def run_append(cluster, transport_name, sequence=1, deadline_s=2.5, leader_hint=1,
               attempt_timeout_s=ATTEMPT_TIMEOUT_S, answers=None):
    """client.append over `transport_name`; with `answers`, the retries stop after that many answers."""
    cluster.budget.reset(answers)
    transport = (append_stream.StreamTransport(cluster.client) if transport_name == "stream"
                 else client.UnaryTransport(cluster.client))
    cluster.client.leader_hint = leader_hint
    try:
        return client.append(cluster.client, random.Random(sequence), 77, sequence, [b"payload"],
                             time.monotonic() + deadline_s, attempt_timeout_s=attempt_timeout_s,
                             stop=cluster.budget.stop, transport=transport), transport
    finally:
        transport.close()


class ClassificationTest(unittest.TestCase):
    """The pure functions that turn one stream answer into an Outcome."""

    by_address = {"10.0.0.2:7001": 2}

    def test_ok_result_carries_the_response(self):
        result = pb2.AppendStreamResult(request_id=5, response=pb2.AppendResponse(first_index=3, last_index=4))
        outcome = append_stream.result_outcome(result, 5, self.by_address)
        self.assertEqual((outcome.response.first_index, outcome.response.last_index), (3, 4))
        self.assertFalse(outcome.stream_broken)

    def test_refusal_maps_like_the_unary_status(self):
        for code, reason, definite in [(FAILED_PRECONDITION, "NOT_LEADER", True), (FAILED_PRECONDITION, "NO_LEADER", True),
                                       (RESOURCE_EXHAUSTED, "DISK_FULL", True),
                                       (RESOURCE_EXHAUSTED, "DISK_WATERMARK", True), (UNAVAILABLE, "LEADERSHIP_LOST", False),
                                       (UNAVAILABLE, "SHUTTING_DOWN", False), (UNAVAILABLE, "", False)]:
            result = pb2.AppendStreamResult(request_id=1, code=code, message="m", error_info=pb2.ErrorInfo(
                reason=reason, leader_address="10.0.0.2:7001"))
            outcome = append_stream.result_outcome(result, 1, self.by_address)
            self.assertIsNone(outcome.response)
            self.assertEqual(outcome.code, code_enum(code).name)
            self.assertEqual((outcome.reason, outcome.leader), (reason, 2))
            self.assertFalse(outcome.stream_broken, "a refusal leaves the stream open")
            self.assertEqual(client.Attempt(1, outcome.code, outcome.reason, "").definite_failure(), definite)

    def test_contract_violations_are_protocol_errors(self):
        cases = [pb2.AppendStreamResponse(results=[pb2.AppendStreamResult(request_id=2)]),  # wrong id
                 pb2.AppendStreamResponse(results=[pb2.AppendStreamResult(request_id=1)]),  # code 0, no response
                 pb2.AppendStreamResponse(),
                 pb2.AppendStreamResponse(results=[pb2.AppendStreamResult(request_id=1, code=9)] * 2)]
        for response in cases:
            outcome = append_stream.response_outcome(response, 1, self.by_address)
            self.assertEqual(outcome.code, append_stream.PROTOCOL_ERROR, response)
            self.assertTrue(outcome.stream_broken)
            self.assertFalse(client.Attempt(1, outcome.code, outcome.reason, "").definite_failure())

    def test_stream_end_maps_like_the_unary_status(self):
        refused = append_stream.end_outcome(append_stream.StreamEnd("RESOURCE_EXHAUSTED", "TOO_MANY_PENDING"))
        self.assertTrue(client.Attempt(1, refused.code, refused.reason, "").definite_failure())
        for end in [append_stream.StreamEnd("UNAVAILABLE", "SHUTTING_DOWN"), append_stream.StreamEnd("CANCELLED"),
                    append_stream.StreamEnd("UNAVAILABLE")]:
            outcome = append_stream.end_outcome(end)
            self.assertTrue(outcome.stream_broken)
            self.assertFalse(client.Attempt(1, outcome.code, outcome.reason, "").definite_failure())
        self.assertEqual(append_stream.end_outcome(append_stream.StreamEnd("OK")).code, append_stream.PROTOCOL_ERROR)
        self.assertEqual(append_stream.status_code_name(9), "FAILED_PRECONDITION")
        self.assertEqual(append_stream.status_code_name(99), "CODE_99")


class WriterTransportTest(unittest.TestCase):
    def test_mixed_splits_writers_between_both_rpcs(self):
        self.assertEqual([workload.writer_transport("mixed", w) for w in range(4)],
                         ["stream", "unary", "stream", "unary"])
        self.assertEqual({workload.writer_transport("unary", w) for w in range(4)}, {"unary"})
        self.assertEqual({workload.writer_transport("stream", w) for w in range(4)}, {"stream"})
        self.assertRaises(ValueError, workload.writer_transport, "grpc", 0)

    def test_outcomes_are_counted_per_transport(self):
        ops = [{"f": "append", "process": 0, "type": "ok", "transport": "stream", "streams_opened": 1},
               {"f": "append", "process": 0, "type": "info", "transport": "stream", "streams_opened": 3},
               {"f": "append", "process": 1, "type": "ok", "transport": "unary"},
               {"f": "append", "process": 2, "type": "ok"},  # recorded before transports were: unary
               {"f": "append", "process": "final", "type": "ok", "transport": "unary"}]
        counts = checker.outcome_counts(ops)
        self.assertEqual(counts["append"], {"ok": 4, "info": 1})
        self.assertEqual(counts["append_by_transport"], {"stream": {"ok": 1, "info": 1}, "unary": {"ok": 2}})
        self.assertEqual(counts["append_streams_opened"], 4)


class TransportTest(unittest.TestCase):
    """client.append over both transports against fake nodes: same outcome, same attempt codes and
    reasons, same (client_id, sequence) on every retry."""

    def setUp(self):
        self.cluster = FakeCluster(2)

    def tearDown(self):
        self.cluster.stop()

    def both(self, script1, script2=(), sequence=1, **options):
        """Runs the same scripts over each transport; returns {transport: (type, codes, streams_opened)}."""
        seen = {}
        for name in ("unary", "stream"):
            for node, script in ((1, script1), (2, script2)):
                self.cluster.nodes[node].script = list(script)
                self.cluster.nodes[node].received = []
            (kind, response, node, attempts), transport = run_append(self.cluster, name, sequence, **options)
            received = self.cluster.nodes[1].received + self.cluster.nodes[2].received
            self.assertTrue(received, name)
            self.assertEqual(set(received), {(77, sequence)}, "every retry keeps (client_id, sequence)")
            seen[name] = (kind, [(a.code, a.reason) for a in attempts], response is not None,
                          getattr(transport, "streams_opened", None))
        # How many attempts fit before the deadline depends on timing; what each attempt was does not.
        self.assertEqual((seen["unary"][0], set(seen["unary"][1]), seen["unary"][2]),
                         (seen["stream"][0], set(seen["stream"][1]), seen["stream"][2]), seen)
        return seen

    def test_ok_on_one_stream(self):
        seen = self.both([("ok",)])
        self.assertEqual(seen["stream"], ("ok", [], True, 1))

    def test_redirect_follows_the_leader_hint(self):
        seen = self.both([("refuse", FAILED_PRECONDITION, "NOT_LEADER", 2)], [("ok",)])
        self.assertEqual(seen["stream"], ("ok", [("FAILED_PRECONDITION", "NOT_LEADER")], True, 2))

    def test_refusals_only_are_a_definite_failure(self):
        refusals = [("refuse", FAILED_PRECONDITION, "NO_LEADER", None)] * 40
        seen = self.both(refusals, refusals, deadline_s=5.0, answers=4)
        self.assertEqual(len(seen["stream"][1]), 4)
        self.assertEqual(seen["stream"][0], "fail")
        self.assertTrue(all(c == ("FAILED_PRECONDITION", "NO_LEADER") for c in seen["stream"][1]))

    def test_a_refusal_keeps_the_stream_open(self):
        self.cluster.nodes[1].script = [("refuse", FAILED_PRECONDITION, "NO_LEADER", None)] * 3
        self.cluster.client.leader_hint = 1
        transport = append_stream.StreamTransport(self.cluster.client)
        request = pb2.AppendRequest(entries=[b"x"], client_id=5, sequence=1)
        try:
            for _ in range(3):
                outcome = transport.attempt(1, request, ATTEMPT_TIMEOUT_S)
                self.assertEqual((outcome.code, outcome.reason), ("FAILED_PRECONDITION", "NO_LEADER"), outcome.message)
            self.assertIsNotNone(transport.attempt(1, request, ATTEMPT_TIMEOUT_S).response)
        finally:
            transport.close()
        self.assertEqual((transport.streams_opened, self.cluster.nodes[1].streams_opened), (1, 1))

    def test_stream_lost_between_appends(self):
        """A stream that broke while idle carried nothing: it is replaced without an attempt. One that
        ended OK although the client never half-closed breaks the contract."""
        request = pb2.AppendRequest(entries=[b"x"], client_id=5, sequence=1)
        for code, reason, second_code in [(UNAVAILABLE, "SHUTTING_DOWN", "OK"), (0, "", append_stream.PROTOCOL_ERROR)]:
            self.cluster.nodes[1].script = [("ok-then-end", code, reason)]
            transport = append_stream.StreamTransport(self.cluster.client)
            try:
                self.assertIsNotNone(transport.attempt(1, request, ATTEMPT_TIMEOUT_S).response)
                deadline = time.monotonic() + 2.0
                while not transport.session.ended() and time.monotonic() < deadline:
                    time.sleep(0.01)
                self.assertTrue(transport.session.ended())
                self.assertEqual(transport.attempt(1, request, ATTEMPT_TIMEOUT_S).code, second_code)
            finally:
                transport.close()
            self.assertEqual(transport.streams_opened, 2 if second_code == "OK" else 1)

    def test_timeout_is_unknown_and_the_retry_opens_a_new_stream(self):
        seen = self.both([("hang",), ("ok",)], attempt_timeout_s=HANG_TIMEOUT_S)
        self.assertEqual(seen["stream"][:2], ("ok", [("DEADLINE_EXCEEDED", "")]))
        self.assertEqual(seen["stream"][3], 2)
        seen = self.both([("hang",)] * 20, [("hang",)] * 20, deadline_s=1.2, attempt_timeout_s=HANG_TIMEOUT_S)
        self.assertEqual(seen["stream"][0], "info")

    def test_shutting_down_is_unknown(self):
        ends = [("end", UNAVAILABLE, "SHUTTING_DOWN")] * 40
        seen = self.both(ends, ends, deadline_s=5.0, answers=4)
        self.assertEqual(seen["stream"][0], "info")
        self.assertTrue(all(c == ("UNAVAILABLE", "SHUTTING_DOWN") for c in seen["stream"][1]))
        self.assertGreater(seen["stream"][3], 1, "each retry opens a new stream")

    def test_refusal_at_stream_open_counts_like_the_unary_refusal(self):
        for node in (1, 2):
            self.cluster.nodes[node].refuse_streams = (RESOURCE_EXHAUSTED, "TOO_MANY_PENDING")
        (kind, _, _, attempts), _ = run_append(self.cluster, "stream", deadline_s=5.0, answers=3)
        self.assertEqual(kind, "fail")
        self.assertEqual(len(attempts), 3)
        self.assertTrue(all((a.code, a.reason) == ("RESOURCE_EXHAUSTED", "TOO_MANY_PENDING") for a in attempts))

    def test_unreachable_node_is_unknown(self):
        self.cluster.servers[1].stop(grace=None).wait(5)
        self.cluster.servers[2].stop(grace=None).wait(5)
        (kind, _, _, attempts), transport = run_append(self.cluster, "stream", deadline_s=0.8)
        self.assertEqual(kind, "info")
        self.assertTrue(attempts and all(a.code == "UNAVAILABLE" for a in attempts))

    def test_contract_violations_are_unknown_and_reported(self):
        for action in (("wrong-id",), ("two-results",), ("ok-without-response",), ("end", 0, "")):
            # Two violations on each node, then answers: the append ends ok after retries on new streams.
            self.cluster.nodes[1].script = [action] * 2
            self.cluster.nodes[2].script = [action] * 2
            (kind, _, _, attempts), transport = run_append(self.cluster, "stream")
            self.assertEqual(kind, "ok", action)
            self.assertEqual(transport.streams_opened, len(attempts) + 1, "each violation cancels the stream")
            self.assertTrue(attempts and all(a.code == append_stream.PROTOCOL_ERROR for a in attempts),
                            (action, [(a.code, a.message) for a in attempts]))
        op = {"f": "append", "id": 0, "type": "info", "transport": "stream", "protocol_error_count": 1,
              "protocol_errors": ["x"]}
        self.assertFalse(checker.check_stream_protocol([op])["valid"])
        del op["protocol_error_count"]
        self.assertEqual(checker.check_stream_protocol([op]), checker._result(1, []))

    def test_no_thread_outlives_the_transports(self):
        self.both([("hang",), ("refuse", FAILED_PRECONDITION, "NOT_LEADER", 2)], [("ok",)],
                  attempt_timeout_s=HANG_TIMEOUT_S)
        # A closed transport joined its reader thread; gRPC's request-consumer thread ends once the
        # request iterator returns (at most REQUEST_POLL_S after close).
        deadline = time.monotonic() + 2.0
        while stream_threads() and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertEqual(stream_threads(), [])


def stream_threads():
    return [t.name for t in threading.enumerate()
            if "append-stream" in t.name or "consume_request_iterator" in t.name]


if __name__ == "__main__":
    unittest.main()
