"""Client processes: writers (idempotent appends with retries), a reader (linearizable and ordinary
reads) and a tailer (Tail streams that reconnect to other nodes). Every operation is recorded in the
history when it completes. All loops stop at `stop` and are bounded by the run's time limit.
"""
import random
import threading
import time
import zlib

import grpc

from . import append_stream, client

OP_TIMEOUT_S = 8.0           # one append, all attempts (a real producer gives up eventually)
READ_MAX_ENTRIES = 64
TAIL_SESSION_S = (2.0, 6.0)  # a tail stream is cancelled and reopened on another node after this
MAX_OPS_PER_PROCESS = 1_000_000
APPEND_RPCS = ("unary", "stream", "mixed")
MAX_PROTOCOL_ERRORS_KEPT = 10


MAX_PADDING_BYTES = 2048     # payloads are padded so the log grows fast enough to roll segments


def make_payload(name, rng):
    """A unique payload: its name, then padding of a random length."""
    padding = rng.randint(0, MAX_PADDING_BYTES)
    return (name + ":" + "abcdefghijklmnopqrstuvwxyz" * (padding // 26 + 1))[: len(name) + 1 + padding].encode()


def compact(payload):
    """What the history stores for a payload: its name, length and CRC-32, so a damaged byte anywhere
    is still detected without writing every padded payload into the history again and again."""
    name = payload.split(b":", 1)[0].decode("utf-8", "backslashreplace")
    return "%s|%d|%08x" % (name, len(payload), zlib.crc32(payload))


def entry_tuple(e):
    """An entry in the history: [index, term, type, client_id, sequence, compact payload], and for an
    entry appended with attributes also [topic, [keys...]] (so every checker that compares entries
    compares their topic and keys too)."""
    entry = [e.index, e.term, int(e.type), e.client_id, e.sequence, compact(e.payload)]
    if getattr(e, "has_attributes", False):
        entry.extend([e.topic, list(e.keys)])
    return entry


# Topics and keys (docs/jepsen.md, "Topics and keys"): about half the appends carry attributes. A
# key from SHARED_KEYS collects entries of every writer; a bucket key ("w<writer>-b<seq // 50>")
# at most 150 entries, so its lookup (at most LookupKey's 1024) is never cut short.
TOPICS = ("orders", "payments", "audit.log")
SHARED_KEYS = tuple("shared-%d" % n for n in range(8))
ATTRIBUTES_SHARE = 0.5
KEY_BUCKET_SEQUENCES = 50


def make_attributes(writer, sequence, count, rng):
    """None (no attributes), or one [topic, [keys]] per entry: a topic (or none, one in five) and
    0..2 keys (a shared one, this writer's bucket key, or both)."""
    if rng.random() >= ATTRIBUTES_SHARE:
        return None
    attributes = []
    for _ in range(count):
        topic = "" if rng.random() < 0.2 else rng.choice(TOPICS)
        keys = []
        if rng.random() < 0.6:
            keys.append(rng.choice(SHARED_KEYS))
        if rng.random() < 0.5:
            keys.append("w%d-b%d" % (writer, sequence // KEY_BUCKET_SEQUENCES))
        attributes.append([topic, keys])
    return attributes


class Shared:
    def __init__(self):
        self.lock = threading.Lock()
        self.max_acked_index = 0

    def acked(self, index):
        with self.lock:
            self.max_acked_index = max(self.max_acked_index, index)


def writer_transport(append_rpc, process):
    """The RPC writer `process` appends with: `mixed` gives even writers AppendStream and odd ones
    the unary Append, so a run with two or more writers covers both."""
    if append_rpc == "mixed":
        return "stream" if process % 2 == 0 else "unary"
    if append_rpc not in ("unary", "stream"):
        raise ValueError("append RPC must be one of %s" % ", ".join(APPEND_RPCS))
    return append_rpc


def make_transport(name, cluster):
    return append_stream.StreamTransport(cluster) if name == "stream" else client.UnaryTransport(cluster)


class Writer(threading.Thread):
    def __init__(self, process, cluster, history, seed, stop, shared, interval_s, transport="unary"):
        super().__init__(name="writer-%d" % process, daemon=True)
        self.process = process
        self.transport_name = transport
        self.cluster = cluster
        self.history = history
        self.rng = random.Random(seed)
        self.client_id = self.rng.getrandbits(62) + 2  # 1 is the final barrier's
        self.stop = stop
        self.shared = shared
        self.interval_s = interval_s

    def run(self):
        transport = make_transport(self.transport_name, self.cluster)
        try:
            self._run(transport)
        finally:
            transport.close()  # no stream or thread outlives the writer

    def _run(self, transport):
        sequence = 0
        for _ in range(MAX_OPS_PER_PROCESS):
            if self.stop.is_set():
                return
            sequence += 1
            payloads = [make_payload("w%d-s%d-e%d" % (self.process, sequence, k), self.rng)
                        for k in range(self.rng.choice([1, 1, 1, 2, 3]))]
            values = [compact(p) for p in payloads]
            attributes = make_attributes(self.process, sequence, len(payloads), self.rng)
            invoke = self.history.now()
            streams_before = getattr(transport, "streams_opened", 0)
            outcome, response, node, attempts = client.append(
                self.cluster, self.rng, self.client_id, sequence, payloads, time.monotonic() + OP_TIMEOUT_S,
                stop=self.stop, transport=transport, attributes=attributes)
            op = {"f": "append", "process": self.process, "client_id": self.client_id, "sequence": sequence,
                  "values": values, "invoke": invoke, "complete": self.history.now(), "type": outcome,
                  "node": node, "attempts": [a.to_json() for a in attempts[-10:]], "attempt_count": len(attempts),
                  "transport": transport.name}
            if attributes is not None:
                op["attributes"] = attributes
            if transport.name == "stream":
                op["streams_opened"] = transport.streams_opened - streams_before
            protocol_errors = [a.message for a in attempts if a.code == append_stream.PROTOCOL_ERROR]
            if protocol_errors:
                op.update(protocol_error_count=len(protocol_errors),
                          protocol_errors=protocol_errors[:MAX_PROTOCOL_ERRORS_KEPT])
            if response is not None:
                op.update(first_index=response.first_index, last_index=response.last_index,
                          term=response.term, duplicate=response.duplicate)
                self.shared.acked(response.last_index)
            self.history.record(op)
            self.stop.wait(self.rng.uniform(0, 2 * self.interval_s))


class Reader(threading.Thread):
    def __init__(self, process, cluster, history, seed, stop, shared, interval_s):
        super().__init__(name="reader-%d" % process, daemon=True)
        self.process = process
        self.cluster = cluster
        self.history = history
        self.rng = random.Random(seed)
        self.stop = stop
        self.shared = shared
        self.interval_s = interval_s

    def run(self):
        for _ in range(MAX_OPS_PER_PROCESS):
            if self.stop.is_set():
                return
            linearizable = self.rng.random() < 0.5
            with self.shared.lock:
                known = self.shared.max_acked_index
            # At or below an index acknowledged before this read started: a linearizable read must
            # then find it (OUT_OF_RANGE would be a stale read).
            from_index = self.rng.randint(max(1, known - 40), max(1, known))
            node = (self.cluster.leader_hint if linearizable and self.cluster.leader_hint
                    else self.rng.choice(sorted(self.cluster.addresses)))
            invoke = self.history.now()
            response, node, attempt = client.read(self.cluster, node, from_index, READ_MAX_ENTRIES, linearizable)
            op = {"f": "read", "process": self.process, "linearizable": linearizable, "from_index": from_index,
                  "max_entries": READ_MAX_ENTRIES, "invoke": invoke, "complete": self.history.now(), "node": node}
            if response is not None:
                op.update(type="ok", commit_index=response.commit_index,
                          entries=[entry_tuple(e) for e in response.entries])
            else:
                op.update(type="fail", code=attempt.code if attempt else "", reason=attempt.reason if attempt else "")
            self.history.record(op)
            self.stop.wait(self.rng.uniform(0, 2 * self.interval_s))


class Tailer(threading.Thread):
    def __init__(self, process, cluster, history, seed, stop):
        super().__init__(name="tailer-%d" % process, daemon=True)
        self.process = process
        self.cluster = cluster
        self.history = history
        self.rng = random.Random(seed)
        self.stop = stop
        self.call = None
        self.lock = threading.Lock()

    def cancel(self):
        with self.lock:
            if self.call is not None:
                self.call.cancel()

    def run(self):
        next_index = 1
        session = 0
        for _ in range(MAX_OPS_PER_PROCESS):
            if self.stop.is_set():
                return
            node = self.rng.choice(sorted(self.cluster.addresses))
            invoke = self.history.now()
            entries = []
            code = "OK"
            call = self.cluster.log_stub(node).Tail(self.cluster.pb2.TailRequest(from_index=next_index),
                                                    timeout=self.rng.uniform(*TAIL_SESSION_S))
            with self.lock:
                self.call = call
            try:
                for message in call:
                    entries.extend(entry_tuple(e) for e in message.entries)
                    if self.stop.is_set():
                        break
            except grpc.RpcError as e:
                code = client.rpc_code_name(e)
            finally:
                with self.lock:
                    self.call = None
                call.cancel()
            self.history.record({"f": "tail", "process": self.process, "session": session, "node": node,
                                 "from_index": next_index, "entries": entries, "code": code, "invoke": invoke,
                                 "complete": self.history.now(), "type": "ok"})
            session += 1
            if entries:
                next_index = entries[-1][0] + 1
            elif code not in ("OK", "DEADLINE_EXCEEDED", "CANCELLED"):
                self.stop.wait(0.2)  # node down: back off before the next node
