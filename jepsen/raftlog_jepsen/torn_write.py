"""The torn-write fault: what a power cut leaves after the last complete record of a segment.

Only bytes *after* the last complete entry record of the newest segment are touched (layout in
docs/storage-format.md). Those bytes were never part of an acknowledged entry: kill -9 keeps every
written byte in the page cache, and the harness cannot know which of the last entries were fsynced,
so damaging a complete entry could destroy a durable, acknowledged write — a fault beyond what the
durability contract covers. What is left to recovery is a half-written record: a magic, a header and
part of a payload whose CRC does not match, or random garbage without a magic.
"""
import os
import struct

SEGMENT_HEADER_BYTES = 64
ENTRY_HEADER_BYTES = 56
ENTRY_MAGIC = 0x45464C52
MAX_RECORDS_SCANNED = 10_000_000


def align8(n):
    return (n + 7) & ~7


def last_segment(log_dir):
    segments = sorted(f for f in os.listdir(log_dir) if f.endswith(".seg") and not f.startswith("prealloc"))
    return os.path.join(log_dir, segments[-1]) if segments else None


def end_of_records(data):
    """(offset just past the last complete record, its index or 0, its term) of a segment image."""
    offset = SEGMENT_HEADER_BYTES
    last_index, last_term = 0, 0
    for _ in range(MAX_RECORDS_SCANNED):
        if offset + ENTRY_HEADER_BYTES > len(data):
            break
        magic, _crc, _version, _type, _flags, payload_size, index, term = struct.unpack_from(
            "<IIBBHIQQ", data, offset)
        if magic != ENTRY_MAGIC:
            break
        size = align8(ENTRY_HEADER_BYTES + payload_size)
        if offset + size > len(data):
            break
        last_index, last_term = index, term
        offset += size
    return offset, last_index, last_term


def tear(log_dir, rng):
    """Writes a torn record after the last entry of the newest segment. Returns a description."""
    path = last_segment(log_dir)
    if path is None:
        return {"skipped": "no segment in " + log_dir}
    with open(path, "r+b") as f:
        data = f.read()
        offset, last_index, last_term = end_of_records(data)
        room = len(data) - offset
        if room < 8:
            return {"skipped": "segment full", "segment": os.path.basename(path)}
        kind = rng.choice(["torn-record", "garbage"])
        length = min(room, rng.randint(8, 4096))
        payload = bytes(rng.getrandbits(8) for _ in range(length))
        if kind == "torn-record" and room >= ENTRY_HEADER_BYTES:
            payload_size = rng.randint(1, 4000)
            header = struct.pack("<IIBBHIQQQQQ", ENTRY_MAGIC, rng.getrandbits(32), 1, 0, 0, payload_size,
                                 last_index + 1, last_term, 0, 0, 0)
            # Only part of the record reached the disk: the header and a prefix of the payload.
            torn = header + payload
            length = min(room, len(torn), ENTRY_HEADER_BYTES + rng.randint(0, payload_size))
            payload = torn[:length]
        f.seek(offset)
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())
    return {"segment": os.path.basename(path), "offset": offset, "bytes": len(payload), "kind": kind,
            "after_index": last_index}
