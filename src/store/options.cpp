#include "store/options.h"

#include "store/entry_format.h"
#include "store/segment_format.h"

namespace raftlog::store {

std::string validate_options(const Options& options) {
  if (options.segment_size_bytes < Options::kMinSegmentSizeBytes ||
      options.segment_size_bytes > Options::kMaxSegmentSizeBytes) {
    return "segment_size_bytes " + std::to_string(options.segment_size_bytes) + " outside [" +
           std::to_string(Options::kMinSegmentSizeBytes) + ", " +
           std::to_string(Options::kMaxSegmentSizeBytes) + "]";
  }
  if (entry_format::record_bytes(options.max_entry_size_bytes) +
          segment_format::kSegmentHeaderBytes >
      options.segment_size_bytes) {
    return "max_entry_size_bytes " + std::to_string(options.max_entry_size_bytes) +
           " does not fit in one segment of " + std::to_string(options.segment_size_bytes) +
           " bytes (with the entry's " + std::to_string(entry_format::kHeaderBytes) +
           "-byte header and the segment's " + std::to_string(segment_format::kSegmentHeaderBytes) +
           "-byte header)";
  }
  if (options.background_work != BackgroundWork::kThreads &&
      options.background_work != BackgroundWork::kStepped) {
    return "background_work " + std::to_string(static_cast<int>(options.background_work)) +
           " is neither threads nor stepped";
  }
  if (options.max_batch_entries == 0 || options.flush_interval_ms == 0 ||
      options.checkpoint_interval_ms == 0) {
    return "max_batch_entries, flush_interval_ms and checkpoint_interval_ms must be positive";
  }
  return "";
}

}  // namespace raftlog::store
