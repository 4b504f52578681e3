"""What the client returns: plain values, independent of the generated protobuf classes."""
import dataclasses
import typing

ENTRY_TYPES = {0: "normal", 1: "noop", 2: "config", 3: "group-commit"}
ROLES = {0: "unknown", 1: "follower", 2: "pre-candidate", 3: "candidate", 4: "leader"}
FLUSH_MODES = {0: "unknown", 1: "sync", 2: "async"}


@dataclasses.dataclass(frozen=True)
class Entry:
    index: int
    term: int
    payload: bytes
    # "noop": a new leader's empty entry; "config": membership; "group-commit": a consumer group's
    # offset commit (both with an internal payload)
    type: str = "normal"
    client_id: int = 0
    sequence: int = 0

    @staticmethod
    def from_wire(entry):
        return Entry(entry.index, entry.term, bytes(entry.payload), ENTRY_TYPES.get(int(entry.type), "unknown"),
                     entry.client_id, entry.sequence)


@dataclasses.dataclass(frozen=True)
class AppendResult:
    first_index: int
    last_index: int
    term: int
    duplicate: bool  # answered from the dedup table: an earlier attempt of this append committed
    sequence: int    # the sequence number the append used
    endpoint: str    # the node that answered


@dataclasses.dataclass(frozen=True)
class ReadResult:
    entries: typing.List[Entry]
    commit_index: int  # the serving node's commit index when it answered
    endpoint: str


@dataclasses.dataclass(frozen=True)
class PeerStatus:
    id: int
    address: str
    match_index: int
    lag_entries: int
    last_contact_ms: int
    probing: bool
    behind_first_index: bool
    lag_bytes: int


@dataclasses.dataclass(frozen=True)
class NodeStatus:
    endpoint: str
    node_id: int
    address: str
    role: str
    term: int
    leader_id: int  # 0: no leader known
    leader_address: str
    first_index: int
    last_index: int
    commit_index: int
    flushed_index: int
    flush_mode: str
    peers: typing.List[PeerStatus]  # leader only
    catching_up: bool
    storage_fault: str
    corrupt_index: int
    # Non-zero while this follower needs entries its leader trimmed (it must be rebuilt); 0 otherwise.
    stranded_below_index: int = 0
    # The configuration in force on the node (empty from older nodes).
    voters: typing.Tuple[int, ...] = ()
    learners: typing.Tuple[int, ...] = ()
    learner_catching_up_to_index: int = 0  # a learner still catching up (0 = not)
    # Any follower catching up to its leader (NOT_SERVING): the leader's commit index (0 = not),
    # the entries its log lacks of it, and why health is NOT_SERVING ("" = SERVING or older node).
    catching_up_to_leader_commit: int = 0
    behind_leader_commit_entries: int = 0
    not_serving_reason: str = ""

    @staticmethod
    def from_wire(endpoint, s):
        peers = [PeerStatus(p.id, p.address, p.match_index, p.lag_entries, p.last_contact_ms, p.probing,
                            p.behind_first_index, p.lag_bytes) for p in s.peers]
        return NodeStatus(endpoint, s.node_id, s.address, ROLES.get(int(s.role), "unknown"), s.term, s.leader_id,
                          s.leader_address, s.first_index, s.last_index, s.commit_index, s.flushed_index,
                          FLUSH_MODES.get(int(s.flush_mode), "unknown"), peers, s.catching_up, s.storage_fault,
                          s.corrupt_index, s.stranded_below_index, tuple(s.voters), tuple(s.learners),
                          s.learner_catching_up_to_index, s.catching_up_to_leader_commit,
                          s.behind_leader_commit_entries, s.not_serving_reason)


@dataclasses.dataclass(frozen=True)
class GroupTopicOffset:
    topic: str
    offset: int        # the next offset of the topic the group will read
    commit_index: int  # the log index of the commit that set it


@dataclasses.dataclass(frozen=True)
class GroupOffsets:
    offsets: typing.List[GroupTopicOffset]  # by topic; a topic absent has no committed offset
    read_index: int
    endpoint: str


@dataclasses.dataclass(frozen=True)
class GroupSummary:
    group: str
    topics: int
    unknown_topics: int


@dataclasses.dataclass(frozen=True)
class GroupListing:
    groups: typing.List[GroupSummary]  # by name
    complete: bool  # False: the leader's table was rebuilt after retention and may miss groups
    read_index: int
    endpoint: str
