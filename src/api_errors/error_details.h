// The machine-readable part of a raftlog error (a plain mirror of raftlog.v1.ErrorInfo) and the
// reason words it carries, kept free of gRPC and protobuf headers so client.h users do not compile
// them. error_info.h moves it on and off the wire.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace raftlog::api_errors {

inline constexpr std::string_view kErrorInfoMetadataKey = "raftlog-error-bin";

// ErrorInfo.reason words (proto/raftlog/v1/client.proto lists which status code goes with each).
namespace reason {
inline constexpr std::string_view kNotLeader = "NOT_LEADER";          // FAILED_PRECONDITION, leader named
inline constexpr std::string_view kNoLeader = "NO_LEADER";            // FAILED_PRECONDITION, election running
inline constexpr std::string_view kEmptyAppend = "EMPTY_APPEND";      // INVALID_ARGUMENT
inline constexpr std::string_view kEntryTooLarge = "ENTRY_TOO_LARGE";  // INVALID_ARGUMENT
inline constexpr std::string_view kTooManyEntries = "TOO_MANY_ENTRIES";  // INVALID_ARGUMENT
inline constexpr std::string_view kAppendTooLarge = "APPEND_TOO_LARGE";  // INVALID_ARGUMENT: total payload bytes
inline constexpr std::string_view kSequenceTooOld = "SEQUENCE_TOO_OLD";  // FAILED_PRECONDITION: below the dedup window
inline constexpr std::string_view kSequenceReused = "SEQUENCE_REUSED";  // FAILED_PRECONDITION: sequence taken by other entries
inline constexpr std::string_view kBadSequence = "BAD_SEQUENCE";  // INVALID_ARGUMENT: sequence 0 with a non-zero client_id
inline constexpr std::string_view kBadIndexRange = "BAD_INDEX_RANGE";  // INVALID_ARGUMENT / OUT_OF_RANGE
inline constexpr std::string_view kMalformedRequest = "MALFORMED_REQUEST";  // INVALID_ARGUMENT: not a valid protobuf message
inline constexpr std::string_view kDiskFull = "DISK_FULL";             // RESOURCE_EXHAUSTED
inline constexpr std::string_view kDiskWatermark = "DISK_WATERMARK";   // RESOURCE_EXHAUSTED: disk use above the high watermark
inline constexpr std::string_view kTooManyPending = "TOO_MANY_PENDING";  // RESOURCE_EXHAUSTED
inline constexpr std::string_view kShuttingDown = "SHUTTING_DOWN";     // UNAVAILABLE
inline constexpr std::string_view kLeadershipLost = "LEADERSHIP_LOST";  // UNAVAILABLE, outcome unknown
}  // namespace reason

// Plain mirror of raftlog.v1.ErrorInfo (keeps the protobuf type out of callers' headers).
struct ErrorDetails {
  std::uint64_t leader_id = 0;  // 0 = no leader known
  std::string leader_address;   // the leader's client address ("" = unknown)
  std::string reason;           // one of the reason words above

  friend bool operator==(const ErrorDetails&, const ErrorDetails&) = default;
};

}  // namespace raftlog::api_errors
