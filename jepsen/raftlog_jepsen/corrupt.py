"""The corrupt fault: one flipped byte inside the payload of an entry the node made durable.

Unlike torn-write (which only touches bytes after the last complete record), this damages *synced*
data: a complete entry record at or below the checkpoint's flushed point (layout in
docs/storage-format.md), i.e. an entry the node may have acknowledged. The node is dead (SIGKILL)
while the file is changed. raftlogd must notice the bad CRC32C (recovery, the start-up dedup rebuild,
the background scrub or a read), never serve the entry, and repair its log from its peers
(docs/operations.md, "Storage faults"). Only the payload is touched, never the record header, so the
record framing stays intact and the damage is exactly "an entry whose CRC does not match".
"""
import os
import struct

from . import torn_write

CHECKPOINT_FILE = "CHECKPOINT"
CHECKPOINT_MAGIC = 0x52444C52
CHECKPOINT_SLOTS = (0, 4096)
SLOT_HEADER_BYTES = 24
MAX_SLOT_PAYLOAD_BYTES = 1024
ENTRY_TYPE_NORMAL = 0


def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def read_checkpoint(log_dir):
    """The newest valid checkpoint slot as a dict, or None (missing, both slots invalid)."""
    try:
        with open(os.path.join(log_dir, CHECKPOINT_FILE), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    best = None
    for slot in CHECKPOINT_SLOTS:
        if slot + SLOT_HEADER_BYTES > len(data):
            continue
        magic, crc, version, payload_size, sequence = struct.unpack_from("<IIIIQ", data, slot)
        if magic != CHECKPOINT_MAGIC or version != 1 or not 56 <= payload_size <= MAX_SLOT_PAYLOAD_BYTES:
            continue
        end = slot + SLOT_HEADER_BYTES + payload_size
        if end > len(data) or crc32c(data[slot + 8:end]) != crc:
            continue
        (_v, _r, flushed_index, flushed_segment_base, flushed_offset, commit_index, truncate_from,
         generation) = struct.unpack_from("<IIQQQQQQ", data, slot + SLOT_HEADER_BYTES)
        if best is None or sequence > best["sequence"]:
            best = {"sequence": sequence, "flushed_index": flushed_index,
                    "flushed_segment_base": flushed_segment_base, "flushed_offset": flushed_offset,
                    "commit_index": commit_index, "truncate_from": truncate_from, "generation": generation}
    return best


def records(data, limit, max_index):
    """(offset, type, payload_size, index) of the complete records of a segment image that end at or
    before `limit` and have index <= max_index."""
    out = []
    offset = torn_write.SEGMENT_HEADER_BYTES
    limit = min(limit, len(data))
    for _ in range(torn_write.MAX_RECORDS_SCANNED):
        if offset + torn_write.ENTRY_HEADER_BYTES > limit:
            break
        magic, _crc, _version, entry_type, _flags, payload_size, index, _term = struct.unpack_from(
            "<IIBBHIQQ", data, offset)
        if magic != torn_write.ENTRY_MAGIC:
            break
        size = torn_write.align8(torn_write.ENTRY_HEADER_BYTES + payload_size)
        if offset + size > limit or index > max_index:
            break
        out.append((offset, entry_type, payload_size, index))
        offset += size
    return out


def segments(log_dir):
    """(base index, path) of the data segments, oldest first (preallocated ones excluded)."""
    names = sorted(f for f in os.listdir(log_dir)
                   if f.endswith(".seg") and not f.startswith("prealloc") and f[:20].isdigit())
    return [(int(name[:20]), os.path.join(log_dir, name)) for name in names]


def record_bytes(path):
    """Bytes of the complete entry records of one segment file."""
    with open(path, "rb") as f:
        data = f.read()
    found = records(data, len(data), 1 << 63)
    if not found:
        return 0
    offset, _type, payload_size, _index = found[-1]
    return offset + torn_write.align8(torn_write.ENTRY_HEADER_BYTES + payload_size) - torn_write.SEGMENT_HEADER_BYTES


def flip(log_dir, rng):
    """XORs one payload byte of a random durable entry with a random non-zero mask. Returns a
    description (JSON-able); "skipped" says why nothing was changed."""
    checkpoint = read_checkpoint(log_dir)
    if checkpoint is None or checkpoint["flushed_index"] == 0:
        return {"skipped": "no checkpoint with a flushed entry in " + log_dir}
    candidates = [(base, path) for base, path in segments(log_dir) if base <= checkpoint["flushed_segment_base"]]
    order = [base for base, _ in candidates]
    rng.shuffle(candidates)
    max_index = checkpoint["flushed_index"]
    if checkpoint["truncate_from"]:
        max_index = min(max_index, checkpoint["truncate_from"] - 1)  # a cut in progress removes the rest
    for base, path in candidates:
        with open(path, "r+b") as f:
            data = f.read()
            limit = checkpoint["flushed_offset"] if base == checkpoint["flushed_segment_base"] else len(data)
            found = [r for r in records(data, limit, max_index) if r[2] > 0]
            normal = [r for r in found if r[1] == ENTRY_TYPE_NORMAL]
            if not (normal or found):
                continue
            offset, entry_type, payload_size, index = rng.choice(normal or found)
            at = offset + torn_write.ENTRY_HEADER_BYTES + rng.randrange(payload_size)
            mask = rng.randint(1, 255)
            f.seek(at)
            f.write(bytes([data[at] ^ mask]))
            f.flush()
            os.fsync(f.fileno())
        # Record bytes from the first retained entry through the damaged one: once the node's scrub
        # has verified at least this much since its start, it has read the damaged entry (or its
        # replacement).
        through = sum(record_bytes(p) for b, p in segments(log_dir) if b in order and b < base)
        through += offset + torn_write.align8(torn_write.ENTRY_HEADER_BYTES + payload_size) \
            - torn_write.SEGMENT_HEADER_BYTES
        return {"segment": os.path.basename(path), "offset": at, "scrub_bytes_through": through, "record_offset": offset, "index": index,
                "entry_type": entry_type, "mask": mask, "flushed_index": checkpoint["flushed_index"],
                "commit_index": checkpoint["commit_index"]}
    return {"skipped": "no durable entry with a payload in " + log_dir}
