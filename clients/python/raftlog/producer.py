"""Producer: coalesces single-entry sends of many threads into shared appends.

send() queues one entry and returns a concurrent.futures.Future that resolves to the entry's log
index once it is committed (or to the append's exception). One worker thread takes up to
max_batch_entries entries / max_batch_bytes payload bytes from the queue, waiting at most `linger`
seconds for a batch to fill, and appends them as one atomic append on the Client's AppendStream
session: one append in flight, so the client's idempotency rules hold (docs/client-protocol.md,
section 4). Entries of one batch commit together, at consecutive indexes, in the order they were sent.

Bounds: at most max_queued_entries entries wait in the queue; send() blocks for room up to its
`timeout` and then raises TooManyPendingError (nothing queued).
"""
import concurrent.futures
import queue
import threading
import time

import grpc

from . import errors

_STOP = object()
MAX_BATCH_ENTRIES_LIMIT = 65536  # a node's hard limit on entries per append (docs/configuration.md)


class Producer:
    def __init__(self, client, max_batch_entries=1024, max_batch_bytes=4 << 20, linger=0.002,
                 max_queued_entries=65536, use_stream=True):
        if not 1 <= max_batch_entries <= MAX_BATCH_ENTRIES_LIMIT:
            raise ValueError("max_batch_entries must be 1..%d (and at most the node's --max-entries-per-append)"
                             % MAX_BATCH_ENTRIES_LIMIT)
        if max_batch_bytes < 1 or linger < 0 or max_queued_entries < 1:
            raise ValueError("max_batch_bytes and max_queued_entries must be positive, linger not negative")
        self._client = client
        self._session = client.append_stream() if use_stream else None
        self.max_batch_entries, self.max_batch_bytes, self.linger = max_batch_entries, max_batch_bytes, linger
        self._queue = queue.Queue(maxsize=max_queued_entries)
        self._idle = threading.Condition()
        self._unfinished = 0  # sent and not yet resolved; guarded by _idle
        self._putting = 0     # senders past the _closed check whose put has not returned; guarded by _idle
        self._closed = False
        self._worker = threading.Thread(target=self._run, name="raftlog-producer", daemon=True)
        self._worker.start()

    def send(self, payload, timeout=None):
        """Queues one entry (bytes); returns a Future resolving to its index."""
        if not isinstance(payload, (bytes, bytearray, memoryview)):
            raise TypeError("an entry must be bytes, not %s" % type(payload).__name__)
        future = concurrent.futures.Future()
        with self._idle:
            if self._closed:
                raise RuntimeError("the producer is closed")
            self._unfinished += 1
            self._putting += 1
        try:
            self._queue.put((bytes(payload), future), timeout=timeout)
        except queue.Full:
            self._resolved(1)
            raise errors.TooManyPendingError(grpc.StatusCode.RESOURCE_EXHAUSTED, "the producer's queue is full (%d "
                                             "entries)" % self._queue.maxsize, "TOO_MANY_PENDING") from None
        finally:
            with self._idle:
                self._putting -= 1
                self._idle.notify_all()  # the worker's final drain waits for the last put
        return future

    def flush(self, timeout=None):
        """Waits until every entry sent so far is resolved; False when `timeout` passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._unfinished == 0, timeout)

    def close(self, timeout=None):
        """Stops taking entries, resolves the queued ones, ends the worker and the stream; waits at
        most `timeout` seconds (None: until the worker ended) for the queued entries' appends."""
        ends = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            if self._closed:
                return
            self._closed = True
        try:
            # A full queue means the worker is busy, not waiting: it stops by itself once the queue
            # is empty and the producer closed (_take_batch), so the sentinel only wakes an idle one.
            self._queue.put(_STOP, timeout=None if ends is None else max(0.0, ends - time.monotonic()))
        except queue.Full:
            pass
        self._worker.join(None if ends is None else max(0.0, ends - time.monotonic()))
        if self._session is not None:
            self._session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _resolved(self, count):
        with self._idle:
            self._unfinished -= count
            if self._unfinished == 0:
                self._idle.notify_all()

    def _take_batch(self, carried):
        """(batch, carried over to the next batch, stopped): blocks for the first entry unless one was
        carried over, then takes more until the batch is full or `linger` passed."""
        if carried is None:
            with self._idle:
                if self._closed and self._queue.empty():
                    return [], None, True
        first = carried if carried is not None else self._queue.get()
        if first is _STOP:
            return [], None, True
        batch, size = [first], len(first[0])
        ends = time.monotonic() + self.linger
        while len(batch) < self.max_batch_entries:
            try:
                remaining = ends - time.monotonic()
                item = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                return batch, None, True
            if size + len(item[0]) > self.max_batch_bytes:
                return batch, item, False
            batch.append(item)
            size += len(item[0])
        return batch, None, False

    def _run(self):
        carried, stopped = None, False
        while not stopped or carried is not None:
            batch, carried, stopped_now = self._take_batch(carried)
            stopped = stopped or stopped_now
            if batch:
                self._append(batch)
        # Anything sent after close() raced in: fail it rather than leave it waiting. A sender that
        # passed the _closed check may not have put its entry yet: wait for its put to return (no new
        # sender can start, and each put either lands or times out; a blocked one gets room here).
        while True:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not _STOP:
                    item[1].set_exception(RuntimeError("the producer was closed"))
                    self._resolved(1)
            with self._idle:
                if self._putting == 0 and self._queue.empty():
                    return
                if self._queue.empty():
                    self._idle.wait(0.1)  # notified when a put returns; the timeout is a safety net

    def _append(self, batch):
        payloads = [payload for payload, _ in batch]
        try:
            result = self._session.append(payloads) if self._session is not None else self._client.append(payloads)
        except Exception as error:  # every waiting sender learns why
            for _, future in batch:
                future.set_exception(error)
        else:
            for offset, (_, future) in enumerate(batch):
                future.set_result(result.first_index + offset)
        self._resolved(len(batch))
