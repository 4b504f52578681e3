// CommitLog::Impl, appending: a batch is checked, every resource it needs is reserved, its records
// are encoded and written, and only then is it published. Grouped appends are in
// commit_log_group.cpp.
#include <algorithm>

#include "store/commit_log_impl.h"
#include "store/entry_format.h"
#include "util/check.h"

namespace raftlog::store {

using segment_format::IndexRecord;
using segment_format::kSegmentHeaderBytes;

Status CommitLog::Impl::validate_batch(std::span<const EntryToAppend> batch) const {
  if (batch.empty()) return Status::invalid_argument("append of an empty batch");
  if (batch.size() > options_.max_batch_entries) {
    return Status::invalid_argument("batch of " + std::to_string(batch.size()) +
                                    " entries exceeds max_batch_entries " +
                                    std::to_string(options_.max_batch_entries));
  }
  const bool auto_index = batch[0].meta.index == 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const EntryMeta& meta = batch[i].meta;
    if (batch[i].payload.size() > options_.max_entry_size_bytes) {
      return Status::invalid_argument("entry " + std::to_string(meta.index) + " payload of " +
                                      std::to_string(batch[i].payload.size()) +
                                      " bytes exceeds max_entry_size_bytes " +
                                      std::to_string(options_.max_entry_size_bytes));
    }
    if (auto_index != (meta.index == 0)) {
      return Status::invalid_argument(
          "a batch must give every entry an index or none (index 0 = assign the next index)");
    }
    if (!auto_index && i > 0 && meta.index != batch[i - 1].meta.index + 1) {
      return Status::invalid_argument("non-contiguous batch: index " + std::to_string(meta.index) +
                                      " follows " + std::to_string(batch[i - 1].meta.index));
    }
    if (i > 0 && meta.term < batch[i - 1].meta.term) {
      return Status::invalid_argument("term decreases within the batch at index " +
                                      std::to_string(meta.index));
    }
  }
  return Status();
}

Result<IndexRange> CommitLog::Impl::append(std::span<const EntryToAppend> batch, bool wait_durable,
                                           const AppendGroup::ResolveWritten* before_publish) {
  RAFTLOG_RETURN_IF_ERROR(validate_batch(batch));

  IndexRange written;
  std::uint64_t truncations_seen = 0;
  {
    std::lock_guard write_lock(write_mu_);
    RAFTLOG_RETURN_IF_ERROR(check_writable_locked());
    // Under the writer lock, which truncate_suffix() holds while it records itself: any later
    // truncation that removes this batch counts above this (truncation_history.h).
    truncations_seen = truncations_.count();
    AppendCursor cursor = append_cursor_locked();
    const std::uint64_t first_index =
        batch[0].meta.index == 0 ? last_index_.load() + 1 : batch[0].meta.index;
    RAFTLOG_RETURN_IF_ERROR(check_continues_log_locked(batch, cursor, first_index));
    // Reserving every resource before writing a byte is what makes a failed append write nothing.
    auto prepared = reserve_for_batch_locked(batch, cursor);
    if (!prepared.ok()) return prepared.status();
    auto bytes_written = write_batch_locked(batch, first_index, *prepared, &cursor);
    if (!bytes_written.ok()) return bytes_written.status();
    written = IndexRange{first_index, first_index + batch.size() - 1};
    // Nothing below can fail: the batch is written and only becomes visible now.
    if (before_publish != nullptr) (*before_publish)(written, truncations_seen);
    publish_locked(cursor);
    last_index_.store(written.last);
    unflushed_bytes_.fetch_add(*bytes_written);
  }

  // Wake the flusher: sync mode always (someone waits), async mode when over the dirty threshold.
  if (wait_durable || options_.flush_mode == FlushMode::kSync ||
      unflushed_bytes_.load() >= options_.flush_dirty_bytes) {
    request_flush();
  }
  if (wait_durable) RAFTLOG_RETURN_IF_ERROR(wait_own_entries(written.last, truncations_seen));
  return written;
}

CommitLog::Impl::AppendCursor CommitLog::Impl::append_cursor_locked() const {
  AppendCursor cursor;
  {
    std::shared_lock meta_lock(meta_mu_);
    if (!segments_.empty()) {
      cursor.active = segments_.back();
      cursor.term = cursor.active->last_term;
    }
  }
  // The writer lock keeps these from changing (only writers change them).
  if (cursor.active) {
    cursor.offset = cursor.active->write_offset;
    cursor.count = cursor.active->entry_count;
  }
  cursor.staged_offset = cursor.offset;
  return cursor;
}

Status CommitLog::Impl::check_continues_log_locked(std::span<const EntryToAppend> batch,
                                                   const AppendCursor& cursor,
                                                   std::uint64_t first_index) const {
  const std::uint64_t expected = last_index_.load() + 1;
  if (cursor.active && first_index != expected) {
    return Status::invalid_argument("append at index " + std::to_string(first_index) +
                                    " does not continue the log (next index is " +
                                    std::to_string(expected) + ")");
  }
  if (batch[0].meta.term < cursor.term) {
    return Status::invalid_argument("append at index " + std::to_string(first_index) +
                                    " has term " + std::to_string(batch[0].meta.term) +
                                    " below the last term " + std::to_string(cursor.term));
  }
  return Status();
}

Result<std::vector<PreparedSegment>> CommitLog::Impl::reserve_for_batch_locked(
    std::span<const EntryToAppend> batch, const AppendCursor& cursor) {
  // Plan: how many new segments the batch needs and how many entries land in each (the same rule
  // as write_batch_locked(), which rolls where this plans a new segment).
  std::vector<std::uint64_t> new_segment_entries;
  std::uint64_t active_entries = 0;
  {
    const std::shared_ptr<Segment>& active = cursor.active;
    std::uint64_t offset = active ? cursor.offset : options_.segment_size_bytes;
    std::uint64_t segment_size = active ? active->size_bytes : options_.segment_size_bytes;
    for (const EntryToAppend& entry : batch) {
      const std::uint64_t bytes = entry_format::record_bytes(entry.payload.size());
      if (offset + bytes > segment_size) {
        new_segment_entries.push_back(0);
        offset = kSegmentHeaderBytes;
        segment_size = options_.segment_size_bytes;
      }
      offset += bytes;
      if (new_segment_entries.empty()) {
        ++active_entries;
      } else {
        ++new_segment_entries.back();
      }
    }
  }
  std::vector<PreparedSegment> prepared;
  auto give_back = [&] {
    for (auto& p : prepared) return_prepared_segment(std::move(p));
    prepared.clear();
  };
  for (const std::uint64_t entries : new_segment_entries) {
    auto segment = take_prepared_segment();
    if (!segment.ok()) {
      give_back();
      return segment.status();
    }
    // Reserve index blocks for this segment's share of the batch.
    const std::uint64_t index_bytes =
        segment_format::kIndexHeaderBytes + entries * segment_format::kIndexRecordBytes;
    Status status = segment->index_file->allocate(0, index_bytes);
    if (status.ok()) {
      // Recorded, so that the segment once active knows the blocks are there (write_batch_locked
      // relies on it).
      segment->index_allocated_bytes = std::max(segment->index_allocated_bytes, index_bytes);
    }
    prepared.push_back(std::move(*segment));
    if (!status.ok()) {
      give_back();
      return status;
    }
  }
  const std::shared_ptr<Segment>& active = cursor.active;
  if (active && active_entries > 0) {
    const std::uint64_t needed = active->index_bytes_for(active->entry_count + active_entries);
    if (needed > active->index_allocated_bytes) {
      const std::uint64_t new_end =
          std::min<std::uint64_t>(active->index_map->size(), needed + kIndexChunkBytes);
      Status status = active->index_file->allocate(active->index_allocated_bytes,
                                                   new_end - active->index_allocated_bytes);
      if (!status.ok()) {
        give_back();
        return status;
      }
      active->index_allocated_bytes = new_end;
    }
  }
  return prepared;
}

Result<std::uint64_t> CommitLog::Impl::write_batch_locked(std::span<const EntryToAppend> batch,
                                                          std::uint64_t first_index,
                                                          std::vector<PreparedSegment>& prepared,
                                                          AppendCursor* cursor) {
  // Only a failing rename or pwrite can fail from here on; either fails the whole log.
  // Entries are encoded into staging_ and reach the segment file with one pwrite per run of
  // entries (at most kStagingBytes, or one record), not by stores into the mapping: on ext4, page
  // faults on freshly cleaned mapped pages made every flush of mmap-written data about twice as
  // slow as the same bytes written with pwrite (docs/benchmarks.md, "store"). Readers still use
  // the mapping, which sees pwritten bytes at once.
  std::size_t next_prepared = 0;
  std::uint64_t bytes_written = 0;
  staging_.clear();
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const EntryToAppend& entry = batch[i];
    EntryMeta meta = entry.meta;
    meta.index = first_index + i;
    const std::uint64_t bytes = entry_format::record_bytes(entry.payload.size());
    if (!cursor->active || cursor->offset + bytes > cursor->active->size_bytes) {
      RAFTLOG_CHECK(next_prepared < prepared.size(),
                    "an append rolls only into segments it reserved");
      RAFTLOG_RETURN_IF_ERROR(
          roll_segment_locked(std::move(prepared[next_prepared++]), meta.index, cursor));
    }
    const bool direct = entry.payload.size() >= options_.direct_write_min_payload_bytes;
    if (!staging_.empty() && (direct || staging_.size() + bytes > kStagingBytes)) {
      RAFTLOG_RETURN_IF_ERROR(write_staged_locked(/*with_end_marker=*/false, cursor));
    }
    if (direct) {
      RAFTLOG_RETURN_IF_ERROR(write_direct_locked(meta, entry.payload, cursor));
    } else {
      const std::size_t at = staging_.size();
      staging_.resize(at + bytes);
      entry_format::encode(meta, generation_, entry.payload, staging_.data() + at);
    }
    // Cannot fail: reserve_for_batch_locked() allocated the index blocks of all the batch's
    // records (so no allocation is left to fail), and no segment holds more records than its
    // index's capacity (every record is at least 56 bytes).
    const Status status = cursor->active->write_index_record(
        IndexRecord{meta.index, meta.term, cursor->offset, static_cast<std::uint32_t>(bytes)});
    RAFTLOG_CHECK(status.ok(), "an append writes index records only into blocks it reserved");
    cursor->offset += bytes;
    ++cursor->count;
    cursor->term = meta.term;
    bytes_written += bytes;
  }
  RAFTLOG_RETURN_IF_ERROR(write_staged_locked(/*with_end_marker=*/true, cursor));
  if (staging_.capacity() > 4 * kStagingBytes) staging_ = {};  // after a huge staged record
  return bytes_written;
}

Status CommitLog::Impl::roll_segment_locked(PreparedSegment prepared, std::uint64_t base_index,
                                            AppendCursor* cursor) {
  RAFTLOG_RETURN_IF_ERROR(write_staged_locked(/*with_end_marker=*/true, cursor));
  publish_locked(*cursor);
  auto segment = Segment::activate(env_, dir_, std::move(prepared), base_index, cursor->term,
                                   options_.segment_size_bytes);
  if (!segment.ok()) {
    fail(segment.status());
    return segment.status();
  }
  {
    std::unique_lock meta_lock(meta_mu_);
    segments_.push_back(*segment);
    dir_dirty_ = true;
    if (segments_.size() == 1) {
      first_index_.store(base_index);
      last_index_.store(base_index - 1);
    }
  }
  {
    std::lock_guard lock(stats_mu_);
    ++stats_.segments_created;
  }
  cursor->active = *segment;
  cursor->offset = kSegmentHeaderBytes;
  cursor->staged_offset = cursor->offset;
  cursor->count = 0;
  return Status();
}

Status CommitLog::Impl::write_staged_locked(bool with_end_marker, AppendCursor* cursor) {
  // With the end marker, the zero bytes after the last entry go along (entry_format.h): the run
  // then ends the segment's written data.
  const std::shared_ptr<Segment>& active = cursor->active;
  if (!active) return Status();
  if (with_end_marker && !staging_.empty() &&
      cursor->staged_offset + staging_.size() + entry_format::kEndMarkerBytes <=
          active->size_bytes) {
    staging_.resize(staging_.size() + entry_format::kEndMarkerBytes, 0);
  }
  Status status;
  if (!staging_.empty()) {
    status = active->data_file->write_at(cursor->staged_offset,
                                         std::string_view(staging_.data(), staging_.size()));
  }
  staging_.clear();
  cursor->staged_offset = cursor->offset;
  if (!status.ok()) fail(status);
  return status;
}

Status CommitLog::Impl::write_direct_locked(const EntryMeta& meta, std::string_view payload,
                                            AppendCursor* cursor) {
  RAFTLOG_CHECK(staging_.empty() && cursor->staged_offset == cursor->offset,
                "a direct write starts where the staged bytes end");
  const std::shared_ptr<Segment>& active = cursor->active;
  const std::uint64_t record_bytes = entry_format::record_bytes(payload.size());
  const std::uint64_t padding_bytes = record_bytes - entry_format::kHeaderBytes - payload.size();
  // The header goes last, as encode() writes the magic last: a record whose magic this process
  // wrote has the rest of its bytes written already. Power loss is covered by the CRC either way.
  char header[entry_format::kHeaderBytes];
  entry_format::encode_header(meta, generation_, payload, header);
  // Padding plus the end marker (entry_format.h) when it fits in the segment, like a staged run.
  char tail[entry_format::kAlignmentBytes + entry_format::kEndMarkerBytes] = {};
  std::uint64_t tail_bytes = padding_bytes;
  if (cursor->offset + record_bytes + entry_format::kEndMarkerBytes <= active->size_bytes) {
    tail_bytes += entry_format::kEndMarkerBytes;
  }
  const std::uint64_t payload_offset = cursor->offset + entry_format::kHeaderBytes;
  Status status = active->data_file->write_at(payload_offset, payload);
  if (status.ok() && tail_bytes > 0) {
    status = active->data_file->write_at(payload_offset + payload.size(),
                                         std::string_view(tail, tail_bytes));
  }
  if (status.ok()) {
    status = active->data_file->write_at(cursor->offset, std::string_view(header, sizeof header));
  }
  cursor->staged_offset = cursor->offset + record_bytes;
  if (!status.ok()) fail(status);
  return status;
}

void CommitLog::Impl::publish_locked(const AppendCursor& cursor) {
  if (!cursor.active) return;
  std::unique_lock meta_lock(meta_mu_);
  cursor.active->write_offset = cursor.offset;
  cursor.active->entry_count = cursor.count;
  cursor.active->last_term = cursor.term;
}

}  // namespace raftlog::store
