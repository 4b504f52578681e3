// Sequential validation of the entries in one mapped segment: shared by recovery and by the offline
// verifier. Checks each record (magic, version, size, CRC32C), index continuity, and that neither
// terms nor generations decrease. Bounded by the segment size (every record is at least 48 bytes).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "store/entry_format.h"

namespace raftlog::store {

struct ScanResult {
  enum class Stop {
    kEnd,    // zero magic, or no room for another record: the normal end of the written part
    kLimit,  // reached stop_before_index, or the visitor asked to stop
    kBad,    // an invalid record at end_offset (problem says why)
  };
  Stop stop = Stop::kEnd;
  std::uint64_t end_offset =
      0;                      // offset just past the last valid entry (= the bad record's offset)
  std::uint64_t entries = 0;  // valid entries visited
  std::uint64_t bytes = 0;    // record bytes of those entries
  std::uint64_t next_index = 0;  // index the next entry would carry
  std::uint64_t last_term = 0;   // term of the last valid entry (prev_term if none)
  std::uint64_t last_generation =
      0;  // generation of the last valid entry (prev_generation if none)
  std::string problem;
};

// Visitor returns false to stop (Stop::kLimit).
using ScanVisitor = std::function<bool(const entry_format::Decoded& entry, std::uint64_t offset)>;

ScanResult scan_entries(const char* data, std::uint64_t size_bytes, std::uint64_t offset,
                        std::uint64_t expected_index, std::uint64_t prev_term,
                        std::uint64_t prev_generation, std::uint64_t stop_before_index,
                        std::uint32_t max_payload_bytes, const ScanVisitor& visitor);

}  // namespace raftlog::store
