// CommitLog::Impl, reading: entries and terms by index, and the inquiries about the log's shape
// (stats, disk usage, segments, bytes after an index). Readers take meta_mu_ shared and run
// concurrently with writers (commit_log_impl.h).
#include <algorithm>

#include "store/commit_log_impl.h"
#include "store/entry_format.h"

namespace raftlog::store {

using segment_format::kSegmentHeaderBytes;

std::shared_ptr<Segment> CommitLog::Impl::find_segment_locked(std::uint64_t index) const {
  // The last segment whose base is <= index.
  auto it = std::upper_bound(segments_.begin(), segments_.end(), index,
                             [](std::uint64_t value, const std::shared_ptr<Segment>& segment) {
                               return value < segment->base_index;
                             });
  if (it == segments_.begin()) return nullptr;
  const auto& segment = *std::prev(it);
  return segment->holds(index) ? segment : nullptr;
}

Result<ReadBatch> CommitLog::Impl::read(std::uint64_t from_index, std::size_t max_entries,
                                        std::size_t max_bytes) const {
  ReadBatch batch;
  std::shared_lock meta_lock(meta_mu_);
  const std::uint64_t first = first_index_.load();
  const std::uint64_t last = last_index_.load();
  if (from_index < first || from_index > last) {
    return Status::out_of_range("read from index " + std::to_string(from_index) + " outside [" +
                                std::to_string(first) + ", " + std::to_string(last) + "]");
  }
  if (max_entries == 0) return batch;
  std::shared_ptr<Segment> segment = find_segment_locked(from_index);
  std::size_t bytes = 0;
  for (std::uint64_t index = from_index; index <= last && batch.entries.size() < max_entries;
       ++index) {
    if (!segment || !segment->holds(index)) {
      segment = find_segment_locked(index);
      if (!segment) return Status::corruption("no segment holds index " + std::to_string(index));
    }
    if (batch.pins.empty() || batch.pins.back().get() != segment->data_map.get()) {
      batch.pins.push_back(std::shared_ptr<const void>(segment->data_map));
    }
    auto record = segment->index_record(index);
    if (!record) {
      return Status::corruption(segment->index_path() + ": invalid index record for index " +
                                std::to_string(index));
    }
    entry_format::Decoded decoded;
    const auto result =
        entry_format::decode(segment->data_map->data() + record->offset,
                             segment->size_bytes - record->offset, max_payload_bytes(*segment),
                             /*verify_crc=*/true, &decoded);
    if (result != entry_format::DecodeResult::kOk || decoded.meta.index != index) {
      return Status::corruption(segment->data_path() + " offset " + std::to_string(record->offset) +
                                ": " + entry_format::to_string(result) + " reading index " +
                                std::to_string(index));
    }
    if (!batch.entries.empty() && bytes + decoded.payload.size() > max_bytes) break;
    bytes += decoded.payload.size();
    batch.entries.push_back(EntryView{decoded.meta, decoded.payload});
  }
  return batch;
}

Result<std::uint64_t> CommitLog::Impl::term_at(std::uint64_t index) const {
  std::shared_lock meta_lock(meta_mu_);
  const std::uint64_t first = first_index_.load();
  const std::uint64_t last = last_index_.load();
  if (index == 0) return std::uint64_t{0};
  if (index + 1 == first)
    return segments_.empty() ? std::uint64_t{0} : segments_.front()->prev_term;
  if (index < first || index > last) {
    return Status::out_of_range("term_at(" + std::to_string(index) + ") outside [" +
                                std::to_string(first == 0 ? 0 : first - 1) + ", " +
                                std::to_string(last) + "]");
  }
  auto segment = find_segment_locked(index);
  if (!segment) return Status::corruption("no segment holds index " + std::to_string(index));
  auto record = segment->index_record(index);
  if (!record) {
    return Status::corruption(segment->index_path() + ": invalid index record for index " +
                              std::to_string(index));
  }
  return record->term;
}

FlushStats CommitLog::Impl::stats() const {
  FlushStats stats;
  {
    std::lock_guard lock(stats_mu_);
    stats = stats_;
  }
  stats.grouped_appends = append_group_.members();
  stats.group_writes = append_group_.runs();
  return stats;
}

CommitLog::DiskUsage CommitLog::Impl::disk_usage() const {
  std::shared_lock meta_lock(meta_mu_);
  DiskUsage usage;
  usage.segments = segments_.size();
  for (const auto& segment : segments_) {
    usage.bytes += segment->size_bytes + segment->index_allocated_bytes;
  }
  return usage;
}

std::vector<CommitLog::SegmentInfo> CommitLog::Impl::segments() const {
  std::shared_lock meta_lock(meta_mu_);
  std::vector<SegmentInfo> infos;
  infos.reserve(segments_.size());
  for (std::size_t i = 0; i < segments_.size(); ++i) {
    const Segment& segment = *segments_[i];
    infos.push_back(SegmentInfo{segment.base_index, segment.base_index + segment.entry_count - 1,
                                segment.size_bytes + segment.index_allocated_bytes,
                                segment.data_path(), i + 1 == segments_.size()});
  }
  return infos;
}

std::uint64_t CommitLog::Impl::bytes_after(std::uint64_t index) const {
  std::shared_lock meta_lock(meta_mu_);
  std::uint64_t bytes = 0;
  // Newest first: a follower's lag usually lies in the active segment. Bounded by the segment count.
  for (auto it = segments_.rbegin(); it != segments_.rend(); ++it) {
    const Segment& segment = **it;
    if (segment.entry_count == 0) continue;
    if (index < segment.base_index) {
      bytes += segment.write_offset - kSegmentHeaderBytes;
      continue;
    }
    if (index < segment.last_index()) {
      const auto record = segment.index_record(index + 1);
      if (record) bytes += segment.write_offset - record->offset;
    }
    break;
  }
  return bytes;
}

}  // namespace raftlog::store
