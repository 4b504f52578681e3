"""The recorded history: one JSON object per line, written when an operation completes.

Every operation carries `invoke` and `complete` (seconds since the run started, monotonic clock),
the `node` that gave the final answer, and a `type`:
  ok    the operation took effect (an append is committed at [first_index, last_index])
  fail  the operation definitely did not take effect (only when every attempt ended with a status that
        guarantees the append was never proposed, see client.DEFINITE_FAILURE_REASONS)
  info  unknown: it may or may not have taken effect
Nemesis events are recorded with f = "nemesis" and `phase` start / end.
"""
import json
import threading
import time


class History:
    """Thread-safe append-only recorder, flushed line by line so a crash of the harness keeps it."""

    def __init__(self, path):
        self._lock = threading.Lock()
        self._file = open(path, "w", encoding="utf-8")
        self._start = time.monotonic()
        self._next_id = 0
        self.ops = []

    def now(self):
        return time.monotonic() - self._start

    def record(self, op):
        with self._lock:
            op["id"] = self._next_id
            self._next_id += 1
            self.ops.append(op)
            self._file.write(json.dumps(op, sort_keys=True) + "\n")
            self._file.flush()

    def close(self):
        with self._lock:
            self._file.close()


def load(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
