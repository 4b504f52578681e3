// Byte layouts of the segment header and of index files, and the file naming scheme
// (little-endian; docs/storage-format.md).
//
// Segment header (kSegmentHeaderBytes = 64, at offset 0 of every <base>.seg):
//   0  u32 magic 0x47534C52 ("RLSG")     4  u32 crc32c over [8, 64)
//   8  u32 format version (1)            12 u32 header size (64)
//   16 u64 base_index: index of the first entry this segment holds (or will hold)
//   24 u64 prev_term: term of entry base_index - 1 (0 if none)
//   32 u64 segment_size_bytes            40..63 reserved, zero
//
// Index file <base>.idx: header (64 bytes) then one fixed-width record per entry of the segment, the
// record for index i at offset 64 + (i - base_index) * 32:
//   header: 0 u32 magic 0x58494C52 ("RLIX"), 4 u32 crc32c over [8, 64), 8 u32 version (1),
//           12 u32 record size (32), 16 u64 base_index, 24 u64 capacity_records, 32..63 zero
//   record: 0 u64 index, 8 u64 term, 16 u64 offset of the entry in the segment,
//           24 u32 entry record bytes, 28 u32 crc32c over [0, 28)
// An all-zero record is invalid (its CRC does not match), so unwritten records are detected.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace raftlog::store::segment_format {

inline constexpr std::uint32_t kSegmentMagic = 0x47534C52U;
inline constexpr std::uint32_t kIndexMagic = 0x58494C52U;
inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::uint64_t kSegmentHeaderBytes = 64;
inline constexpr std::uint64_t kIndexHeaderBytes = 64;
inline constexpr std::uint64_t kIndexRecordBytes = 32;

struct SegmentHeader {
  std::uint64_t base_index = 0;
  std::uint64_t prev_term = 0;
  std::uint64_t segment_size_bytes = 0;
  friend bool operator==(const SegmentHeader&, const SegmentHeader&) = default;
};
// Each encode_* checks (always on) that what it wrote decodes back to its input; the decode_*
// functions refuse bad bytes with nullopt.
void encode_segment_header(const SegmentHeader& header, char* out);  // 64 bytes; base_index > 0
std::optional<SegmentHeader> decode_segment_header(const char* in);  // nullopt if invalid

struct IndexHeader {
  std::uint64_t base_index = 0;
  std::uint64_t capacity_records = 0;
  friend bool operator==(const IndexHeader&, const IndexHeader&) = default;
};
void encode_index_header(const IndexHeader& header, char* out);
std::optional<IndexHeader> decode_index_header(const char* in);

struct IndexRecord {
  std::uint64_t index = 0;
  std::uint64_t term = 0;
  std::uint64_t offset = 0;
  std::uint32_t record_bytes = 0;
  friend bool operator==(const IndexRecord&, const IndexRecord&) = default;
};
void encode_index_record(const IndexRecord& record, char* out);
std::optional<IndexRecord> decode_index_record(const char* in);

// Most entries a segment of `segment_size_bytes` can hold (every record is >= 56 bytes).
std::uint64_t index_capacity_records(std::uint64_t segment_size_bytes);
std::uint64_t index_file_bytes(std::uint64_t segment_size_bytes);

// "<20-digit zero-padded base>.seg" / ".idx".
std::string segment_file_name(std::uint64_t base_index);
std::string index_file_name(std::uint64_t base_index);
// Parses a segment file name; nullopt for any other name.
std::optional<std::uint64_t> parse_segment_file_name(const std::string& name);
std::optional<std::uint64_t> parse_index_file_name(const std::string& name);
inline constexpr const char* kPreallocPrefix = "prealloc-";
// A reset's old segment files, renamed aside ("discard-<base>.seg/.idx") until removed
// (CommitLog::remove_discarded); recovery removes any it finds and never reads them.
inline constexpr const char* kDiscardPrefix = "discard-";
inline constexpr const char* kCheckpointFileName = "CHECKPOINT";
inline constexpr const char* kAbortMarkerFileName = "ABORT";

}  // namespace raftlog::store::segment_format
