// Segment: one open data segment file and its index file, both memory-mapped.
//
// A segment is born as a PreparedSegment (files "prealloc-<n>.seg/.idx", fully preallocated and
// mapped, created ahead of time by the allocator thread) and becomes a Segment when activated: its
// headers are written and both files are renamed to "<base>.seg/.idx". The data file is preallocated
// in full (posix_fallocate), so writing into its mapping can never hit SIGBUS on a full disk; the
// index file is sparse and allocated in kIndexChunkBytes steps before records are written into it.
//
// Field ownership (enforced by CommitLog's locks, documented there): the immutable fields are set at
// construction; write_offset/entry_count/last_term change under the writer lock and are published
// under the metadata lock; flushed_offset/index_flushed_bytes belong to the flush cycle.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "store/env.h"
#include "store/segment_format.h"
#include "store/status.h"

namespace raftlog::store {

inline constexpr std::uint64_t kIndexChunkBytes = 256ULL << 10;

struct PreparedSegment {
  std::string data_path;
  std::string index_path;
  std::unique_ptr<File> data_file;
  std::unique_ptr<File> index_file;
  std::shared_ptr<Mapping> data_map;
  std::shared_ptr<Mapping> index_map;
  std::uint64_t index_allocated_bytes = 0;  // index file blocks reserved from offset 0
};

// Creates prealloc files `<dir>/prealloc-<sequence>.seg/.idx` of the right sizes and maps them.
// kNoSpace when the disk cannot hold the segment (partial files are removed).
Result<PreparedSegment> prepare_segment(Env* env, const std::string& dir, std::uint64_t sequence,
                                        std::uint64_t segment_size_bytes, bool zero_fill);

class Segment {
 public:
  // Writes both headers into a prepared segment and renames its files to their final names. The
  // directory is NOT synced (the flusher does that before claiming entries of this segment durable).
  static Result<std::shared_ptr<Segment>> activate(Env* env, const std::string& dir,
                                                   PreparedSegment prepared,
                                                   std::uint64_t base_index,
                                                   std::uint64_t prev_term,
                                                   std::uint64_t segment_size_bytes);

  // Opens an existing segment file for recovery: maps it and validates its header. The index file is
  // opened (or created) separately by open_index(). Fails with kCorruption when the header is invalid.
  static Result<std::shared_ptr<Segment>> open_existing(Env* env, const std::string& dir,
                                                        std::uint64_t base_index);
  // Opens/creates the index file and maps it. Sets `rebuilt` when the file was missing or its header
  // was invalid (then it is recreated empty and all records must be rewritten).
  Status open_index(Env* env, bool* rebuilt);

  Segment(std::uint64_t base_index, std::uint64_t prev_term, std::uint64_t size_bytes,
          std::string dir);

  // --- immutable ---
  const std::uint64_t base_index;
  const std::uint64_t prev_term;   // term of base_index - 1
  const std::uint64_t size_bytes;  // data file size
  const std::string dir;
  const std::string data_name;
  const std::string index_name;
  std::string data_path() const { return join_path(dir, data_name); }
  std::string index_path() const { return join_path(dir, index_name); }

  std::unique_ptr<File> data_file;
  std::unique_ptr<File> index_file;
  std::shared_ptr<Mapping> data_map;
  std::shared_ptr<Mapping> index_map;

  // --- mutable (see the ownership note above) ---
  std::uint64_t write_offset = segment_format::kSegmentHeaderBytes;
  std::uint64_t entry_count = 0;
  std::uint64_t last_term = 0;  // term of the last entry, prev_term when empty
  std::uint64_t flushed_offset = 0;
  std::uint64_t index_flushed_bytes = 0;
  std::uint64_t index_allocated_bytes = 0;

  std::uint64_t last_index() const { return base_index + entry_count - 1; }
  bool holds(std::uint64_t index) const {
    return index >= base_index && index - base_index < entry_count;
  }
  std::uint64_t index_bytes_for(std::uint64_t entries) const {
    return segment_format::kIndexHeaderBytes + entries * segment_format::kIndexRecordBytes;
  }

  // Writes the index record for `record.index` (allocating index file blocks first; kNoSpace if the
  // disk is full).
  Status write_index_record(const segment_format::IndexRecord& record);
  // The index record for `index`, nullopt when invalid (unwritten, torn, pointing outside the
  // segment) or out of the file.
  std::optional<segment_format::IndexRecord> index_record(std::uint64_t index) const;
  // Zeroes index records for entries [first_entry, last_entry_exclusive) (by position in segment).
  void clear_index_records(std::uint64_t first_entry, std::uint64_t end_entry);

  // Zeroes the run of non-zero data starting at `from_offset`: up to the first 4 KiB-aligned block
  // that is already all zero (or the segment end), and flushes what it changed. Returns the number of
  // bytes that were non-zero. Cost is proportional to the garbage, not to the segment size; anything
  // beyond the run can never be read as data because of the generation rule (entry_format.h).
  Result<std::uint64_t> zero_data_run(std::uint64_t from_offset);
  // Zeroes [from_offset, to_offset) unconditionally and flushes it.
  Status zero_data_range(std::uint64_t from_offset, std::uint64_t to_offset);
};

// Largest payload a record in `segment` could carry (the bound used when decoding stored entries:
// the configured max_entry_size_bytes may have changed since they were written).
inline std::uint32_t max_payload_bytes(const Segment& segment) {
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(segment.size_bytes, UINT32_MAX));
}

}  // namespace raftlog::store
