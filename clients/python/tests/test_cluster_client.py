"""The Python client against a real 3-node cluster of raftlogd processes on 127.0.0.1 (local_cluster.py):
appends, reads and tails, redirects from a follower, typed errors, idempotent retries, and a leader
kill -9 during appends and under a tail."""
import os
import subprocess
import sys
import threading
import time
import unittest

import grpc

import raftlog
from raftlog.v1 import client_pb2

from local_cluster import LocalCluster, wait_until

CLIENT_OPTIONS = dict(call_timeout=2.0, retry_deadline=15.0)


class ClusterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = LocalCluster(nodes=3)
        try:
            cls.cluster.start_all()
            cls.client = raftlog.Client(cls.cluster.endpoints, **CLIENT_OPTIONS)
            cls.cluster.leader(cls.client)
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "client", None) is not None:
            cls.client.close()
        cls.cluster.close()

    def leader_and_follower(self):
        leader = self.cluster.leader(self.client)
        follower = next(node for node in sorted(self.cluster.processes) if node != leader)
        return leader, follower

    def test_append_read_and_tail(self):
        result = self.client.append([b"one", b"two", b"three"])
        self.assertEqual(result.last_index - result.first_index, 2)
        self.assertFalse(result.duplicate)
        read = self.client.read(result.first_index, count=3, linearizable=True)
        self.assertEqual([e.payload for e in read.entries], [b"one", b"two", b"three"])
        self.assertEqual([e.index for e in read.entries], list(range(result.first_index, result.last_index + 1)))
        self.assertTrue(all(e.client_id == self.client.client_id and e.sequence == result.sequence
                            for e in read.entries))
        self.assertGreaterEqual(read.commit_index, result.last_index)
        with self.client.append_stream() as stream:
            streamed = stream.append([b"four"])
        self.assertEqual(streamed.first_index, result.last_index + 1)
        self.assertEqual(streamed.sequence, result.sequence + 1)
        with self.client.tail(result.first_index) as tail:
            got = []
            for entry in tail:
                got.append(entry)
                if entry.index == streamed.first_index:
                    break
        self.assertEqual([e.payload for e in got], [b"one", b"two", b"three", b"four"])

    def test_tail_sees_entries_appended_after_it_started(self):
        start = self.client.append([b"before"]).last_index + 1
        seen = []
        tail = self.client.tail(start)

        def follow():
            for entry in tail:
                if entry.type == "normal":
                    seen.append(entry.payload)
        follower = threading.Thread(target=follow)
        follower.start()
        try:
            for i in range(5):
                self.client.append([b"later-%d" % i])
            wait_until(lambda: len(seen) >= 5, 10, "the tail to deliver 5 new entries")
        finally:
            tail.close()
            follower.join(10)
        self.assertFalse(follower.is_alive())
        self.assertEqual(seen, [b"later-%d" % i for i in range(5)])

    def test_redirect_from_a_follower(self):
        leader, follower = self.leader_and_follower()
        # Only the follower is configured and no Status discovery: the NOT_LEADER hint must lead there.
        with raftlog.Client([self.cluster.address(follower)], discover_leader=False, **CLIENT_OPTIONS) as client:
            result = client.append([b"redirected"])
            self.assertEqual(result.endpoint, self.cluster.address(leader))
            self.assertEqual(client.endpoints.preferred, self.cluster.address(leader))
            read = client.read(result.first_index, count=1, linearizable=True)
            self.assertEqual(read.entries[0].payload, b"redirected")
            self.assertEqual(read.endpoint, self.cluster.address(leader))
        # The refusal itself, as a typed error with the standard ErrorInfo.
        stub = self.client.log_stub(self.cluster.address(follower))
        with self.assertRaises(grpc.RpcError) as raised:
            stub.Read(client_pb2.ReadRequest(from_index=1, linearizable=True), timeout=5)
        error = raftlog.errors.from_rpc_error(raised.exception)
        self.assertIsInstance(error, raftlog.NotLeaderError)
        self.assertEqual((error.reason, error.leader_id, error.leader_address),
                         ("NOT_LEADER", leader, self.cluster.address(leader)))

    def test_typed_errors(self):
        last = self.client.append([b"x"]).last_index
        with self.assertRaises(raftlog.IndexNotYetCommittedError) as raised:
            self.client.read(last + 1000)
        self.assertEqual(raised.exception.code, grpc.StatusCode.OUT_OF_RANGE)
        self.assertEqual(raised.exception.reason, "INDEX_NOT_YET_COMMITTED")
        self.assertGreaterEqual(raised.exception.commit_index, last)
        self.assertGreaterEqual(raised.exception.first_index, 1)
        with self.assertRaises(raftlog.InvalidRequestError) as raised:
            self.client.append([b"y" * (17 << 10)])  # the cluster's --max-entry-size is 16 KiB
        self.assertEqual(raised.exception.reason, "ENTRY_TOO_LARGE")
        with self.assertRaises(raftlog.InvalidRequestError) as raised:
            self.client.append([b"z"] * 1025)  # --max-entries-per-append 1024
        self.assertEqual(raised.exception.reason, "TOO_MANY_ENTRIES")
        self.assertEqual(self.client.read(last + 1).entries, [])  # commit_index + 1 is an empty answer, not an error

    def test_consumer_groups(self):
        # Entries of a topic (the Python client appends without attributes: a raw request).
        request = client_pb2.AppendRequest(entries=[b"a", b"b", b"c"],
                                           attributes=[client_pb2.EntryAttributes(topic="py-orders")] * 3)
        leader = self.cluster.leader(self.client)
        stub = self.client.log_stub(self.cluster.address(leader))
        stub.Append(request, timeout=10)
        index, term = self.client.commit_offset("py-group", "py-orders", 2)
        self.assertGreater(index, 0)
        self.assertGreater(term, 0)
        fetched = self.client.fetch_offsets("py-group")
        self.assertEqual(fetched.offsets, [raftlog.GroupTopicOffset("py-orders", 2, index)])
        self.assertGreaterEqual(fetched.read_index, index)
        self.assertEqual(self.client.fetch_offsets("py-group", ["other"]).offsets, [])
        listing = self.client.list_groups()
        self.assertIn(raftlog.GroupSummary("py-group", 1, 0), listing.groups)
        self.assertTrue(listing.complete)
        self.assertEqual(self.client.read(index, count=1, linearizable=True).entries[0].type, "group-commit")
        with self.assertRaises(raftlog.InvalidRequestError) as raised:
            self.client.commit_offset("py-group", "py-orders", 4)  # the end offset is 3
        self.assertEqual(raised.exception.reason, "OFFSET_BEYOND_END")
        with self.assertRaises(raftlog.InvalidRequestError) as raised:
            self.client.fetch_offsets("bad/group")
        self.assertEqual(raised.exception.reason, "BAD_GROUP")

    def test_idempotent_retry(self):
        client_id = 0x5eed0000 + int(time.monotonic() * 1000) % 100000
        with raftlog.Client(self.cluster.endpoints, client_id=client_id, first_sequence=7, **CLIENT_OPTIONS) as first:
            original = first.append([b"once-a", b"once-b"])
        # A writer that lost the answer retries with the same pair and entries: the same indexes, nothing new.
        with raftlog.Client(self.cluster.endpoints, client_id=client_id, first_sequence=7, **CLIENT_OPTIONS) as again:
            retried = again.append([b"once-a", b"once-b"])
            self.assertTrue(retried.duplicate)
            self.assertEqual((retried.first_index, retried.last_index), (original.first_index, original.last_index))
        with raftlog.Client(self.cluster.endpoints, client_id=client_id, first_sequence=7, **CLIENT_OPTIONS) as reuse:
            with self.assertRaises(raftlog.SequenceReusedError) as raised:
                reuse.append([b"other data"])
            self.assertEqual(raised.exception.code, grpc.StatusCode.FAILED_PRECONDITION)
        entries = self.client.read(original.first_index, count=10, linearizable=True).entries
        self.assertEqual([e.payload for e in entries if e.client_id == client_id], [b"once-a", b"once-b"])

    def test_trimmed_index(self):
        leader, follower = self.leader_and_follower()
        # 1 MiB segments (local_cluster.py): 160 entries of 15 KiB fill more than two of them.
        for _ in range(8):
            last = self.client.append([b"t" * (15 << 10)] * 20).last_index
        address = self.cluster.address(follower)
        wait_until(lambda: self.client.status(address).commit_index >= last, 10, "the follower to commit")
        # A trim is also held at the consumer group table's persisted boundary, which trails the
        # commit index by up to one persist interval (200 ms): retried until that has caught up.
        trimmed = []
        wait_until(lambda: trimmed.append(self.client.trim(address, last)[0]) or trimmed[-1] > 1, 10,
                   "the trim to pass the group table's retention hold", interval_s=0.1)
        first_index = trimmed[-1]
        self.assertGreater(first_index, 1)
        with raftlog.Client([address], discover_leader=False, **CLIENT_OPTIONS) as on_follower:
            with self.assertRaises(raftlog.IndexTrimmedError) as raised:
                on_follower.read(1)
            self.assertEqual(raised.exception.first_index, first_index)
            self.assertEqual(on_follower.read(first_index, count=1).entries[0].index, first_index)

    def test_examples(self):
        examples = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
        endpoints = ",".join(self.cluster.endpoints)

        def run(script, *args):
            done = subprocess.run([sys.executable, os.path.join(examples, script), "--endpoints", endpoints] + list(args),
                                  capture_output=True, text=True, timeout=60)
            self.assertEqual(done.returncode, 0, done.stderr)
            return done.stdout
        out = run("append_and_read.py", "ex-a", "ex-b")
        self.assertRegex(out, r"appended at (\d+)\.\.(\d+)")
        first = int(out.split("appended at ")[1].split("..")[0])
        self.assertIn("%d\tex-a\n%d\tex-b" % (first, first + 1), out)
        self.assertIn("%d\tex-a" % first, run("tail.py", "--from", str(first), "--count", "2"))
        self.assertIn("200 entries", run("producer.py", "--entries", "200", "--threads", "4"))

    def test_zz_leader_kill_during_appends_and_tail(self):
        leader = self.cluster.leader(self.client)
        leader_address = self.cluster.address(leader)
        start = self.client.append([b"start"]).last_index + 1
        # The tail starts on the leader, so its stream breaks at the kill and must resume elsewhere.
        ordered = [leader_address] + [a for a in self.cluster.endpoints if a != leader_address]
        tail_client = raftlog.Client(ordered, discover_leader=False, **CLIENT_OPTIONS)
        tail = tail_client.tail(start)
        tailed = []
        tail_errors = []

        def follow():
            try:
                for entry in tail:
                    tailed.append(entry)
            except raftlog.RaftlogError as error:
                tail_errors.append(error)
        tail_thread = threading.Thread(target=follow)
        tail_thread.start()

        acked = {}  # payload -> index
        unknown = []
        stop = threading.Event()

        def write(name, use_stream):
            with raftlog.Client(self.cluster.endpoints, **CLIENT_OPTIONS) as client:
                session = client.append_stream() if use_stream else None
                for i in range(100000):
                    if stop.is_set():
                        break
                    payload = b"%s-%d" % (name, i)
                    try:
                        result = (session or client).append([payload])
                    except raftlog.AppendOutcomeUnknownError:
                        unknown.append(payload)
                        continue
                    acked[payload] = result.first_index
                if session is not None:
                    session.close()
        writers = [threading.Thread(target=write, args=(b"unary", False)),
                   threading.Thread(target=write, args=(b"stream", True))]
        for writer in writers:
            writer.start()
        try:
            wait_until(lambda: len(acked) >= 40, 30, "40 acknowledged appends before the kill")
            self.cluster.kill(leader)
            killed_at = len(acked)
            survivors = [n for n in self.cluster.ports if n != leader]
            new_leader = self.cluster.leader(self.client, among=survivors)
            self.assertNotEqual(new_leader, leader)
            wait_until(lambda: len(acked) >= killed_at + 40, 30, "40 acknowledged appends after the kill")
        finally:
            stop.set()
            for writer in writers:
                writer.join(30)
        self.assertEqual(unknown, [])  # the retry deadline covers a failover
        # Every acknowledged entry is in the log, at its index, exactly once.
        last = max(acked.values())
        entries = self.client.read(start, count=last - start + 1, linearizable=True).entries
        by_index = {e.index: e.payload for e in entries}
        for payload, index in acked.items():
            self.assertEqual(by_index.get(index), payload)
        payloads = [e.payload for e in entries if e.type == "normal"]
        self.assertEqual(len(payloads), len(set(payloads)))
        # The tail went on across the kill: every index from start on, once each, in order.
        wait_until(lambda: tailed and tailed[-1].index >= last, 30, "the tail to reach index %d" % last)
        tail.close()
        tail_thread.join(10)
        tail_client.close()
        self.assertEqual(tail_errors, [])
        self.assertGreaterEqual(tail.streams_opened, 2)
        indexes = [e.index for e in tailed]
        self.assertEqual(indexes, list(range(start, start + len(indexes))))
        self.assertEqual({e.index: e.payload for e in tailed if e.index <= last},
                         {e.index: e.payload for e in entries})
        # The killed node comes back and catches up.
        self.cluster.start(leader)
        wait_until(lambda: self._commit_of(leader) >= last, 30, "the restarted node to catch up")

    def _commit_of(self, node):
        try:
            return self.client.status(self.cluster.address(node), timeout=0.5).commit_index
        except raftlog.RaftlogError:
            return 0


if __name__ == "__main__":
    unittest.main()
