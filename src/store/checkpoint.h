// The checkpoint: where the log was known durable, the upper layer's commit index, and an in-progress
// suffix truncation. Stored in CHECKPOINT through DurableRecordFile (two CRC'd slots).
//
// Payload layout (little-endian, 56 bytes):
//   0 u32 checkpoint version (1)   4 u32 reserved (0)
//   8 u64 flushed_index            every entry <= flushed_index is durable, and so are their index records
//   16 u64 flushed_segment_base    base index of the segment holding flushed_index (0 if none)
//   24 u64 flushed_offset          byte offset just past entry flushed_index in that segment
//   32 u64 commit_index            set by the upper layer (Raft), opaque to the store
//   40 u64 truncate_from           0, or the from_index of a truncate_suffix in progress
//   48 u64 generation              generation of the log instance that wrote it (see entry_format.h)
// Version 2 (72 bytes) is written only while a reset (CommitLog::reset) is in progress, and adds:
//   56 u64 reset_base              the first index of the empty log the reset leaves (non-zero)
//   64 u64 reset_prev_term         the term of entry reset_base - 1 in that log
// Every other checkpoint is version 1, byte for byte what it was before resets existed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace raftlog::store {

struct Checkpoint {
  std::uint64_t flushed_index = 0;
  std::uint64_t flushed_segment_base = 0;
  std::uint64_t flushed_offset = 0;
  std::uint64_t commit_index = 0;
  std::uint64_t truncate_from = 0;
  std::uint64_t generation = 0;
  // A reset in progress (0 = none): recovery replaces every segment by an empty one at reset_base.
  std::uint64_t reset_base = 0;
  std::uint64_t reset_prev_term = 0;
  friend bool operator==(const Checkpoint&, const Checkpoint&) = default;
};

// Checks (always on) that the payload decodes back to `checkpoint`.
std::string encode_checkpoint(const Checkpoint& checkpoint);
// nullopt when the payload has the wrong size or version (or is a version 2 without a reset).
std::optional<Checkpoint> decode_checkpoint(std::string_view payload);

}  // namespace raftlog::store
