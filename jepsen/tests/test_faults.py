"""Unit tests of the fault helpers that need no cluster: the torn-write segment surgery and the
partition shapes."""
import os
import random
import struct
import sys
import tempfile
import unittest
import zlib

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from raftlog_jepsen import nemesis, torn_write, workload  # noqa: E402

SEGMENT_BYTES = 64 * 1024


def record(index, term, payload):
    header = struct.pack("<IIBBHIQQQQQ", torn_write.ENTRY_MAGIC, 0, 1, 0, 0, len(payload), index, term, 0, 0, 1)
    body = header + payload
    return body + b"\0" * (torn_write.align8(len(body)) - len(body))


class TornWriteTest(unittest.TestCase):
    def test_tears_only_after_the_last_record(self):
        with tempfile.TemporaryDirectory() as log_dir:
            records = b"".join(record(i, 2, b"x" * (i * 7)) for i in range(1, 11))
            image = b"\xAA" * torn_write.SEGMENT_HEADER_BYTES + records
            image += b"\0" * (SEGMENT_BYTES - len(image))
            path = os.path.join(log_dir, "00000000000000000001.seg")
            with open(path, "wb") as f:
                f.write(image)
            with open(os.path.join(log_dir, "prealloc-1.seg"), "wb") as f:
                f.write(b"\0" * SEGMENT_BYTES)  # must never be chosen
            end, last_index, last_term = torn_write.end_of_records(image)
            self.assertEqual((end, last_index, last_term), (64 + len(records), 10, 2))
            for seed in range(20):
                with open(path, "r+b") as f:
                    f.write(image)
                described = torn_write.tear(log_dir, random.Random(seed))
                with open(path, "rb") as f:
                    after = f.read()
                self.assertEqual(described["offset"], end)
                self.assertEqual(after[:end], image[:end], "a complete record was damaged")
                self.assertNotEqual(after[end:end + described["bytes"]], b"\0" * described["bytes"])
                self.assertEqual(len(after), SEGMENT_BYTES)

    def test_no_segment(self):
        with tempfile.TemporaryDirectory() as log_dir:
            self.assertIn("skipped", torn_write.tear(log_dir, random.Random(1)))


def reachable(ids, cuts):
    cut = {frozenset(c) for c in cuts}
    return {a: {b for b in ids if b != a and frozenset((a, b)) not in cut} for a in ids}


class PartitionTest(unittest.TestCase):
    def test_shapes(self):
        for seed in range(30):
            rng = random.Random(seed)
            ids5 = [1, 2, 3, 4, 5]
            mode, cuts = nemesis.partition_components(rng, ids5, 3, "isolate-leader")
            self.assertEqual(reachable(ids5, cuts)[3], set())
            mode, cuts = nemesis.partition_components(rng, ids5, None, "halves")
            sizes = sorted(len(v) + 1 for v in reachable(ids5, cuts).values())
            self.assertEqual(sizes, [2, 2, 3, 3, 3])
            mode, cuts = nemesis.partition_components(rng, ids5, None, "majority-ring")
            views = reachable(ids5, cuts)
            self.assertTrue(all(len(v) == 2 for v in views.values()))  # itself + 2 = a majority of 5
            self.assertEqual(len({frozenset(v | {k}) for k, v in views.items()}), 5)
            mode, cuts = nemesis.partition_components(rng, ids5, None, "bridge")
            views = reachable(ids5, cuts)
            self.assertEqual(sorted(len(v) for v in views.values()), [2, 2, 2, 2, 4])
            mode, cuts = nemesis.partition_components(rng, [1, 2, 3], None, "majority-ring")
            self.assertEqual(mode, "halves")


class PayloadTest(unittest.TestCase):
    def test_compact_detects_any_changed_byte(self):
        payload = workload.make_payload("w1-s2-e0", random.Random(3))
        self.assertTrue(payload.startswith(b"w1-s2-e0:"))
        damaged = bytearray(payload)
        damaged[-1] ^= 1
        self.assertNotEqual(workload.compact(payload), workload.compact(bytes(damaged)))
        self.assertEqual(workload.compact(payload), "w1-s2-e0|%d|%08x" % (len(payload), zlib.crc32(payload)))


if __name__ == "__main__":
    unittest.main()
