// The machine-readable part of a raftlog error and the reason words it carries, kept free of gRPC
// and protobuf headers so client.h users do not compile them. error_info.h moves it on and off the
// wire.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace raftlog::api_errors {

// The trailers a refusal carries (error_info.h attaches and reads them):
//   grpc-status-details-bin  the standard google.rpc.Status with a google.rpc.ErrorInfo (domain
//                            kErrorDomain, metadata keys below); what non-C++ clients and tools read
//   raftlog-error-bin        a raftlog.v1.ErrorInfo (leader hint, reason), kept for existing clients
inline constexpr std::string_view kErrorInfoMetadataKey = "raftlog-error-bin";
inline constexpr std::string_view kStatusDetailsMetadataKey = "grpc-status-details-bin";
inline constexpr std::string_view kErrorDomain = "raftlog.v1";
inline constexpr std::string_view kErrorInfoTypeUrl = "type.googleapis.com/google.rpc.ErrorInfo";
// Not an error: the initial metadata key a node sends as soon as it accepted a Tail (request valid,
// stream registered), its value the from_index in decimal. A refused Tail ends without it, so a
// client waiting for initial metadata tells "accepted" from "refused" without waiting for an entry
// (docs/client-protocol.md, section 6).
inline constexpr std::string_view kTailAcceptedMetadataKey = "raftlog-tail-accepted";

// google.rpc.ErrorInfo.metadata keys (values in decimal, except the address).
namespace metadata_key {
inline constexpr std::string_view kLeaderId = "leader_id";
inline constexpr std::string_view kLeaderAddress = "leader_address";
inline constexpr std::string_view kFirstIndex = "first_index";
inline constexpr std::string_view kCommitIndex = "commit_index";
}  // namespace metadata_key

// ErrorInfo.reason words (proto/raftlog/v1/client.proto lists which status code goes with each,
// docs/errors.md what a client does about each). Every refusal of the server carries one.
namespace reason {
inline constexpr std::string_view kNotLeader = "NOT_LEADER";  // FAILED_PRECONDITION, leader named
inline constexpr std::string_view kNoLeader = "NO_LEADER";  // FAILED_PRECONDITION, election running
inline constexpr std::string_view kEmptyAppend = "EMPTY_APPEND";         // INVALID_ARGUMENT
inline constexpr std::string_view kEntryTooLarge = "ENTRY_TOO_LARGE";    // INVALID_ARGUMENT
inline constexpr std::string_view kTooManyEntries = "TOO_MANY_ENTRIES";  // INVALID_ARGUMENT
inline constexpr std::string_view kTooManyAppends =
    "TOO_MANY_APPENDS";  // INVALID_ARGUMENT: an AppendStream message over its appends bound
inline constexpr std::string_view kAppendTooLarge =
    "APPEND_TOO_LARGE";  // INVALID_ARGUMENT: total payload bytes
inline constexpr std::string_view kSequenceTooOld =
    "SEQUENCE_TOO_OLD";  // FAILED_PRECONDITION: below the dedup window
inline constexpr std::string_view kSequenceReused =
    "SEQUENCE_REUSED";  // FAILED_PRECONDITION: sequence taken by other entries
inline constexpr std::string_view kBadSequence =
    "BAD_SEQUENCE";  // INVALID_ARGUMENT: sequence 0 with a non-zero client_id
// INVALID_ARGUMENT: index 0. Before INDEX_TRIMMED and INDEX_NOT_YET_COMMITTED existed it also named
// both OUT_OF_RANGE reads (docs/errors.md).
inline constexpr std::string_view kBadIndexRange = "BAD_INDEX_RANGE";
inline constexpr std::string_view kIndexTrimmed =
    "INDEX_TRIMMED";  // OUT_OF_RANGE: below the first retained index, gone
inline constexpr std::string_view kIndexNotYetCommitted =
    "INDEX_NOT_YET_COMMITTED";  // OUT_OF_RANGE: past the end, retry later
inline constexpr std::string_view kMalformedRequest =
    "MALFORMED_REQUEST";  // INVALID_ARGUMENT: not a valid protobuf message
inline constexpr std::string_view kDiskFull = "DISK_FULL";  // RESOURCE_EXHAUSTED
inline constexpr std::string_view kDiskWatermark =
    "DISK_WATERMARK";  // RESOURCE_EXHAUSTED: disk use above the high watermark
inline constexpr std::string_view kTooManyPending = "TOO_MANY_PENDING";  // RESOURCE_EXHAUSTED
inline constexpr std::string_view kShuttingDown = "SHUTTING_DOWN";       // UNAVAILABLE
inline constexpr std::string_view kNodeRemoved =
    "NODE_REMOVED";  // UNAVAILABLE: a read or tail on a node a committed change removed
inline constexpr std::string_view kLeadershipLost =
    "LEADERSHIP_LOST";  // UNAVAILABLE, outcome unknown
inline constexpr std::string_view kCommitTimeout =
    "COMMIT_TIMEOUT";  // DEADLINE_EXCEEDED, outcome unknown
inline constexpr std::string_view kReadIndexTimeout =
    "READ_INDEX_TIMEOUT";  // DEADLINE_EXCEEDED: leadership unconfirmed
inline constexpr std::string_view kTransferTargetUnknown =
    "TRANSFER_TARGET_UNKNOWN";  // INVALID_ARGUMENT: the target is not a member
inline constexpr std::string_view kTransferTargetLearner =
    "TRANSFER_TARGET_LEARNER";  // FAILED_PRECONDITION: the target is a learner (promote it first)
inline constexpr std::string_view kTransferInProgress = "TRANSFER_IN_PROGRESS";  // UNAVAILABLE
inline constexpr std::string_view kTransferSuperseded =
    "TRANSFER_SUPERSEDED";  // UNAVAILABLE: a newer transfer replaced it
inline constexpr std::string_view kTransferTimeout = "TRANSFER_TIMEOUT";  // UNAVAILABLE
inline constexpr std::string_view kTransferTargetSilent =
    "TRANSFER_TARGET_SILENT";  // FAILED_PRECONDITION: the target has not answered the leader lately
inline constexpr std::string_view kCorruptEntry =
    "CORRUPT_ENTRY";  // DATA_LOSS: never served; read another node
inline constexpr std::string_view kStorageError =
    "STORAGE_ERROR";  // INTERNAL: the node's store failed
inline constexpr std::string_view kBadTopic = "BAD_TOPIC";  // INVALID_ARGUMENT: length or charset
inline constexpr std::string_view kBadKeys = "BAD_KEYS";    // INVALID_ARGUMENT: count or length
inline constexpr std::string_view kBadAttributes =
    "BAD_ATTRIBUTES";  // INVALID_ARGUMENT: attributes not one per entry
inline constexpr std::string_view kTopicOffsetTrimmed =
    "TOPIC_OFFSET_TRIMMED";  // OUT_OF_RANGE: below the topic's first offset, gone
inline constexpr std::string_view kTopicNotIndexed =
    "TOPIC_NOT_INDEXED";  // FAILED_PRECONDITION: the node's indexes hold their most topics
inline constexpr std::string_view kTooManyTopics =
    "TOO_MANY_TOPICS";  // RESOURCE_EXHAUSTED: the log holds the most topics it may
// Membership changes (raftlog.v1.Admin, docs/errors.md).
inline constexpr std::string_view kConfChangeInProgress =
    "CONF_CHANGE_IN_PROGRESS";  // UNAVAILABLE: one change at a time; retry once it committed
inline constexpr std::string_view kLeaderNotReady =
    "LEADER_NOT_READY";  // UNAVAILABLE: a new leader has not committed an entry of its term; retry
inline constexpr std::string_view kNotAMember = "NOT_A_MEMBER";          // INVALID_ARGUMENT
inline constexpr std::string_view kAlreadyAMember = "ALREADY_A_MEMBER";  // FAILED_PRECONDITION
inline constexpr std::string_view kNotALearner = "NOT_A_LEARNER";        // FAILED_PRECONDITION
inline constexpr std::string_view kIdRetired = "ID_RETIRED";              // FAILED_PRECONDITION
inline constexpr std::string_view kBadMember = "BAD_MEMBER";  // INVALID_ARGUMENT: id 0, too many
inline constexpr std::string_view kBadAddress = "BAD_ADDRESS";        // INVALID_ARGUMENT
inline constexpr std::string_view kAddressInUse = "ADDRESS_IN_USE";   // FAILED_PRECONDITION
// FAILED_PRECONDITION: a node of another id or cluster answers at the new member's address.
inline constexpr std::string_view kWrongNodeAtAddress = "WRONG_NODE_AT_ADDRESS";
inline constexpr std::string_view kWouldLoseQuorum = "WOULD_LOSE_QUORUM";  // FAILED_PRECONDITION
inline constexpr std::string_view kLearnerBehind = "LEARNER_BEHIND";        // FAILED_PRECONDITION
inline constexpr std::string_view kConfChangeTimeout =
    "CONF_CHANGE_TIMEOUT";  // DEADLINE_EXCEEDED: outcome unknown, list the members
// Consumer groups (raftlog.v1.Groups, docs/errors.md).
inline constexpr std::string_view kBadGroup = "BAD_GROUP";  // INVALID_ARGUMENT: length or charset
inline constexpr std::string_view kUnknownTopic =
    "UNKNOWN_TOPIC";  // INVALID_ARGUMENT: the leader indexed no entry of that topic
inline constexpr std::string_view kOffsetBeyondEnd =
    "OFFSET_BEYOND_END";  // INVALID_ARGUMENT: past the topic's end offset
inline constexpr std::string_view kTooManyGroups = "TOO_MANY_GROUPS";  // RESOURCE_EXHAUSTED
inline constexpr std::string_view kTooManyGroupTopics =
    "TOO_MANY_GROUP_TOPICS";  // RESOURCE_EXHAUSTED: topics of one group
inline constexpr std::string_view kGroupOffsetsUnknown =
    "GROUP_OFFSETS_UNKNOWN";  // FAILED_PRECONDITION: commits trimmed before applied; commit again
inline constexpr std::string_view kGroupsBehind =
    "GROUPS_BEHIND";  // UNAVAILABLE: the group table has not applied through the read index; retry
}  // namespace reason

// The machine-readable part of a refusal: what raftlog.v1.ErrorInfo carries, plus the index hints
// that travel only in the standard ErrorInfo's metadata.
struct ErrorDetails {
  std::uint64_t leader_id = 0;  // 0 = no leader known
  std::string leader_address;   // the leader's client address ("" = unknown)
  std::string reason;           // one of the reason words above
  // INDEX_TRIMMED / INDEX_NOT_YET_COMMITTED: the serving node's first retained and commit index.
  std::optional<std::uint64_t> first_index;
  std::optional<std::uint64_t> commit_index;

  friend bool operator==(const ErrorDetails&, const ErrorDetails&) = default;
};

}  // namespace raftlog::api_errors
