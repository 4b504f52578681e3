"""The client's retry, redirect and error rules (docs/client-protocol.md, sections 2-4) against fake
in-process nodes (fake_node.py)."""
import concurrent.futures
import threading
import time
import unittest

import grpc

import raftlog
from raftlog import _retry
from raftlog.v1 import client_pb2

from fake_node import FakeNode, Refusal

FP = grpc.StatusCode.FAILED_PRECONDITION


def ok(first, count=1, duplicate=False):
    return client_pb2.AppendResponse(first_index=first, last_index=first + count - 1, term=3, duplicate=duplicate)


class FakeNodeTest(unittest.TestCase):
    def setUp(self):
        self.nodes = []

    def tearDown(self):
        for node in self.nodes:
            node.stop()

    def node(self, answers=(), stream_answers=()):
        node = FakeNode(answers, stream_answers)
        self.nodes.append(node)
        return node

    def client(self, nodes, **options):
        options.setdefault("retry_deadline", 5.0)
        options.setdefault("call_timeout", 1.0)
        client = raftlog.Client([n.address for n in nodes], client_id=42, **options)
        self.addCleanup(client.close)
        return client


class RetryTest(FakeNodeTest):
    def test_follows_the_leader_hint_in_one_hop(self):
        leader = self.node([ok(7)])
        follower = self.node([Refusal(FP, "NOT_LEADER", {"leader_id": "2", "leader_address": leader.address})])
        client = self.client([follower])  # the leader is not even configured: the hint is enough
        started = time.monotonic()
        result = client.append([b"x"])
        self.assertLess(time.monotonic() - started, 0.5)
        self.assertEqual((result.first_index, result.endpoint, result.sequence), (7, leader.address, 1))
        self.assertEqual(len(follower.requests), 1)
        self.assertEqual(len(leader.requests), 1)
        self.assertEqual(client.endpoints.preferred, leader.address)
        # The next call goes straight to the leader.
        client.append([b"y"])
        self.assertEqual(len(follower.requests), 1)
        self.assertEqual([r.sequence for r in leader.requests], [1, 2])

    def test_redirect_with_only_the_older_trailer(self):
        leader = self.node([ok(1)])
        follower = self.node([Refusal(FP, "NOT_LEADER", {"leader_address": leader.address}, legacy_only=True)])
        self.assertEqual(self.client([follower]).append([b"x"]).endpoint, leader.address)

    def test_unknown_outcome_is_retried_with_the_same_pair_and_entries(self):
        leader = self.node([Refusal(grpc.StatusCode.UNAVAILABLE, "LEADERSHIP_LOST"),
                            Refusal(grpc.StatusCode.DEADLINE_EXCEEDED, "COMMIT_TIMEOUT"), ok(5, 2, duplicate=True)])
        client = self.client([leader])
        result = client.append([b"a", b"b"])
        self.assertTrue(result.duplicate)
        self.assertEqual(len(leader.requests), 3)
        self.assertEqual({(r.client_id, r.sequence, tuple(r.entries)) for r in leader.requests},
                         {(42, 1, (b"a", b"b"))})
        self.assertEqual(client.next_sequence, 2)

    def test_too_many_pending_is_retried_after_a_backoff(self):
        leader = self.node([Refusal(grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_PENDING"), ok(9)])
        self.assertEqual(self.client([leader]).append([b"x"]).first_index, 9)
        self.assertEqual(len(leader.requests), 2)

    def test_too_many_pending_is_retried_on_the_same_node(self):
        # The leader asks for a pause: another node would only redirect back to it.
        leader = self.node([Refusal(grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_PENDING"), ok(9)])
        follower = self.node([Refusal(FP, "NOT_LEADER", {"leader_address": leader.address})])
        result = self.client([leader, follower], discover_leader=False).append([b"x"])
        self.assertEqual((result.first_index, result.endpoint), (9, leader.address))
        self.assertEqual(len(leader.requests), 2)
        self.assertEqual(len(follower.requests), 0)

    def test_a_bad_request_is_raised_at_once_with_its_error_info(self):
        leader = self.node([Refusal(grpc.StatusCode.INVALID_ARGUMENT, "ENTRY_TOO_LARGE", message="too big")])
        client = self.client([leader])
        with self.assertRaises(raftlog.InvalidRequestError) as raised:
            client.append([b"x"])
        self.assertEqual(raised.exception.reason, "ENTRY_TOO_LARGE")
        self.assertEqual(raised.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(raised.exception.message, "too big")
        self.assertEqual(len(leader.requests), 1)
        self.assertEqual(client.next_sequence, 2)  # the number is consumed all the same

    def test_sequence_reused_is_not_retried(self):
        leader = self.node([Refusal(FP, "SEQUENCE_REUSED")])
        with self.assertRaises(raftlog.SequenceReusedError):
            self.client([leader]).append([b"x"])
        self.assertEqual(len(leader.requests), 1)

    def test_giving_up_after_definite_refusals_is_not_unknown(self):
        a = self.node([Refusal(FP, "NO_LEADER")])
        b = self.node([Refusal(FP, "NO_LEADER")])
        with self.assertRaises(raftlog.NoLeaderError) as raised:
            self.client([a, b], retry_deadline=0.3).append([b"x"])
        self.assertNotIsInstance(raised.exception, raftlog.AppendOutcomeUnknownError)
        self.assertIn("gave up", raised.exception.message)
        self.assertGreater(len(a.requests), 0)
        self.assertGreater(len(b.requests), 0)  # NO_LEADER moves on to the next endpoint

    def test_giving_up_after_an_unknown_attempt_says_so(self):
        leader = self.node([Refusal(grpc.StatusCode.DEADLINE_EXCEEDED, "COMMIT_TIMEOUT"), Refusal(FP, "NO_LEADER")])
        with self.assertRaises(raftlog.AppendOutcomeUnknownError) as raised:
            self.client([leader], retry_deadline=0.3).append([b"x"])
        self.assertEqual(raised.exception.sequence, 1)
        self.assertEqual(raised.exception.reason, "NO_LEADER")
        self.assertIsInstance(raised.exception.last_error, raftlog.NoLeaderError)

    def test_unreachable_node_is_unknown_and_the_next_one_is_tried(self):
        dead = self.node([ok(1)])
        dead.stop()
        alive = self.node([ok(4)])
        result = self.client([dead, alive]).append([b"x"])
        self.assertEqual(result.endpoint, alive.address)

    def test_read_errors_carry_the_index_hints(self):
        node = self.node([Refusal(grpc.StatusCode.OUT_OF_RANGE, "INDEX_TRIMMED",
                                  {"first_index": "50", "commit_index": "90"})])
        with self.assertRaises(raftlog.IndexTrimmedError) as raised:
            self.client([node]).read(3)
        self.assertEqual((raised.exception.first_index, raised.exception.commit_index), (50, 90))
        self.assertIsInstance(raised.exception, raftlog.IndexOutOfRangeError)
        self.assertEqual(len(node.requests), 1)  # not retried

    def test_read_follows_short_answers_up_to_the_count(self):
        def answer(request, context):
            first = request.from_index
            count = min(request.max_entries, 3, 10 - first + 1)
            return client_pb2.ReadResponse(commit_index=10, entries=[
                client_pb2.Entry(index=i, term=1, payload=b"e%d" % i) for i in range(first, first + count)])
        node = self.node([answer])
        result = self.client([node]).read(2, count=7)
        self.assertEqual([e.index for e in result.entries], list(range(2, 9)))
        self.assertEqual([r.from_index for r in node.requests], [2, 5, 8])
        self.assertEqual(self.client([node]).read(9, count=100).entries[-1].index, 10)

    def test_producer_batches_the_sends_of_many_threads(self):
        next_index = [1]

        def answer(request, context):
            first = next_index[0]
            next_index[0] += len(request.entries)
            return ok(first, len(request.entries))
        node = self.node([answer])  # no AppendStream: UNIMPLEMENTED, so the producer falls back to unary
        client = self.client([node])
        with raftlog.Producer(client, max_batch_entries=16, linger=0.05) as producer:
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                futures = list(pool.map(lambda i: (i, producer.send(b"p%d" % i)), range(64)))
            self.assertTrue(producer.flush(10))
            indexes = {i: f.result(0) for i, f in futures}
        self.assertEqual(sorted(indexes.values()), list(range(1, 65)))
        self.assertLess(len(node.requests), 64)  # batched
        self.assertTrue(all(len(r.entries) <= 16 for r in node.requests))
        sent = {}
        for r in node.requests:  # each entry landed where its future says
            first = indexes[int(r.entries[0][1:])]
            for offset, payload in enumerate(r.entries):
                sent[first + offset] = payload
        self.assertEqual(sent, {index: b"p%d" % i for i, index in indexes.items()})
        self.assertEqual(len({r.sequence for r in node.requests}), len(node.requests))


class ProducerCloseTest(FakeNodeTest):
    def test_a_send_that_races_close_is_resolved_not_left_waiting(self):
        node = self.node([ok(1)])
        producer = raftlog.Producer(self.client([node]), use_stream=False)
        real_put = producer._queue.put
        passed_check, release = threading.Event(), threading.Event()

        def late_put(item, *args, **kwargs):
            if item is not raftlog.producer._STOP and item[0] == b"late":
                passed_check.set()  # past the _closed check, its put not done: close() runs now
                release.wait(5)
            return real_put(item, *args, **kwargs)
        producer._queue.put = late_put
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            sent = pool.submit(producer.send, b"late")
            self.assertTrue(passed_check.wait(5))
            producer.close(timeout=0.3)  # the worker waits for the sender's put
            release.set()
            future = sent.result(5)
        with self.assertRaises(RuntimeError):
            future.result(5)
        self.assertTrue(producer.flush(5))

    def test_close_with_a_full_queue_returns_within_its_timeout(self):
        answered = threading.Event()

        def slow(request, context):
            answered.wait(3)  # an append that takes long: the worker is busy, the queue stays full
            return ok(1, len(request.entries))
        node = self.node([slow])
        producer = raftlog.Producer(self.client([node]), max_queued_entries=1, linger=0, use_stream=False)
        first = producer.send(b"a")
        deadline = time.monotonic() + 5
        while len(node.requests) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)  # wait for the worker to be inside the first append
        second = producer.send(b"b", timeout=5)  # fills the queue
        started = time.monotonic()
        producer.close(timeout=0.3)
        self.assertLess(time.monotonic() - started, 1.5)
        answered.set()
        self.assertEqual(first.result(5), 1)
        self.assertEqual(second.result(5), 1)  # the worker still appends what was queued, then stops
        producer._worker.join(5)
        self.assertFalse(producer._worker.is_alive())


class StreamTest(FakeNodeTest):
    def test_stream_refusal_redirects_and_the_stream_carries_on(self):
        leader = self.node(stream_answers=[ok(3), ok(4)])
        follower = self.node(stream_answers=[Refusal(FP, "NOT_LEADER", {"leader_address": leader.address})])
        client = self.client([follower], discover_leader=False)
        with client.append_stream() as stream:
            first = stream.append([b"a"])
            second = stream.append([b"b"])
        self.assertEqual((first.first_index, first.endpoint, first.sequence), (3, leader.address, 1))
        self.assertEqual((second.first_index, second.sequence), (4, 2))
        self.assertEqual(leader.streams_opened, 1)  # both appends on one stream
        self.assertEqual(len(follower.requests), 1)

    def test_a_broken_stream_is_retried_on_a_new_one_with_the_same_pair(self):
        node = self.node(stream_answers=[Refusal(grpc.StatusCode.UNAVAILABLE, "SHUTTING_DOWN", ends_stream=True),
                                         ok(8, duplicate=True)])
        client = self.client([node], discover_leader=False)
        with client.append_stream() as stream:
            result = stream.append([b"x"])
        self.assertTrue(result.duplicate)
        self.assertEqual(node.streams_opened, 2)
        self.assertEqual([(r.sequence, tuple(r.entries)) for r in node.requests], [(1, (b"x",))] * 2)

    def test_a_broken_stream_then_refusals_is_unknown(self):
        node = self.node(stream_answers=[Refusal(grpc.StatusCode.INTERNAL, "", ends_stream=True),
                                         Refusal(FP, "NO_LEADER")])
        with self.client([node], discover_leader=False, retry_deadline=0.3).append_stream() as stream:
            with self.assertRaises(raftlog.AppendOutcomeUnknownError):
                stream.append([b"x"])

    def test_a_stream_refusal_that_is_definite_is_raised_typed(self):
        node = self.node(stream_answers=[Refusal(grpc.StatusCode.INVALID_ARGUMENT, "TOO_MANY_ENTRIES")])
        with self.client([node], discover_leader=False).append_stream() as stream:
            with self.assertRaises(raftlog.InvalidRequestError) as raised:
                stream.append([b"x"])
        self.assertEqual(raised.exception.reason, "TOO_MANY_ENTRIES")
        self.assertEqual(len(node.requests), 1)

    def test_the_unary_fallback_after_a_stream_end_gets_only_the_time_left(self):
        # The stream is refused after 0.5 s of a 2 s attempt: the unary call that replaces it must
        # not get a fresh 2 s, or the attempt overruns its timeout (and the retry deadline).
        busy = Refusal(grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_PENDING", ends_stream=True, delay=0.5)
        node = self.node([ok(3)], stream_answers=[busy])
        with self.client([node], call_timeout=2.0).append_stream() as stream:
            result = stream.append([b"x"])
        self.assertEqual(result.first_index, 3)
        self.assertEqual(len(node.unary_time_remaining), 1)
        self.assertLess(node.unary_time_remaining[0], 1.6)

    def test_a_node_without_streams_gets_unary_calls(self):
        node = self.node(answers=[ok(2)])
        with self.client([node], discover_leader=False).append_stream() as stream:
            self.assertEqual(stream.append([b"x"]).first_index, 2)
            self.assertEqual(stream.append([b"y"]).first_index, 2)
        self.assertEqual(node.streams_opened, 1)  # not asked again for a while


def tail_message(*indexes):
    return client_pb2.TailResponse(entries=[client_pb2.Entry(index=i, term=1, payload=b"e%d" % i) for i in indexes])


class DiscoveryAndTailTest(FakeNodeTest):
    def test_discovery_sends_the_first_append_to_the_leader_a_follower_names(self):
        leader = self.node([ok(1)])
        follower = self.node([Refusal(FP, "NOT_LEADER", {"leader_address": leader.address})])
        follower.status = client_pb2.StatusResponse(node_id=1, role=client_pb2.ROLE_FOLLOWER, leader_id=2,
                                                    leader_address=leader.address)
        result = self.client([follower]).append([b"x"])
        self.assertEqual(result.endpoint, leader.address)
        self.assertEqual(len(follower.requests), 0)  # no redirect needed

    def test_tail_resumes_on_the_next_node_at_the_next_index_skipping_the_overlap(self):
        a = self.node()
        b = self.node()
        a.tails = [[tail_message(1, 2), tail_message(3), Refusal(grpc.StatusCode.UNAVAILABLE, "SHUTTING_DOWN")]]
        b.tails = [[tail_message(3, 4, 5)]]
        tail = self.client([a, b]).tail(1)
        got = []
        for entry in tail:
            got.append(entry.index)
            if entry.index == 5:
                break
        tail.close()
        self.assertEqual(got, [1, 2, 3, 4, 5])
        self.assertEqual([r.from_index for r in b.tail_requests], [4])
        self.assertEqual(tail.next_index, 6)

    def test_tail_refuses_a_gap(self):
        node = self.node()
        node.tails = [[tail_message(1, 2, 4)]]
        got = []
        with self.assertRaises(raftlog.ProtocolError):
            for entry in self.client([node]).tail(1):
                got.append(entry.index)
        self.assertEqual(got, [1, 2])

    def test_tail_ends_typed_on_a_trimmed_range(self):
        node = self.node()
        node.tails = [[Refusal(grpc.StatusCode.OUT_OF_RANGE, "INDEX_TRIMMED", {"first_index": "40"})]]
        with self.assertRaises(raftlog.IndexTrimmedError) as raised:
            list(self.client([node]).tail(1))
        self.assertEqual(raised.exception.first_index, 40)
        self.assertEqual(len(node.tail_requests), 1)

    def test_tail_on_a_quiet_log_resumes_when_its_node_fails(self):
        quiet = self.node()
        survivor = self.node()
        # A stream idle for over twice the retry deadline was healthy: its end starts the stall clock.
        quiet.tails = [[0.7, Refusal(grpc.StatusCode.UNAVAILABLE, "SHUTTING_DOWN")]]
        survivor.tails = [[tail_message(7)]]
        tail = self.client([quiet, survivor], retry_deadline=0.3, call_timeout=0.1).tail(7)
        got = [next(iter(tail)).index]
        tail.close()
        self.assertEqual(got, [7])
        self.assertEqual([r.from_index for r in survivor.tail_requests], [7])

    def test_tail_moves_on_from_a_node_that_does_not_accept_the_stream(self):
        wedged = self.node()
        wedged.accept_tails = False  # takes the call, sends nothing for 5 s (a quiet log, no signal)
        wedged.tails = [[5.0]]
        survivor = self.node()
        survivor.tails = [[tail_message(3)]]
        started = time.monotonic()
        tail = self.client([wedged, survivor], call_timeout=0.3).tail(3)
        got = [next(iter(tail)).index]
        tail.close()
        self.assertEqual(got, [3])
        self.assertLess(time.monotonic() - started, 3)  # left after the call timeout, not after 5 s
        self.assertEqual(len(wedged.tail_requests), 1)

    def test_tail_counts_accepted_streams_as_working_without_waiting_for_the_call_timeout(self):
        node = self.node()
        # Eight accepted streams that each end after 60 ms without an entry (a node restarting), then
        # one that serves: together longer than the retry deadline, yet each was a working stream.
        node.tails = [[0.06, Refusal(grpc.StatusCode.UNAVAILABLE, "SHUTTING_DOWN")] for _ in range(8)]
        node.tails.append([tail_message(5)])
        tail = self.client([node], retry_deadline=0.3, call_timeout=5.0).tail(5)
        got = [next(iter(tail)).index]
        tail.close()
        self.assertEqual(got, [5])
        self.assertEqual(len(node.tail_requests), 9)

    def test_tail_gives_up_when_no_node_serves_it(self):
        node = self.node()  # every stream ends UNAVAILABLE at once
        started = time.monotonic()
        with self.assertRaises(raftlog.UnavailableError) as raised:
            list(self.client([node], retry_deadline=0.3).tail(7))
        self.assertLess(time.monotonic() - started, 3)
        self.assertIn("no node served index 7", raised.exception.message)


class RulesTest(unittest.TestCase):
    def test_classification(self):
        def error(code, reason=""):
            return raftlog.errors.make_error(code, "m", reason)
        self.assertTrue(_retry.attempt_was_definite(error(FP, "NOT_LEADER")))
        self.assertTrue(_retry.attempt_was_definite(error(grpc.StatusCode.RESOURCE_EXHAUSTED, "DISK_FULL")))
        self.assertFalse(_retry.attempt_was_definite(error(grpc.StatusCode.UNAVAILABLE, "LEADERSHIP_LOST")))
        self.assertFalse(_retry.attempt_was_definite(error(grpc.StatusCode.UNAVAILABLE)))
        self.assertTrue(_retry.attempt_was_definite(error(grpc.StatusCode.RESOURCE_EXHAUSTED)))
        self.assertFalse(_retry.attempt_was_definite(error(grpc.StatusCode.RESOURCE_EXHAUSTED), unary=False))
        self.assertTrue(_retry.is_retried(error(grpc.StatusCode.DEADLINE_EXCEEDED, "COMMIT_TIMEOUT")))
        self.assertFalse(_retry.is_retried(error(grpc.StatusCode.RESOURCE_EXHAUSTED, "DISK_WATERMARK")))
        self.assertFalse(_retry.is_retried(error(grpc.StatusCode.UNAVAILABLE, "TRANSFER_TIMEOUT")))
        self.assertFalse(_retry.is_retried(error(grpc.StatusCode.OUT_OF_RANGE, "INDEX_NOT_YET_COMMITTED")))
        self.assertIsInstance(error(grpc.StatusCode.DATA_LOSS, "CORRUPT_ENTRY"), raftlog.CorruptEntryError)
        self.assertIsInstance(error(grpc.StatusCode.UNAVAILABLE, "NOT_LEADER"), raftlog.UnavailableError)

    def test_bad_trailers_are_ignored(self):
        self.assertEqual(raftlog.errors.details_from_trailers([("grpc-status-details-bin", b"\xff\xff")]), ("", {}))

    def test_endpoints_are_validated(self):
        for bad in ("", "host", "h:0", "h:70000", "a:1,a:1", ",".join("h:%d" % p for p in range(1, 66))):
            with self.assertRaises(ValueError, msg=bad):
                raftlog.parse_endpoints(bad)
        self.assertEqual(raftlog.parse_endpoints(" a:1, [::1]:2"), ["a:1", "[::1]:2"])

    def test_entries_must_be_bytes(self):
        client = raftlog.Client("127.0.0.1:1")
        with self.assertRaises(TypeError):
            client.append(b"not a list")
        with self.assertRaises(TypeError):
            client.append(["text"])
        with self.assertRaises(raftlog.InvalidRequestError):
            client.append([])
        self.assertEqual(client.next_sequence, 1)  # refused locally: no number taken


if __name__ == "__main__":
    unittest.main()
