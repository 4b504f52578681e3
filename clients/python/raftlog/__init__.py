"""raftlog: a Python client for raftlog clusters (docs/client-protocol.md is the contract it follows).

    import raftlog
    client = raftlog.Client("127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003")
    print(client.append([b"hello"]).first_index)

Client (append, append_stream, read, tail, status, leader; commit_offset, fetch_offsets, list_groups), Producer (batching), and the typed
exceptions of raftlog.errors, each carrying the server's ErrorInfo (reason, metadata).
"""
import pkgutil

# The generated modules (raftlog.v1.*) may sit in another directory on sys.path than these sources:
# the build tree's gen/ directory (clients/python/CMakeLists.txt). extend_path joins them into one package.
__path__ = pkgutil.extend_path(__path__, __name__)  # noqa: F821 (set by the import system)

from .client import Client, parse_endpoints  # noqa: E402
from .errors import (  # noqa: E402
    AppendOutcomeUnknownError, CorruptEntryError, DeadlineExceededError, DiskFullError, IndexNotYetCommittedError,
    IndexOutOfRangeError, IndexTrimmedError, InvalidRequestError, LeaderError, NoLeaderError, NotLeaderError,
    ProtocolError, RaftlogError, ResourceExhaustedError, SequenceReusedError, SequenceTooOldError, StorageError,
    TooManyPendingError, UnavailableError)
from .producer import Producer  # noqa: E402
from .stream import AppendStream  # noqa: E402
from .tail import Tail  # noqa: E402
from .types import (  # noqa: E402
    AppendResult, Entry, GroupListing, GroupOffsets, GroupSummary, GroupTopicOffset, NodeStatus, PeerStatus, ReadResult)

__version__ = "0.1.0"
