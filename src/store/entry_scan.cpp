#include "store/entry_scan.h"

namespace raftlog::store {

ScanResult scan_entries(const char* data, std::uint64_t size_bytes, std::uint64_t offset,
                        std::uint64_t expected_index, std::uint64_t prev_term,
                        std::uint64_t prev_generation, std::uint64_t stop_before_index,
                        std::uint32_t max_payload_bytes, const ScanVisitor& visitor) {
  ScanResult result;
  result.next_index = expected_index;
  result.last_term = prev_term;
  result.last_generation = prev_generation;
  while (offset < size_bytes) {
    if (stop_before_index != 0 && result.next_index >= stop_before_index) {
      result.stop = ScanResult::Stop::kLimit;
      break;
    }
    entry_format::Decoded decoded;
    const auto decode = entry_format::decode(data + offset, size_bytes - offset, max_payload_bytes,
                                             /*verify_crc=*/true, &decoded);
    if (decode == entry_format::DecodeResult::kEnd) break;
    if (decode != entry_format::DecodeResult::kOk) {
      result.stop = ScanResult::Stop::kBad;
      result.problem = entry_format::to_string(decode);
      break;
    }
    if (decoded.meta.index != result.next_index) {
      result.stop = ScanResult::Stop::kBad;
      result.problem = "index " + std::to_string(decoded.meta.index) + " where " +
                       std::to_string(result.next_index) + " was expected";
      break;
    }
    if (decoded.meta.term < result.last_term) {
      result.stop = ScanResult::Stop::kBad;
      result.problem = "term " + std::to_string(decoded.meta.term) + " below the previous term " +
                       std::to_string(result.last_term);
      break;
    }
    if (decoded.generation < result.last_generation) {
      result.stop = ScanResult::Stop::kBad;
      result.problem = "stale entry: generation " + std::to_string(decoded.generation) +
                       " below the previous entry's " + std::to_string(result.last_generation);
      break;
    }
    if (visitor && !visitor(decoded, offset)) {
      result.stop = ScanResult::Stop::kLimit;
      break;
    }
    offset += decoded.record_bytes;
    ++result.entries;
    result.bytes += decoded.record_bytes;
    ++result.next_index;
    result.last_term = decoded.meta.term;
    result.last_generation = decoded.generation;
  }
  result.end_offset = std::min(offset, size_bytes);
  return result;
}

}  // namespace raftlog::store
