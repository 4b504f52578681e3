"""Unit tests of the corrupt nemesis's byte flip (corrupt.py) on synthetic segment images."""
import os
import random
import struct
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from raftlog_jepsen import checker, corrupt, torn_write  # noqa: E402

SEGMENT_BYTES = 64 * 1024


def record(index, term, payload, entry_type=0):
    header = struct.pack("<IIBBHIQQQQQ", torn_write.ENTRY_MAGIC, 0, 1, entry_type, 0, len(payload), index, term,
                         0, 0, 1)
    body = header + payload
    return body + b"\0" * (torn_write.align8(len(body)) - len(body))


def segment(first_index, count, payload_of=lambda i: b"p%d:" % i + b"x" * (i % 13)):
    recs = b"".join(record(i, 2, payload_of(i)) for i in range(first_index, first_index + count))
    image = b"\xAA" * torn_write.SEGMENT_HEADER_BYTES + recs
    return image + b"\0" * (SEGMENT_BYTES - len(image)), torn_write.SEGMENT_HEADER_BYTES + len(recs)


def checkpoint_slot(sequence, flushed_index, base, offset, commit=0, truncate_from=0):
    payload = struct.pack("<IIQQQQQQ", 1, 0, flushed_index, base, offset, commit, truncate_from, 7)
    rest = struct.pack("<IIQ", 1, len(payload), sequence) + payload
    return struct.pack("<II", corrupt.CHECKPOINT_MAGIC, corrupt.crc32c(rest)) + rest


def write_checkpoint(log_dir, slots):
    image = bytearray(8192)
    for at, slot in slots:
        image[at:at + len(slot)] = slot
    with open(os.path.join(log_dir, corrupt.CHECKPOINT_FILE), "wb") as f:
        f.write(image)


def entry_bounds(image):
    """index -> (record offset, payload offset, payload end) of a segment image."""
    out = {}
    for offset, _type, size, index in corrupt.records(image, len(image), 1 << 62):
        out[index] = (offset, offset + torn_write.ENTRY_HEADER_BYTES, offset + torn_write.ENTRY_HEADER_BYTES + size)
    return out


class Crc32cTest(unittest.TestCase):
    def test_check_value(self):
        self.assertEqual(corrupt.crc32c(b"123456789"), 0xE3069283)


class CheckpointTest(unittest.TestCase):
    def test_newest_valid_slot(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertIsNone(corrupt.read_checkpoint(d))
            write_checkpoint(d, [(0, checkpoint_slot(5, 10, 1, 800)), (4096, checkpoint_slot(6, 12, 1, 900))])
            self.assertEqual(corrupt.read_checkpoint(d)["flushed_index"], 12)
            torn = bytearray(checkpoint_slot(7, 20, 1, 1000))
            torn[30] ^= 0xFF  # fails its CRC: the older slot is used
            write_checkpoint(d, [(0, bytes(torn)), (4096, checkpoint_slot(6, 12, 1, 900))])
            cp = corrupt.read_checkpoint(d)
            self.assertEqual((cp["sequence"], cp["flushed_index"], cp["flushed_offset"]), (6, 12, 900))


class FlipTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.log_dir = self.dir.name
        self.images = {}
        self.images[1], _ = segment(1, 30)
        self.images[31], self.end31 = segment(31, 40)
        for base, image in self.images.items():
            with open(os.path.join(self.log_dir, "%020d.seg" % base), "wb") as f:
                f.write(image)
        with open(os.path.join(self.log_dir, "prealloc-1.seg"), "wb") as f:
            f.write(b"\0" * SEGMENT_BYTES)  # must never be chosen
        # Flushed up to entry 50 (in the second segment); entries 51..70 are after the flushed point.
        self.bounds31 = entry_bounds(self.images[31])
        write_checkpoint(self.log_dir, [(0, checkpoint_slot(3, 50, 31, self.bounds31[50][2] + 0, commit=48))])

    def tearDown(self):
        self.dir.cleanup()

    def read(self, base):
        with open(os.path.join(self.log_dir, "%020d.seg" % base), "rb") as f:
            return f.read()

    def test_flips_exactly_one_payload_byte_of_a_flushed_entry(self):
        seen_segments = set()
        for seed in range(40):
            for base, image in self.images.items():
                with open(os.path.join(self.log_dir, "%020d.seg" % base), "r+b") as f:
                    f.write(image)
            described = corrupt.flip(self.log_dir, random.Random(seed))
            self.assertNotIn("skipped", described)
            base = int(described["segment"][:20])
            seen_segments.add(base)
            other = 31 if base == 1 else 1
            self.assertEqual(self.read(other), self.images[other])
            after, before = self.read(base), self.images[base]
            diff = [k for k in range(len(before)) if after[k] != before[k]]
            self.assertEqual(diff, [described["offset"]])
            self.assertEqual(after[diff[0]] ^ before[diff[0]], described["mask"])
            self.assertTrue(1 <= described["mask"] <= 255)
            self.assertLessEqual(described["index"], 50, "an entry after the flushed point was chosen")
            bounds = entry_bounds(before)[described["index"]]
            self.assertEqual(described["record_offset"], bounds[0])
            self.assertTrue(bounds[1] <= described["offset"] < bounds[2], "outside the payload")
            self.assertEqual(os.path.getsize(os.path.join(self.log_dir, "prealloc-1.seg")), SEGMENT_BYTES)
            # What the scrub must have verified to have read this entry: every record up to and including it.
            sizes = {i: torn_write.align8(b[2] - b[0])
                     for image in self.images.values() for i, b in entry_bounds(image).items()}
            self.assertEqual(described["scrub_bytes_through"],
                             sum(size for i, size in sizes.items() if i <= described["index"]))
        self.assertEqual(seen_segments, {1, 31})

    def test_truncation_intent_limits_the_choice(self):
        write_checkpoint(self.log_dir, [(0, checkpoint_slot(3, 50, 31, self.bounds31[50][2], truncate_from=2))])
        for seed in range(10):
            described = corrupt.flip(self.log_dir, random.Random(seed))
            self.assertEqual(described["index"], 1)

    def test_skips_without_checkpoint_or_entries(self):
        os.unlink(os.path.join(self.log_dir, corrupt.CHECKPOINT_FILE))
        self.assertIn("skipped", corrupt.flip(self.log_dir, random.Random(1)))
        write_checkpoint(self.log_dir, [(0, checkpoint_slot(3, 0, 1, 64))])
        self.assertIn("skipped", corrupt.flip(self.log_dir, random.Random(1)))


class NodesCheckerTest(unittest.TestCase):
    def test_exit_1_after_corruption_is_explained(self):
        start = {"f": "nemesis", "kind": "corrupt", "phase": "start", "window": 0, "invoke": 5.0,
                 "detail": {"node": 2, "flip": {"index": 9}}}
        skipped = {"f": "nemesis", "kind": "corrupt", "phase": "start", "window": 1, "invoke": 5.0,
                   "detail": {"node": 3, "flip": {"skipped": "none"}}}
        exits = [{"f": "node-exit", "node": 2, "invoke": 20.0, "returncode": 1, "expected": False},
                 {"f": "node-exit", "node": 2, "invoke": 4.0, "returncode": 1, "expected": False},
                 {"f": "node-exit", "node": 2, "invoke": 21.0, "returncode": -6, "expected": False},
                 {"f": "node-exit", "node": 3, "invoke": 22.0, "returncode": 1, "expected": False}]
        result = checker.check_nodes([start, skipped] + exits)
        self.assertEqual(sorted((a["node"], a["time"]) for a in result["anomalies"]),
                         [(2, 4.0), (2, 21.0), (3, 22.0)])


if __name__ == "__main__":
    unittest.main()
