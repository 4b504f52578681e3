// What the replica answers its callers with: outcome codes and results of every client-facing
// operation (the server maps them to gRPC statuses, src/server/node_error_status.h), and the sink
// through which it sends Raft messages.
#pragma once

#include <cstdint>
#include <optional>
#include <map>
#include <string>

#include "raft/types.h"

namespace raftlog::replica {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,    // empty append, too many entries, entry too large, index 0
  kNotLeader,          // leader_id/leader_address name the leader when known
  kNoLeader,           // no leader known yet (election in progress)
  kOutOfRange,         // read below the first retained index or past the committed end
  kResourceExhausted,  // too many pending requests, input queue full, disk full
  kUnavailable,  // shutting down, or leadership lost with the outcome unknown (retry idempotently)
  kDeadlineExceeded,    // not committed in time (outcome unknown: retry idempotently)
  kFailedPrecondition,  // e.g. an idempotency sequence too old to be checked
  kInternal,            // a store error the node cannot continue from
  kDataLoss,            // a stored entry failed its checksum (corrupt); it is never served
};

const char* to_string(ErrorCode code);

struct NodeError {
  ErrorCode code = ErrorCode::kOk;
  std::string message;
  std::string reason;  // machine-readable word (api_errors/error_details.h); every refusal has one
  std::uint64_t leader_id = 0;  // for kNotLeader
  std::string leader_address;
  // For the index reasons (INDEX_TRIMMED, INDEX_NOT_YET_COMMITTED): the indexes the read was judged
  // against, so a client learns where the log starts and ends without another call.
  std::optional<std::uint64_t> first_index;
  std::optional<std::uint64_t> commit_index;
  bool ok() const { return code == ErrorCode::kOk; }
};

NodeError make_error(ErrorCode code, std::string message, std::string reason = "");

struct AppendResult {
  NodeError error;
  std::uint64_t first_index = 0;
  std::uint64_t last_index = 0;
  std::uint64_t term = 0;
  bool duplicate = false;  // answered from the dedup table: nothing new was written
};

// An append that did not (or may not) happen: no indexes to report.
inline AppendResult failed_append(NodeError error) {
  return AppendResult{std::move(error), 0, 0, 0, false};
}

struct TransferResult {
  NodeError error;
  std::uint64_t leader_id = 0;  // on success: the new leader (the target)
  std::uint64_t term = 0;       // the term it leads
};

struct MembershipResult {
  NodeError error;
  std::uint64_t index = 0;  // on success: the committed configuration entry
  std::uint64_t term = 0;
  raft::ConfState conf;  // on success: the configuration it holds
};

struct TrimResult {
  NodeError error;
  std::uint64_t first_index = 0;  // the node's first retained index afterwards
  std::uint64_t limit = 0;  // the highest before_index allowed at the time (see Replica::trim)
};

struct ReadIndexResult {
  NodeError error;
  std::uint64_t read_index = 0;  // every entry up to here is committed and readable on this node
};

// Reason words, as the client library reads them (src/api_errors/error_details.h).
inline constexpr const char* kReasonEmptyAppend = "EMPTY_APPEND";
inline constexpr const char* kReasonEntryTooLarge = "ENTRY_TOO_LARGE";
inline constexpr const char* kReasonTooManyEntries = "TOO_MANY_ENTRIES";
inline constexpr const char* kReasonBadIndexRange = "BAD_INDEX_RANGE";  // index 0
inline constexpr const char* kReasonIndexTrimmed = "INDEX_TRIMMED";
inline constexpr const char* kReasonIndexNotYetCommitted = "INDEX_NOT_YET_COMMITTED";
inline constexpr const char* kReasonTooManyPending = "TOO_MANY_PENDING";
inline constexpr const char* kReasonShuttingDown = "SHUTTING_DOWN";
// A committed change removed this node: its log stops there for good (a read or tail asks a member).
inline constexpr const char* kReasonNodeRemoved = "NODE_REMOVED";
inline constexpr const char* kReasonLeadershipLost = "LEADERSHIP_LOST";
inline constexpr const char* kReasonSequenceTooOld = "SEQUENCE_TOO_OLD";
inline constexpr const char* kReasonSequenceReused = "SEQUENCE_REUSED";
inline constexpr const char* kReasonBadSequence = "BAD_SEQUENCE";
inline constexpr const char* kReasonAppendTooLarge = "APPEND_TOO_LARGE";
inline constexpr const char* kReasonDiskFull = "DISK_FULL";
inline constexpr const char* kReasonDiskWatermark = "DISK_WATERMARK";
inline constexpr const char* kReasonCorruptEntry = "CORRUPT_ENTRY";
inline constexpr const char* kReasonStorageError = "STORAGE_ERROR";
// Topics and keys (docs/errors.md): an append's topic or keys outside their bounds, attributes
// that do not pair one to one with the entries, a topic read below the topic's first offset.
inline constexpr const char* kReasonBadTopic = "BAD_TOPIC";
inline constexpr const char* kReasonBadKeys = "BAD_KEYS";
inline constexpr const char* kReasonBadAttributes = "BAD_ATTRIBUTES";
inline constexpr const char* kReasonTopicOffsetTrimmed = "TOPIC_OFFSET_TRIMMED";
inline constexpr const char* kReasonTopicNotIndexed = "TOPIC_NOT_INDEXED";
// RESOURCE_EXHAUSTED: the append would add a topic past TopicOffsets::kMaxTopics.
inline constexpr const char* kReasonTooManyTopics = "TOO_MANY_TOPICS";
inline constexpr const char* kReasonCommitTimeout = "COMMIT_TIMEOUT";
inline constexpr const char* kReasonReadIndexTimeout = "READ_INDEX_TIMEOUT";
inline constexpr const char* kReasonTransferTargetUnknown = "TRANSFER_TARGET_UNKNOWN";
inline constexpr const char* kReasonTransferTargetLearner = "TRANSFER_TARGET_LEARNER";
inline constexpr const char* kReasonTransferInProgress = "TRANSFER_IN_PROGRESS";
inline constexpr const char* kReasonTransferSuperseded = "TRANSFER_SUPERSEDED";
inline constexpr const char* kReasonTransferTimeout = "TRANSFER_TIMEOUT";
inline constexpr const char* kReasonTransferTargetSilent = "TRANSFER_TARGET_SILENT";
inline constexpr const char* kReasonConfChangeInProgress = "CONF_CHANGE_IN_PROGRESS";
inline constexpr const char* kReasonNotAMember = "NOT_A_MEMBER";
inline constexpr const char* kReasonAlreadyAMember = "ALREADY_A_MEMBER";
// An add of an id a committed change removed (CONFSTATE's retired ids): ids are never reused.
inline constexpr const char* kReasonIdRetired = "ID_RETIRED";
inline constexpr const char* kReasonNotALearner = "NOT_A_LEARNER";
inline constexpr const char* kReasonBadMember = "BAD_MEMBER";  // node 0, or too many members
inline constexpr const char* kReasonWouldLoseQuorum = "WOULD_LOSE_QUORUM";
inline constexpr const char* kReasonLearnerBehind = "LEARNER_BEHIND";
inline constexpr const char* kReasonConfChangeTimeout = "CONF_CHANGE_TIMEOUT";
inline constexpr const char* kReasonLeaderNotReady = "LEADER_NOT_READY";
inline constexpr const char* kReasonBadAddress = "BAD_ADDRESS";
inline constexpr const char* kReasonAddressInUse = "ADDRESS_IN_USE";

// Where the replica's Raft messages go (the peer transport; the simulator's network).
class MessageSender {
 public:
  virtual ~MessageSender() = default;
  // Non-blocking; may drop (Raft retransmits).
  virtual void send(raft::Message message) = 0;
  // The peers to reach and accept from now on (Replica::peer_addresses), called by raftlogd's node
  // whenever they change. Non-blocking.
  virtual void set_peers(const std::map<std::uint64_t, std::string>& peers) { (void)peers; }
  // How far the transport got with the latest snapshot it sends `peer` while it still sends it or
  // has just sent it all (not after it abandoned it): the snapshot's index and the data bytes gone
  // out. {0, 0} when none (or a sender that cannot tell). Called on the Raft loop, once per tick
  // while a snapshot is in flight to `peer`: a change restarts the leader's snapshot retry timer
  // (raft::Raft::snapshot_progress), so a large snapshot on a slow link is not sent again from the
  // start while its chunks still flow. Non-blocking.
  struct SnapshotSendMark {
    std::uint64_t index = 0;
    std::uint64_t sent_bytes = 0;
    friend bool operator==(const SnapshotSendMark&, const SnapshotSendMark&) = default;
  };
  virtual SnapshotSendMark snapshot_send_mark(std::uint64_t peer) {
    (void)peer;
    return {};
  }
  // Whether `peer` decodes snapshot data version 4 (snapshot_frames.h), which a new leader can
  // continue after a leader change: the leader sends it version 4, else versions 1..3. raftlogd's
  // transport answers what the peer said on its latest message (an older node: false); a sender
  // whose peers all run this build (the simulator, tests) keeps this default. On the Raft loop,
  // once per snapshot send. Non-blocking.
  virtual bool takes_framed_snapshot_data(std::uint64_t peer) {
    (void)peer;
    return true;
  }
  // Whether `peer` also decodes snapshot data version 6 (version 4 with the running max stamp in
  // its head, snapshot_frames.h), so that its derived indexes answer time lookups after the install
  // as the leader's do: asked only when takes_framed_snapshot_data; the leader sends it version 6,
  // else version 4. Answered and defaulted as takes_framed_snapshot_data (a node from before
  // stamp5: false). On the Raft loop, once per snapshot send. Non-blocking.
  virtual bool takes_stamped_snapshot_data(std::uint64_t peer) {
    (void)peer;
    return true;
  }
  // The node's commit index is `committed`: a snapshot being received of an index at or below it
  // is of no use any more (the entries arrived by replication, or it was installed), so the
  // transport drops its partial at once (and the file that keeps it), and status and health stop
  // reporting it (review drills5 M4). On the Raft loop, once per tick. Non-blocking.
  virtual void snapshots_useless_through(std::uint64_t committed) { (void)committed; }
};

}  // namespace raftlog::replica
