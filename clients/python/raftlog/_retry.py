"""The retry rules of docs/client-protocol.md (sections 2 and 3), kept apart from gRPC so they are
tested on their own: which errors are retried, which attempts were definitely not applied, where the
next attempt goes, and how long to sleep before it.
"""
import random
import threading
import time

import grpc

from . import errors

# Reasons whose attempt was refused before anything was proposed (docs/client-protocol.md, section 2).
DEFINITE_REASONS = frozenset({
    "NOT_LEADER", "NO_LEADER", "TOO_MANY_PENDING", "DISK_FULL", "DISK_WATERMARK",
    "EMPTY_APPEND", "ENTRY_TOO_LARGE", "TOO_MANY_ENTRIES", "APPEND_TOO_LARGE", "BAD_SEQUENCE",
    "MALFORMED_REQUEST", "SEQUENCE_REUSED", "SEQUENCE_TOO_OLD",
})
# Codes retried whatever the reason: the request may be fine on another node or a moment later.
RETRIED_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
# Hard cap on the attempts of one call, should every attempt fail at once under a long deadline.
MAX_ATTEMPTS_PER_CALL = 10000


def attempt_was_definite(error, unary=True):
    """True when the append attempt that ended with `error` was never proposed. A message over gRPC's
    size bound (RESOURCE_EXHAUSTED without a reason) is definite on a unary call, where nothing was
    read, but not when it ends a stream with requests unanswered; UNIMPLEMENTED is always definite."""
    if error.reason in DEFINITE_REASONS:
        return True
    if error.code == grpc.StatusCode.UNIMPLEMENTED:
        return True
    return unary and error.code == grpc.StatusCode.RESOURCE_EXHAUSTED and not error.reason


def is_retried(error):
    """Whether a call retries after `error` (the same request, maybe on another node)."""
    if isinstance(error, errors.LeaderError) or error.reason == "TOO_MANY_PENDING":
        return True
    # An AppendStream that ended with the request unanswered (node shutting down: CANCELLED, a broken
    # contract, ...): a new stream or a unary call may succeed. A malformed request would not.
    if getattr(error, "stream_ended", False) and error.code != grpc.StatusCode.INVALID_ARGUMENT:
        return True
    return error.code in RETRIED_CODES and not error.reason.startswith("TRANSFER_")


def redirect_target(error, asked):
    """The leader address a NOT_LEADER error names, when it names one other than `asked`; else None."""
    if isinstance(error, errors.NotLeaderError) and error.leader_address and error.leader_address != asked:
        return error.leader_address
    return None


class Endpoints:
    """The configured endpoints and the preferred one (the last that answered or was named leader).
    Thread-safe."""

    def __init__(self, endpoints):
        self.configured = list(endpoints)
        self._preferred = self.configured[0]
        self._lock = threading.Lock()

    @property
    def preferred(self):
        with self._lock:
            return self._preferred

    def prefer(self, endpoint):
        with self._lock:
            self._preferred = endpoint

    def next_after(self, endpoint):
        """The configured endpoint after `endpoint`; after one not in the list (a leader hint), the
        first configured one."""
        try:
            return self.configured[(self.configured.index(endpoint) + 1) % len(self.configured)]
        except ValueError:
            return self.configured[0]


class Backoff:
    """Sleeps between attempts: from `minimum` doubling to `maximum` seconds, plus up to 25% jitter."""

    def __init__(self, minimum, maximum, rng=None):
        self.minimum, self.maximum = minimum, maximum
        self.current = minimum
        self._rng = rng or random.Random()

    def reset(self):
        self.current = self.minimum

    def next_sleep(self):
        sleep = self.current * (1.0 + 0.25 * self._rng.random())
        self.current = min(self.current * 2, self.maximum)
        return sleep


def run(what, attempt, endpoints, call_timeout, retry_deadline, backoff, on_error=None, sleep=time.sleep,
        max_attempts=MAX_ATTEMPTS_PER_CALL):
    """Runs attempt(endpoint, timeout_s) until it returns, raises an error that is not retried, or
    `retry_deadline` seconds pass; follows a NOT_LEADER hint at once (one hop; a second redirect in a
    row sleeps first), stays on the same endpoint after TOO_MANY_PENDING, moves to the next one
    otherwise. `on_error(error)` sees every failed
    attempt; at most `max_attempts` are made. Raises the last error, its message naming the attempts, when the deadline passes."""
    started = time.monotonic()
    deadline = started + retry_deadline
    target = endpoints.preferred
    previous_was_redirect = False
    last = None
    attempts = 0
    while attempts < max_attempts:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        attempts += 1
        try:
            result = attempt(target, min(call_timeout, remaining))
        except errors.RaftlogError as error:
            last = error
        else:
            endpoints.prefer(target)
            return result
        if on_error is not None:
            on_error(last)
        if not is_retried(last):
            raise last
        leader = redirect_target(last, target)
        if leader is not None:
            target = leader
            endpoints.prefer(leader)
            if not previous_was_redirect:
                previous_was_redirect = True
                continue
        elif last.reason != "TOO_MANY_PENDING":
            target = endpoints.next_after(target)
        # TOO_MANY_PENDING keeps the target: it is the leader asking for a pause, and another node
        # would cost a NOT_LEADER round trip back to it.
        previous_was_redirect = leader is not None
        sleep(max(0.0, min(backoff.next_sleep(), deadline - time.monotonic())))
    if last is None:
        last = errors.DeadlineExceededError(grpc.StatusCode.DEADLINE_EXCEEDED, "no attempt was made")
    raise last.with_message("%s: gave up after %d attempt(s) in %.0f ms (retry deadline %.0f ms); last error: %s"
                            % (what, attempts, (time.monotonic() - started) * 1000, retry_deadline * 1000, last))
