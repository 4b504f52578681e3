"""Typed exceptions for raftlog refusals, carrying the server's ErrorInfo (docs/errors.md).

Every refusal a raftlog node decides carries a reason word and hints in the standard
grpc-status-details-bin trailer (a google.rpc.Status holding a google.rpc.ErrorInfo) and, for older
clients, in raftlog-error-bin (a raftlog.v1.ErrorInfo). from_rpc_error() reads the standard one and
falls back to the older one. The class of an exception follows the reason first, then the gRPC code
(docs/client-protocol.md, section 2, has the table these classes follow).
"""
import grpc

from ._stubs import client_pb2, error_model_pb2

STATUS_DETAILS_KEY = "grpc-status-details-bin"
RAFTLOG_ERROR_KEY = "raftlog-error-bin"
ERROR_DOMAIN = "raftlog.v1"
ERROR_INFO_TYPE_URL = "type.googleapis.com/google.rpc.ErrorInfo"

_CODES_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}


def status_code(number):
    """The grpc.StatusCode with this number (AppendStreamResult.code); UNKNOWN for a number gRPC lacks."""
    return _CODES_BY_NUMBER.get(number, grpc.StatusCode.UNKNOWN)


class RaftlogError(Exception):
    """A refused or failed raftlog call.

    code      grpc.StatusCode
    message   the status message (for people; decide on code and reason, never on this text)
    reason    the ErrorInfo reason word ("" when no raftlog handler chose the status: gRPC's own)
    metadata  the ErrorInfo metadata (str -> str): leader_id, leader_address, first_index, commit_index
    endpoint  the node that answered ("" when unknown)
    """

    def __init__(self, code, message, reason="", metadata=None, endpoint=""):
        self.code = code
        self.message = message
        self.reason = reason
        self.metadata = dict(metadata or {})
        self.endpoint = endpoint
        super().__init__(self._text())

    def _text(self):
        where = " from %s" % self.endpoint if self.endpoint else ""
        reason = " [%s]" % self.reason if self.reason else ""
        return "%s%s%s: %s" % (self.code.name, reason, where, self.message)

    def _number(self, key):
        value = self.metadata.get(key, "")
        return int(value) if value.isdigit() else None

    @property
    def leader_id(self):
        """The leader's node id (NOT_LEADER), or None."""
        return self._number("leader_id")

    @property
    def leader_address(self):
        """The leader's client address (NOT_LEADER), or None."""
        return self.metadata.get("leader_address") or None

    @property
    def first_index(self):
        """The node's first retained index (INDEX_TRIMMED, INDEX_NOT_YET_COMMITTED), or None."""
        return self._number("first_index")

    @property
    def commit_index(self):
        """The node's commit index (INDEX_TRIMMED, INDEX_NOT_YET_COMMITTED), or None."""
        return self._number("commit_index")

    def with_message(self, message):
        """The same error (class, code, reason, hints) with another message."""
        return type(self)(self.code, message, self.reason, self.metadata, self.endpoint)


class LeaderError(RaftlogError):
    """The node is not the leader; retried by the client (redirected when the leader is named)."""


class NotLeaderError(LeaderError):
    """NOT_LEADER: leader_id / leader_address name the leader."""


class NoLeaderError(LeaderError):
    """NO_LEADER: an election is running; no node named."""


class InvalidRequestError(RaftlogError):
    """INVALID_ARGUMENT: the request breaks a rule or a bound; nothing was written. Never retried."""


class SequenceReusedError(RaftlogError):
    """SEQUENCE_REUSED: the (client_id, sequence) holds other entries; this attempt wrote nothing."""


class SequenceTooOldError(RaftlogError):
    """SEQUENCE_TOO_OLD: the (client_id, sequence) is older than the node's dedup window."""


class IndexOutOfRangeError(RaftlogError):
    """OUT_OF_RANGE: the index is not readable on that node (first_index / commit_index say why)."""


class IndexTrimmedError(IndexOutOfRangeError):
    """INDEX_TRIMMED: below the node's first retained index; deleted by retention, gone for good."""


class IndexNotYetCommittedError(IndexOutOfRangeError):
    """INDEX_NOT_YET_COMMITTED: past the node's committed end; retry later."""


class ResourceExhaustedError(RaftlogError):
    """RESOURCE_EXHAUSTED: a bound of the node (or gRPC's message size bound, without a reason)."""


class TooManyPendingError(ResourceExhaustedError):
    """TOO_MANY_PENDING: too much pending work or too many streams; retried after a backoff."""


class DiskFullError(ResourceExhaustedError):
    """DISK_FULL / DISK_WATERMARK: the leader's disk; not retried (an operator must free space)."""


class UnavailableError(RaftlogError):
    """UNAVAILABLE: shutting down, leadership lost, a transfer that did not happen, or no connection."""


class DeadlineExceededError(RaftlogError):
    """DEADLINE_EXCEEDED: COMMIT_TIMEOUT, READ_INDEX_TIMEOUT, or a deadline of this client."""


class CorruptEntryError(RaftlogError):
    """DATA_LOSS (CORRUPT_ENTRY): the entry failed its checksum on that node; another node has it."""


class StorageError(RaftlogError):
    """INTERNAL (STORAGE_ERROR): the node's store failed."""


class ProtocolError(RaftlogError):
    """The server broke the API's contract (a gap in a tail, an answer for another request)."""


class AppendOutcomeUnknownError(RaftlogError):
    """An append gave up while one of its attempts may have been applied: its entries may be in the
    log, or may yet appear. Retrying with the same (client_id, sequence) and entries would tell
    (docs/client-protocol.md, section 2); `sequence` is the one it used, `last_error` the last refusal."""

    def __init__(self, code, message, reason="", metadata=None, endpoint="", sequence=0, last_error=None):
        super().__init__(code, message, reason, metadata, endpoint)
        self.sequence = sequence
        self.last_error = last_error

    def with_message(self, message):
        return AppendOutcomeUnknownError(self.code, message, self.reason, self.metadata, self.endpoint,
                                         self.sequence, self.last_error)


_CLASS_BY_REASON = {
    "NOT_LEADER": NotLeaderError,
    "NO_LEADER": NoLeaderError,
    "SEQUENCE_REUSED": SequenceReusedError,
    "SEQUENCE_TOO_OLD": SequenceTooOldError,
    "INDEX_TRIMMED": IndexTrimmedError,
    "INDEX_NOT_YET_COMMITTED": IndexNotYetCommittedError,
    "TOO_MANY_PENDING": TooManyPendingError,
    "DISK_FULL": DiskFullError,
    "DISK_WATERMARK": DiskFullError,
    "CORRUPT_ENTRY": CorruptEntryError,
    "STORAGE_ERROR": StorageError,
}
_CLASS_BY_CODE = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequestError,
    grpc.StatusCode.OUT_OF_RANGE: IndexOutOfRangeError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.DATA_LOSS: CorruptEntryError,
    grpc.StatusCode.INTERNAL: StorageError,
}


def make_error(code, message, reason="", metadata=None, endpoint=""):
    """The typed exception for a status `code` (grpc.StatusCode) with this reason and metadata."""
    cls = _CLASS_BY_REASON.get(reason)
    # A reason paired with an unexpected code (a newer server) is classified by its code.
    if cls is NotLeaderError or cls is NoLeaderError:
        cls = cls if code == grpc.StatusCode.FAILED_PRECONDITION else None
    if cls is None:
        cls = _CLASS_BY_CODE.get(code, RaftlogError)
    return cls(code, message, reason, metadata, endpoint)


def _standard_details(value):
    """(reason, metadata) from a grpc-status-details-bin value, or None when it holds no ErrorInfo."""
    status = error_model_pb2.Status.FromString(value)
    for detail in status.details:
        if detail.type_url == ERROR_INFO_TYPE_URL:
            info = error_model_pb2.ErrorInfo()
            if detail.Unpack(info):
                return info.reason, dict(info.metadata)
    return None


def legacy_metadata(info):
    """The metadata the standard ErrorInfo would carry for a raftlog.v1.ErrorInfo's leader hint."""
    metadata = {}
    if info.leader_id:
        metadata["leader_id"] = str(info.leader_id)
    if info.leader_address:
        metadata["leader_address"] = info.leader_address
    return metadata


def details_from_trailers(trailers):
    """(reason, metadata) from a failed call's trailing metadata; ("", {}) when it has none."""
    values = {}
    for key, value in trailers or ():
        values.setdefault(key, value)
    try:
        if STATUS_DETAILS_KEY in values:
            found = _standard_details(values[STATUS_DETAILS_KEY])
            if found is not None:
                return found
        if RAFTLOG_ERROR_KEY in values:
            info = client_pb2.ErrorInfo.FromString(values[RAFTLOG_ERROR_KEY])
            return info.reason, legacy_metadata(info)
    except Exception:  # a trailer that does not parse is treated as absent (nothing from the network is trusted)
        pass
    return "", {}


def from_rpc_error(error, endpoint=""):
    """The typed exception for a grpc.RpcError raised by a call to `endpoint`."""
    try:
        code = error.code()
        message = error.details() or ""
        trailers = error.trailing_metadata()
    except Exception:  # an error raised locally by grpc without call details
        code, message, trailers = grpc.StatusCode.UNKNOWN, str(error), ()
    if code is None:
        code = grpc.StatusCode.UNKNOWN
    reason, metadata = details_from_trailers(trailers)
    return make_error(code, message, reason, metadata, endpoint)


def from_stream_result(result, endpoint=""):
    """The typed exception an AppendStreamResult with a non-zero code stands for."""
    info = result.error_info
    return make_error(status_code(result.code), result.message, info.reason, legacy_metadata(info), endpoint)
