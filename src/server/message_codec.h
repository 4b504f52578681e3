// Conversion between the Raft core's raft::Message and the wire form raftlog.peer.v1.RaftMessage.
//
// Encoding cannot fail. Decoding checks every field a peer controls, because a malformed message
// from the network must never reach the core (which asserts its invariants): the codec returns an
// error sentence instead, and the transport ends that peer's stream.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "raft/types.h"
#include "server/snapshot_chunks.h"

namespace raftlog::peer::v1 {
class RaftMessage;  // generated from proto/raftlog/peer/v1/peer.proto
}

namespace raftlog::server {

// Bounds an inbound message must respect. The defaults match raft::Config's defaults with headroom.
// The highest index a snapshot may name, the bound the replica's snapshot data decoder applies
// too (replica/snapshot_data.cpp): its successor, the follower's new first index, never wraps, and a
// forged index near 2^64 cannot push a follower's commit index beyond what a real leader sends.
inline constexpr std::uint64_t kMaxSnapshotIndex = std::uint64_t{1} << 62;

struct MessageLimits {
  // Whole encoded message (protobuf bytes). Must be at least the core's max_bytes_per_message plus
  // per-entry overhead, and below the gRPC channel's max receive size.
  std::size_t max_message_bytes = 8u << 20;
  // Entries in one kAppend (the core's max_entries_per_message, default 256, with headroom).
  std::size_t max_entries_per_message = 4096;
};

// Fills `out` (cleared first) from `message`; `cluster_id` and this node's snapshot formats
// (kOwnSnapshotFormats) are stamped on every message.
void encode_message(const raft::Message& message, std::string_view cluster_id,
                    peer::v1::RaftMessage* out);

// Checks `in` and converts it into `out`. Returns an empty string on success, otherwise a sentence
// naming the first problem (and `out` is unspecified). Checked:
//   - the type is one of the ten Raft message types (not UNSPECIFIED, not an unknown number);
//   - `from` and `to` are non-zero and differ;
//   - term, log_term and hint_term are at most raft::kMaxTerm (entry terms are bounded by `term`);
//   - the encoded size is at most limits.max_message_bytes, the entry count at most
//     limits.max_entries_per_message;
//   - entries appear only in APPEND; each has a known type, indexes are contiguous starting at
//     `index + 1` (no overflow), terms are non-decreasing, not below `log_term` and not above the
//     message's `term` (a leader only sends entries of its own or earlier terms);
//   - a snapshot appears in SNAPSHOT and only there, and SNAPSHOT always has one: index in
//     1..kMaxSnapshotIndex (2^62), term in 1..`term`, and a configuration that
//     raft::decode_config accepts (version, CRC, valid members and addresses); its data is bounded
//     by the whole message's bound.
//   - a whole snapshot has chunk_offset, total_bytes and data_crc32c 0; a chunk
//     (is_snapshot_chunk) has total_bytes at most kMaxSnapshotBytes and 1.. bytes of data lying
//     inside it (decode_snapshot_chunk; decode_message refuses a chunk).
// The cluster id is not checked here: the transport checks it against its own.
std::string decode_message(const peer::v1::RaftMessage& in, const MessageLimits& limits,
                           raft::Message* out);
// The same checks; the entries' payloads are moved out of `in` rather than copied (a multi-MiB
// append is not copied once more). `in` is left valid but its payloads unspecified.
std::string decode_message(peer::v1::RaftMessage&& in, const MessageLimits& limits,
                           raft::Message* out);

// One chunk of `message`'s snapshot data (snapshot_chunks.h): every field of the message, the
// `length` data bytes at place.offset, and the place. Precondition: they lie inside the data.
// `splice`: a continuation (SnapshotChunk::splice), whose message holds the data from
// splice->kept_bytes on (place.offset >= kept_bytes).
void encode_snapshot_chunk(const raft::Message& message, const SnapshotChunkPlace& place,
                           std::size_t length, std::string_view cluster_id,
                           peer::v1::RaftMessage* out,
                           const std::optional<replica::FramedSplicePoint>& splice = std::nullopt);
// A SNAPSHOT message carrying one chunk of a snapshot sent in chunks (total_bytes set).
bool is_snapshot_chunk(const peer::v1::RaftMessage& in);
// The checks of decode_message for a chunk; its data is moved out of `in` into out->data.
std::string decode_snapshot_chunk(peer::v1::RaftMessage&& in, const MessageLimits& limits,
                                  SnapshotChunk* out);

// Puts `receipt` on an encoded message (any type).
void encode_snapshot_receipt(const SnapshotReceipt& receipt, peer::v1::RaftMessage* out);
// The receipt `in` carries: nullopt when it carries none, or (with *problem set) when it fails the
// checks (peer.proto, SnapshotReceipt): a receipt is advice, so a bad one is ignored, not fatal.
std::optional<SnapshotReceipt> decode_snapshot_receipt(const peer::v1::RaftMessage& in,
                                                       std::string* problem);

// Stable lower-case name of a message type for logs ("append", "vote_response", ...).
std::string_view message_type_name(raft::MessageType type);

}  // namespace raftlog::server
