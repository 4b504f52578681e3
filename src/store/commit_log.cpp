// CommitLog: writing, reading, flushing (group commit), checkpoints, truncation and close.
// Recovery lives in recovery.cpp, segment preallocation in allocator.cpp.
#include "store/commit_log.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cassert>
#include <cstring>

#include "store/commit_log_impl.h"
#include "store/entry_format.h"

namespace raftlog::store {

using segment_format::IndexRecord;
using segment_format::kSegmentHeaderBytes;

const char* to_string(FlushMode mode) { return mode == FlushMode::kSync ? "sync" : "async"; }

const char* to_string(RecoveryMode mode) {
  switch (mode) {
    case RecoveryMode::kFresh: return "fresh";
    case RecoveryMode::kNormal: return "normal";
    case RecoveryMode::kAbnormal: return "abnormal";
  }
  return "unknown";
}

std::string RecoveryReport::to_string() const {
  return std::string("mode=") + raftlog::store::to_string(mode) +
         " checkpoint_flushed_index=" + std::to_string(checkpoint_flushed_index) +
         " entries_scanned=" + std::to_string(entries_scanned) +
         " bytes_scanned=" + std::to_string(bytes_scanned) +
         " entries_dropped=" + std::to_string(entries_dropped) +
         " bytes_truncated=" + std::to_string(bytes_truncated) +
         " segments_removed=" + std::to_string(segments_removed) +
         " index_files_rebuilt=" + std::to_string(index_files_rebuilt) +
         " truncation_completed=" + (truncation_intent_completed ? "true" : "false") +
         " corrupted_flushed_data_truncated=" + (corrupted_flushed_data_truncated ? "true" : "false") +
         " highest_index_seen=" + std::to_string(highest_index_seen) +
         " valid_entries_after_cut=" + std::to_string(valid_entries_after_cut) +
         " suspect_index=" + std::to_string(suspect_index) +
         " first_index=" + std::to_string(first_index) + " last_index=" + std::to_string(last_index) +
         " duration_us=" + std::to_string(duration.count());
}

// ------------------------------------------------------------------------------------------------
// CommitLog (thin forwarding layer)

CommitLog::CommitLog(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CommitLog::~CommitLog() {
  if (impl_) (void)impl_->close();
}

Result<std::unique_ptr<CommitLog>> CommitLog::open(const std::string& dir, const Options& options) {
  Options checked = options;
  if (checked.env == nullptr) checked.env = Env::posix();
  if (std::string problem = validate_options(checked); !problem.empty()) {
    return Status::invalid_argument(std::move(problem));
  }
  auto impl = std::make_unique<Impl>(dir, checked, checked.env);
  Status status = impl->recover();
  if (!status.ok()) return status;
  impl->start_threads();
  return std::unique_ptr<CommitLog>(new CommitLog(std::move(impl)));
}

Result<IndexRange> CommitLog::append(std::span<const EntryToAppend> batch) {
  if (impl_->options_.flush_mode == FlushMode::kSync && !batch.empty() && batch[0].meta.index == 0) {
    return impl_->append_grouped(batch);
  }
  return impl_->append(batch, impl_->options_.flush_mode == FlushMode::kSync);
}
Result<IndexRange> CommitLog::append_no_wait(std::span<const EntryToAppend> batch) {
  return impl_->append(batch, false);
}
Status CommitLog::wait_flushed(std::uint64_t index) { return impl_->wait_flushed(index); }
Status CommitLog::flush() { return impl_->flush(); }
void CommitLog::request_flush() { impl_->request_flush(); }
void CommitLog::set_flush_listener(FlushListener listener) {
  impl_->set_flush_listener(std::move(listener));
}
void CommitLog::set_flush_observer(FlushObserver observer) {
  impl_->set_flush_observer(std::move(observer));
}
Status CommitLog::truncate_suffix(std::uint64_t from_index, bool force) {
  return impl_->truncate_suffix(from_index, force);
}
Status CommitLog::truncate_prefix(std::uint64_t before_index) {
  return impl_->truncate_prefix(before_index);
}
Status CommitLog::set_commit_index(std::uint64_t commit_index, bool persist) {
  return impl_->set_commit_index(commit_index, persist);
}
std::uint64_t CommitLog::commit_index() const { return impl_->commit_index_.load(); }
Status CommitLog::mark_suspect(std::uint64_t index) { return impl_->mark_suspect(index); }
Result<ReadBatch> CommitLog::read(std::uint64_t from_index, std::size_t max_entries,
                                  std::size_t max_bytes) const {
  return impl_->read(from_index, max_entries, max_bytes);
}
Result<std::uint64_t> CommitLog::term_at(std::uint64_t index) const { return impl_->term_at(index); }
std::uint64_t CommitLog::first_index() const { return impl_->first_index_.load(); }
std::uint64_t CommitLog::last_index() const { return impl_->last_index_.load(); }
std::uint64_t CommitLog::flushed_index() const { return impl_->flushed_index_.load(); }
FlushStats CommitLog::stats() const { return impl_->stats(); }
CommitLog::DiskUsage CommitLog::disk_usage() const { return impl_->disk_usage(); }
std::vector<CommitLog::SegmentInfo> CommitLog::segments() const { return impl_->segments(); }
std::uint64_t CommitLog::bytes_after(std::uint64_t index) const { return impl_->bytes_after(index); }
const RecoveryReport& CommitLog::recovery_report() const { return impl_->report_; }
const std::string& CommitLog::dir() const { return impl_->dir_; }
const Options& CommitLog::options() const { return impl_->options_; }
Status CommitLog::close() { return impl_->close(); }

// ------------------------------------------------------------------------------------------------
// Impl: lifecycle

CommitLog::Impl::Impl(std::string dir, Options options, Env* env)
    : dir_(std::move(dir)), options_(options), env_(env) {}

CommitLog::Impl::~Impl() { (void)close(); }

void CommitLog::Impl::start_threads() {
  started_ = true;
  flush_waiters_.start_waker();
  {
    std::lock_guard lock(flush_mu_);
    flusher_running_ = true;
  }
  last_checkpoint_time_ = std::chrono::steady_clock::now();
  flusher_ = std::thread([this] { flusher_main(); });
  if (options_.preallocate_next_segment) {
    {
      std::lock_guard lock(alloc_mu_);
      alloc_wanted_ = true;
    }
    allocator_ = std::thread([this] { allocator_main(); });
  }
}

Status CommitLog::Impl::close() {
  if (closed_.exchange(true)) return Status();
  if (!started_) {
    // open() failed during recovery: change nothing more on disk (the abort marker stays, so the
    // next attempt recovers abnormally).
    return Status();
  }
  Status result;
  std::lock_guard write_lock(write_mu_);  // waits for in-flight writers
  {
    std::lock_guard lock(flush_mu_);
    stopping_ = true;
  }
  flush_cv_.notify_all();
  if (flusher_.joinable()) flusher_.join();  // the flusher runs a final cycle before exiting
  {
    std::lock_guard cycle_lock(flush_cycle_mu_);
    if (failure().ok() && checkpoint_file_) {
      Status status = flush_cycle_locked(/*include_end_marker=*/true);
      if (status.ok()) status = write_checkpoint_locked(0);
      if (!status.ok()) {
        fail(status);
        result = status;
      }
    } else if (!failure().ok()) {
      result = failure();
    }
  }
  stop_allocator();
  {
    std::lock_guard lock(flush_mu_);
    flusher_running_ = false;
  }
  flush_waiters_.stop_waker();
  flush_waiters_.release_all();
  if (result.ok() && abort_marker_written_) {
    // Clean shutdown: the next open may trust the checkpoint (normal recovery).
    result = env_->remove(join_path(dir_, segment_format::kAbortMarkerFileName));
    if (result.ok()) result = env_->sync_dir(dir_);
  }
  {
    std::unique_lock meta_lock(meta_mu_);
    segments_.clear();  // readers holding pins keep their mappings alive
  }
  checkpoint_file_.reset();
  return result;
}

void CommitLog::Impl::fail(const Status& status) {
  {
    std::lock_guard lock(flush_mu_);
    if (failure_.ok()) {
      failure_ = status;
      spdlog::error("raftlog store {}: log failed, refusing further writes: {}", dir_,
                    status.to_string());
    }
  }
  flush_waiters_.release_all();
}

Status CommitLog::Impl::failure() const {
  std::lock_guard lock(flush_mu_);
  return failure_;
}

Status CommitLog::Impl::check_writable_locked() const {
  if (closed_.load()) return Status::closed("commit log " + dir_ + " is closed");
  Status failed = failure();
  if (!failed.ok()) return Status(failed.code(), "commit log failed earlier: " + failed.message());
  return Status();
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
                                segment.size_bytes + segment.index_allocated_bytes, segment.data_path(),
                                i + 1 == segments_.size()});
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

// ------------------------------------------------------------------------------------------------
// Appending

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
  const bool auto_index = batch[0].meta.index == 0;

  std::uint64_t first = 0;
  std::uint64_t last = 0;
  std::uint64_t truncations_seen = 0;
  {
    std::lock_guard write_lock(write_mu_);
    RAFTLOG_RETURN_IF_ERROR(check_writable_locked());
    // Under the writer lock, which truncate_suffix() holds while it records itself: any later
    // truncation that removes this batch counts above this (truncation_history.h).
    truncations_seen = truncations_.count();
    std::shared_ptr<Segment> active;
    std::uint64_t last_term = 0;
    {
      std::shared_lock meta_lock(meta_mu_);
      if (!segments_.empty()) {
        active = segments_.back();
        last_term = active->last_term;
      }
    }
    const std::uint64_t expected = last_index_.load() + 1;
    const std::uint64_t first_index = auto_index ? expected : batch[0].meta.index;
    if (active && first_index != expected) {
      return Status::invalid_argument("append at index " + std::to_string(first_index) +
                                      " does not continue the log (next index is " +
                                      std::to_string(expected) + ")");
    }
    if (batch[0].meta.term < last_term) {
      return Status::invalid_argument("append at index " + std::to_string(first_index) +
                                      " has term " + std::to_string(batch[0].meta.term) +
                                      " below the last term " + std::to_string(last_term));
    }

    // Plan: how many new segments the batch needs and how many entries land in each. Reserving
    // every resource before writing a byte is what makes a failed append write nothing.
    struct Placement {
      std::uint64_t entries = 0;
    };
    std::vector<Placement> new_segments;
    std::uint64_t active_entries = 0;
    {
      std::uint64_t offset = active ? active->write_offset : options_.segment_size_bytes;
      std::uint64_t segment_size = active ? active->size_bytes : options_.segment_size_bytes;
      for (const EntryToAppend& entry : batch) {
        const std::uint64_t bytes = entry_format::record_bytes(entry.payload.size());
        if (offset + bytes > segment_size) {
          new_segments.push_back({});
          offset = kSegmentHeaderBytes;
          segment_size = options_.segment_size_bytes;
        }
        offset += bytes;
        if (new_segments.empty()) {
          ++active_entries;
        } else {
          ++new_segments.back().entries;
        }
      }
    }
    std::vector<PreparedSegment> prepared;
    auto give_back = [&] {
      for (auto& p : prepared) return_prepared_segment(std::move(p));
      prepared.clear();
    };
    for (const Placement& placement : new_segments) {
      auto segment = take_prepared_segment();
      if (!segment.ok()) {
        give_back();
        return segment.status();
      }
      // Reserve index blocks for this segment's share of the batch.
      const std::uint64_t index_bytes =
          segment_format::kIndexHeaderBytes + placement.entries * segment_format::kIndexRecordBytes;
      Status status = segment->index_file->allocate(0, index_bytes);
      prepared.push_back(std::move(*segment));
      if (!status.ok()) {
        give_back();
        return status;
      }
    }
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

    // Write. Only a failing rename or pwrite can fail from here on; either fails the whole log.
    // Entries are encoded into staging_ and reach the segment file with one pwrite per run of
    // entries (at most kStagingBytes, or one record), not by stores into the mapping: on ext4, page
    // faults on freshly cleaned mapped pages made every flush of mmap-written data about twice as
    // slow as the same bytes written with pwrite (docs/benchmarks.md, "store"). Readers still use
    // the mapping, which sees pwritten bytes at once.
    std::uint64_t offset = active ? active->write_offset : 0;
    std::uint64_t count = active ? active->entry_count : 0;
    std::uint64_t term = last_term;
    std::size_t next_prepared = 0;
    std::uint64_t bytes_written = 0;
    std::uint64_t staged_offset = offset;  // file offset of staging_[0]
    staging_.clear();
    // Writes the staged run to `active`. With the end marker, the zero bytes after the last entry
    // go along (entry_format.h): the run then ends the segment's written data.
    auto write_staged = [&](bool with_end_marker) -> Status {
      if (!active) return Status();
      if (with_end_marker && !staging_.empty() &&
          staged_offset + staging_.size() + entry_format::kEndMarkerBytes <= active->size_bytes) {
        staging_.resize(staging_.size() + entry_format::kEndMarkerBytes, 0);
      }
      Status status;
      if (!staging_.empty()) {
        status = active->data_file->write_at(
            staged_offset, std::string_view(staging_.data(), staging_.size()));
      }
      staging_.clear();
      staged_offset = offset;
      if (!status.ok()) fail(status);
      return status;
    };
    auto publish = [&](const std::shared_ptr<Segment>& segment) {
      if (!segment) return;
      std::unique_lock meta_lock(meta_mu_);
      segment->write_offset = offset;
      segment->entry_count = count;
      segment->last_term = term;
    };
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const EntryToAppend& entry = batch[i];
      EntryMeta meta = entry.meta;
      meta.index = first_index + i;
      const std::uint64_t bytes = entry_format::record_bytes(entry.payload.size());
      if (!active || offset + bytes > active->size_bytes) {
        RAFTLOG_RETURN_IF_ERROR(write_staged(/*with_end_marker=*/true));
        publish(active);
        assert(next_prepared < prepared.size());
        auto segment = Segment::activate(env_, dir_, std::move(prepared[next_prepared++]),
                                         meta.index, term, options_.segment_size_bytes);
        if (!segment.ok()) {
          fail(segment.status());
          return segment.status();
        }
        {
          std::unique_lock meta_lock(meta_mu_);
          segments_.push_back(*segment);
          dir_dirty_ = true;
          if (segments_.size() == 1) {
            first_index_.store(meta.index);
            last_index_.store(meta.index - 1);
          }
        }
        {
          std::lock_guard lock(stats_mu_);
          ++stats_.segments_created;
        }
        active = *segment;
        offset = kSegmentHeaderBytes;
        staged_offset = offset;
        count = 0;
      }
      if (!staging_.empty() && staging_.size() + bytes > kStagingBytes) {
        RAFTLOG_RETURN_IF_ERROR(write_staged(/*with_end_marker=*/false));
      }
      const std::size_t at = staging_.size();
      staging_.resize(at + bytes);
      entry_format::encode(meta, generation_, entry.payload, staging_.data() + at);
      Status status = active->write_index_record(
          IndexRecord{meta.index, meta.term, offset, static_cast<std::uint32_t>(bytes)});
      assert(status.ok());  // blocks were reserved above
      if (!status.ok()) {
        fail(status);
        return status;
      }
      offset += bytes;
      ++count;
      term = meta.term;
      bytes_written += bytes;
    }
    RAFTLOG_RETURN_IF_ERROR(write_staged(/*with_end_marker=*/true));
    if (staging_.capacity() > 4 * kStagingBytes) staging_ = {};  // after a huge entry
    first = first_index;
    last = first_index + batch.size() - 1;
    // Nothing below can fail: the batch is written and only becomes visible now.
    if (before_publish != nullptr) (*before_publish)(IndexRange{first, last}, truncations_seen);
    publish(active);
    last_index_.store(last);
    unflushed_bytes_.fetch_add(bytes_written);
  }

  // Wake the flusher: sync mode always (someone waits), async mode when over the dirty threshold.
  if (wait_durable || options_.flush_mode == FlushMode::kSync ||
      unflushed_bytes_.load() >= options_.flush_dirty_bytes) {
    request_flush();
  }
  if (wait_durable) RAFTLOG_RETURN_IF_ERROR(wait_own_entries(last, truncations_seen));
  return IndexRange{first, last};
}

// ------------------------------------------------------------------------------------------------
// Flushing

Status CommitLog::Impl::wait_flushed(std::uint64_t index) {
  flush_waiters_.wait(index, flushed_index_);
  if (flushed_index_.load() >= index) return Status();
  return stopped_status(index);
}

Status CommitLog::Impl::wait_own_entries(std::uint64_t last, std::uint64_t truncations_seen) {
  // Bounded by the flusher: every pass returns or sleeps until a flush cycle, a truncation or the
  // log's stop bumped the epoch (spurious wake-ups only re-check). The reads are in the order of
  // FlushWaiters::wait() (epoch, cycle guess, flushed index), and the truncation check comes after
  // the flushed read, so a flush of a later entry at the same index is never taken for ours.
  for (;;) {
    const std::uint32_t seen = flush_waiters_.epoch();
    const bool released = flush_waiters_.released();
    const std::uint64_t cycle = flush_waiters_.covering_cycle(last);
    const bool flushed = flushed_index_.load() >= last;
    RAFTLOG_RETURN_IF_ERROR(truncations_.check(truncations_seen, last));
    if (flushed) return Status();
    if (released) return stopped_status(last);
    flush_waiters_.sleep(seen, cycle);
  }
}

Status CommitLog::Impl::stopped_status(std::uint64_t index) {
  std::lock_guard lock(flush_mu_);
  if (!failure_.ok()) return failure_;
  // Released early only by release_all(), which follows a failure or the flusher's stop.
  assert(!flusher_running_);
  return Status::closed("commit log " + dir_ + " closed before index " + std::to_string(index) +
                        " was flushed");
}

void CommitLog::Impl::request_flush() {
  // Only the caller that raises the flag wakes the flusher; the others ride on that flush request
  // (the flusher lowers the flag before it snapshots what to flush, so their entries are covered).
  if (flush_requested_.exchange(true)) return;
  {
    std::lock_guard lock(flush_mu_);  // pairs with the predicate check in flusher_main()
  }
  flush_cv_.notify_one();
}

Status CommitLog::Impl::flush() {
  if (closed_.load()) return Status::closed("commit log " + dir_ + " is closed");
  // Bounded: a pass starts over only when a truncate_suffix() that ran meanwhile removed its
  // target (waiting for that index would wait for an entry that may never come).
  for (;;) {
    // The count before the target: a truncation lowers last_index_ before it records itself, so a
    // target read before it lowered last_index_ comes with a count that the check finds it above
    // (truncation_history.h). Read the other way round, a whole truncation could run between the
    // two reads, and this would wait for a removed index.
    const std::uint64_t truncations_seen = truncations_.count();
    const std::uint64_t target = last_index_.load();
    request_flush();
    Status status = wait_own_entries(target, truncations_seen);
    if (status.code() != StatusCode::kTruncated) return status;
  }
}

void CommitLog::Impl::set_flush_listener(FlushListener listener) {
  std::lock_guard lock(listener_mu_);
  listener_ = std::move(listener);
}

void CommitLog::Impl::set_flush_observer(FlushObserver observer) {
  std::lock_guard lock(listener_mu_);
  observer_ = std::move(observer);
}

void CommitLog::Impl::flusher_main() {
  const auto interval = std::chrono::milliseconds(options_.flush_interval_ms);
  std::uint64_t last_reported = flushed_index_.load();
  for (;;) {
    bool stop = false;
    {
      std::unique_lock lock(flush_mu_);
      flush_cv_.wait_for(lock, interval, [&] {
        return stopping_ || flush_requested_.load() ||
               unflushed_bytes_.load() >= options_.flush_dirty_bytes;
      });
      flush_requested_.store(false);
      stop = stopping_;
      if (!failure_.ok()) return;
    }
    {
      std::lock_guard cycle_lock(flush_cycle_mu_);
      // Checked again under the cycle lock: a truncate_suffix() that held it may have failed the
      // log after its intent was durable, with the entries it was removing still published. A
      // cycle now would make them "durable" (and acknowledge their waiters), and the next open
      // would complete the truncation and remove them.
      if (!failure().ok()) return;
      Status status = flush_cycle_locked(/*include_end_marker=*/false);
      if (!status.ok()) {
        fail(status);
        return;
      }
    }
    // The listener hears about the flush before the periodic checkpoint runs: a checkpoint costs
    // two more syncs (index records, checkpoint file), and making the Raft node wait for them
    // delayed about 1 % of acknowledgements (the p99.9 of docs/benchmarks.md, "raftlog vs etcd").
    call_listener(&last_reported);
    if (stop) return;
    {
      std::lock_guard cycle_lock(flush_cycle_mu_);
      if (!failure().ok()) return;  // a failed log writes no checkpoint: the next open decides
      maybe_checkpoint_locked();
    }
  }
}

void CommitLog::Impl::call_listener(std::uint64_t* last_reported) {
  // Called by the flusher thread with no store lock held, so the listener may call any method.
  const std::uint64_t flushed = flushed_index_.load();
  if (flushed < *last_reported) *last_reported = flushed;  // lowered by a truncation
  if (flushed == *last_reported) return;
  *last_reported = flushed;
  std::lock_guard lock(listener_mu_);
  if (listener_) listener_(flushed);
}

Status CommitLog::Impl::flush_cycle_locked(bool include_end_marker) {
  struct Range {
    std::shared_ptr<Segment> segment;
    std::uint64_t from = 0;
    std::uint64_t to = 0;       // flush end (includes the end marker)
    std::uint64_t written = 0;  // write offset at the snapshot
  };
  // Every exit ends the cycle: ending it is what wakes the waiters it covered (flush_waiters.h).
  struct CycleScope {
    FlushWaiters& waiters;
    bool ended = false;
    explicit CycleScope(FlushWaiters& w) : waiters(w) { waiters.begin_cycle(); }
    ~CycleScope() { end(); }
    void end() {
      if (!std::exchange(ended, true)) waiters.end_cycle();
    }
    CycleScope(const CycleScope&) = delete;
    CycleScope& operator=(const CycleScope&) = delete;
  } cycle(flush_waiters_);
  std::vector<Range> ranges;
  std::uint64_t target = 0;
  bool sync_dir = false;
  const std::uint64_t old_flushed = flushed_index_.load();
  {
    std::shared_lock meta_lock(meta_mu_);
    target = last_index_.load();
    flush_waiters_.set_cycle_target(target);
    sync_dir = dir_dirty_;
    // Newest first, back to the segment holding the flushed point (older ones are fully flushed).
    for (auto it = segments_.rbegin(); it != segments_.rend(); ++it) {
      Segment& segment = **it;
      if (segment.flushed_offset < segment.write_offset) {
        // The end marker after the last entry (entry_format.h) is flushed only when no append can
        // be writing the next entry over it (writer lock held); otherwise it reaches the disk with
        // its page. Recovery does not depend on it (generations and segment headers do).
        const std::uint64_t to =
            include_end_marker
                ? std::min(segment.size_bytes, segment.write_offset + entry_format::kEndMarkerBytes)
                : segment.write_offset;
        ranges.push_back({*it, segment.flushed_offset, to, segment.write_offset});
      }
      if (segment.base_index <= old_flushed) break;
    }
  }
  if (ranges.empty() && !sync_dir && target <= old_flushed) return Status();
  std::uint64_t bytes = 0;
  std::uint64_t sync_calls = 0;
  const auto sync_start = std::chrono::steady_clock::now();
  for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) {  // oldest first
    RAFTLOG_RETURN_IF_ERROR(it->segment->data_map->flush(it->from, it->to - it->from));
    ++sync_calls;
    bytes += it->written - it->from;
  }
  if (sync_dir) {
    {
      std::unique_lock meta_lock(meta_mu_);
      dir_dirty_ = false;
    }
    Status status = env_->sync_dir(dir_);
    if (!status.ok()) {
      std::unique_lock meta_lock(meta_mu_);
      dir_dirty_ = true;
      return status;
    }
    ++sync_calls;
  }
  const auto sync_duration = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - sync_start);
  for (const Range& range : ranges) range.segment->flushed_offset = range.written;
  const std::uint64_t counted = unflushed_bytes_.load();
  unflushed_bytes_.fetch_sub(std::min(counted, bytes));
  std::uint64_t new_flushed = std::max(old_flushed, target);
  // A truncation may have lowered last_index below the old flushed index; never exceed last_index.
  new_flushed = std::min(new_flushed, last_index_.load());
  flushed_index_.store(new_flushed);
  {
    std::lock_guard lock(stats_mu_);
    stats_.sync_calls += sync_calls;
    stats_.sync_duration_us += static_cast<std::uint64_t>(sync_duration.count());
    if (new_flushed > old_flushed) {
      ++stats_.flushes;
      stats_.entries_flushed += new_flushed - old_flushed;
      stats_.bytes_flushed += bytes;
    }
  }
  cycle.end();  // wake the covered waiters before calling the observer
  if (sync_calls > 0) {
    std::lock_guard lock(listener_mu_);
    if (observer_) {
      observer_(FlushCycle{new_flushed > old_flushed ? new_flushed - old_flushed : 0, bytes,
                           sync_duration});
    }
  }
  return Status();
}

void CommitLog::Impl::maybe_checkpoint_locked() {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_checkpoint_time_ < std::chrono::milliseconds(options_.checkpoint_interval_ms)) return;
  if (last_checkpoint_.flushed_index == flushed_index_.load() &&
      last_checkpoint_.commit_index == commit_index_.load()) {
    last_checkpoint_time_ = now;
    return;
  }
  Status status = write_checkpoint_locked(0);
  if (!status.ok()) fail(status);
}

Status CommitLog::Impl::write_checkpoint_locked(std::uint64_t truncate_from) {
  Checkpoint checkpoint;
  checkpoint.commit_index = commit_index_.load();
  checkpoint.truncate_from = truncate_from;
  checkpoint.generation = generation_;
  std::uint64_t sync_calls = 0;
  {
    std::shared_lock meta_lock(meta_mu_);
    const std::uint64_t flushed = std::min(flushed_index_.load(), last_index_.load());
    checkpoint.flushed_index = flushed;
    // Index records up to the flushed point must be durable before the checkpoint vouches for them.
    for (const auto& segment : segments_) {
      std::uint64_t entries = 0;
      if (flushed >= segment->base_index) {
        entries = std::min(segment->entry_count, flushed - segment->base_index + 1);
      }
      const std::uint64_t needed = segment->index_bytes_for(entries);
      if (segment->index_flushed_bytes < needed) {
        RAFTLOG_RETURN_IF_ERROR(segment->index_map->flush(segment->index_flushed_bytes,
                                                      needed - segment->index_flushed_bytes));
        segment->index_flushed_bytes = needed;
        ++sync_calls;
      }
      if (segment->holds(flushed)) {
        auto record = segment->index_record(flushed);
        if (!record) {
          return Status::corruption(segment->index_path() + ": missing index record for flushed index " +
                                    std::to_string(flushed));
        }
        checkpoint.flushed_segment_base = segment->base_index;
        checkpoint.flushed_offset = record->offset + record->record_bytes;
      }
    }
    if (checkpoint.flushed_segment_base == 0 && !segments_.empty()) {
      // Nothing flushed inside any segment (empty log): point at the first segment's start.
      checkpoint.flushed_segment_base = segments_.front()->base_index;
      checkpoint.flushed_offset = kSegmentHeaderBytes;
      checkpoint.flushed_index = segments_.front()->base_index - 1;
    }
  }
  RAFTLOG_RETURN_IF_ERROR(checkpoint_file_->write(encode_checkpoint(checkpoint)));
  last_checkpoint_ = checkpoint;
  last_checkpoint_time_ = std::chrono::steady_clock::now();
  std::lock_guard lock(stats_mu_);
  stats_.sync_calls += sync_calls + 1;
  ++stats_.checkpoints_written;
  return Status();
}

Status CommitLog::Impl::set_commit_index(std::uint64_t commit_index, bool persist) {
  if (closed_.load()) return Status::closed("commit log " + dir_ + " is closed");
  const std::uint64_t current = commit_index_.load();
  if (commit_index < current) {
    return Status::invalid_argument("commit index may not decrease (" + std::to_string(current) +
                                    " -> " + std::to_string(commit_index) + ")");
  }
  if (commit_index > last_index_.load()) {
    return Status::out_of_range("commit index " + std::to_string(commit_index) +
                                " beyond last index " + std::to_string(last_index_.load()));
  }
  commit_index_.store(commit_index);
  if (!persist) return Status();
  std::lock_guard cycle_lock(flush_cycle_mu_);
  Status status = write_checkpoint_locked(0);
  if (!status.ok()) fail(status);  // a failed sync fails the log (storage-format.md)
  return status;
}

// ------------------------------------------------------------------------------------------------
// Reading

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
  for (std::uint64_t index = from_index; index <= last && batch.entries.size() < max_entries; ++index) {
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
    const auto result = entry_format::decode(segment->data_map->data() + record->offset,
                                             segment->size_bytes - record->offset,
                                             max_payload_bytes(*segment),
                                             /*verify_crc=*/true,
                                             &decoded);
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
  if (index + 1 == first) return segments_.empty() ? std::uint64_t{0} : segments_.front()->prev_term;
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

// ------------------------------------------------------------------------------------------------
// Truncation

Status CommitLog::Impl::truncate_suffix(std::uint64_t from_index, bool force) {
  std::lock_guard write_lock(write_mu_);
  RAFTLOG_RETURN_IF_ERROR(check_writable_locked());
  const std::uint64_t first = first_index_.load();
  const std::uint64_t last = last_index_.load();
  if (from_index == last + 1) return Status();
  if (from_index < first || from_index > last + 1) {
    return Status::out_of_range("truncate_suffix(" + std::to_string(from_index) + ") outside [" +
                                std::to_string(first) + ", " + std::to_string(last + 1) + "]");
  }
  if (from_index <= commit_index_.load() && !force) {
    return Status::failed_precondition("truncate_suffix(" + std::to_string(from_index) +
                                       ") would remove committed entries (commit index " +
                                       std::to_string(commit_index_.load()) + ")");
  }
  std::lock_guard cycle_lock(flush_cycle_mu_);
  if (from_index <= commit_index_.load()) commit_index_.store(from_index - 1);

  // Locate the cut: segment S holding from_index and the entry's offset in it.
  std::shared_ptr<Segment> cut_segment;
  std::vector<std::shared_ptr<Segment>> doomed;
  std::uint64_t cut_offset = 0;
  {
    std::shared_lock meta_lock(meta_mu_);
    cut_segment = find_segment_locked(from_index);
    if (!cut_segment) return Status::corruption("no segment holds index " + std::to_string(from_index));
    auto record = cut_segment->index_record(from_index);
    if (!record) {
      return Status::corruption(cut_segment->index_path() + ": invalid index record for index " +
                                std::to_string(from_index));
    }
    cut_offset = record->offset;
    for (const auto& segment : segments_) {
      if (segment->base_index > cut_segment->base_index) doomed.push_back(segment);
    }
  }

  // 1. Durable intent, with the flushed point lowered below the cut (CRASH CASES 3).
  if (flushed_index_.load() >= from_index) flushed_index_.store(from_index - 1);
  if (Status status = write_checkpoint_locked(from_index); !status.ok()) {
    fail(status);  // a failed sync fails the log; the next open decides from what is on disk
    return status;
  }

  // 2. Unpublish: readers stop seeing the suffix before its bytes are zeroed.
  const std::uint64_t old_write_offset = cut_segment->write_offset;
  const std::uint64_t old_count = cut_segment->entry_count;
  std::uint64_t new_last_term = cut_segment->prev_term;
  if (from_index > cut_segment->base_index) {
    auto record = cut_segment->index_record(from_index - 1);
    if (!record) {
      // The intent is durable already: the log must not take appends that the next open would
      // cut away when it completes the truncation.
      Status corrupt = Status::corruption(cut_segment->index_path() + ": invalid index record for index " +
                                          std::to_string(from_index - 1));
      fail(corrupt);
      return corrupt;
    }
    new_last_term = record->term;
  }
  {
    std::unique_lock meta_lock(meta_mu_);
    segments_.resize(segments_.size() - doomed.size());
    cut_segment->write_offset = cut_offset;
    cut_segment->entry_count = from_index - cut_segment->base_index;
    cut_segment->last_term = new_last_term;
    cut_segment->flushed_offset = std::min(cut_segment->flushed_offset, cut_offset);
    cut_segment->index_flushed_bytes =
        std::min(cut_segment->index_flushed_bytes, cut_segment->index_bytes_for(cut_segment->entry_count));
    last_index_.store(from_index - 1);
  }
  unflushed_bytes_.store(0);

  // 3. Zero the cut segment's tail (data and index) and make that durable.
  Status status = cut_segment->zero_data_range(cut_offset, old_write_offset);
  if (status.ok()) {
    cut_segment->clear_index_records(cut_segment->entry_count, old_count);
    const std::uint64_t from_bytes = cut_segment->index_bytes_for(cut_segment->entry_count);
    const std::uint64_t to_bytes =
        std::min(cut_segment->index_bytes_for(old_count), cut_segment->index_allocated_bytes);
    if (to_bytes > from_bytes) status = cut_segment->index_map->flush(from_bytes, to_bytes - from_bytes);
  }
  // 4. Delete later segments (newest first) and make the removals durable.
  for (auto it = doomed.rbegin(); status.ok() && it != doomed.rend(); ++it) {
    status = env_->remove((*it)->data_path());
    if (status.ok()) status = env_->remove((*it)->index_path());
  }
  if (status.ok()) status = env_->sync_dir(dir_);
  // 5. Clear the intent.
  if (status.ok()) status = write_checkpoint_locked(0);
  if (!status.ok()) {
    // The intent stays durable; the next open completes the truncation.
    fail(status);
    return status;
  }
  // Before the writer lock is released, so before any new entry can take these indexes: sync
  // appends still waiting for removed entries then learn it, and must be woken to (they may sleep
  // for a cycle that no append will start).
  truncations_.record(from_index);
  flush_waiters_.wake_all();
  spdlog::info("raftlog store {}: truncated suffix from index {} ({} segment(s) removed)", dir_,
               from_index, doomed.size());
  return Status();
}

Status CommitLog::Impl::truncate_prefix(std::uint64_t before_index) {
  std::lock_guard write_lock(write_mu_);
  RAFTLOG_RETURN_IF_ERROR(check_writable_locked());
  // Checkpoint first so that it never points into a segment deleted below.
  std::uint64_t checkpointed = 0;
  {
    std::lock_guard cycle_lock(flush_cycle_mu_);
    Status status = flush_cycle_locked(/*include_end_marker=*/true);
    if (status.ok()) status = write_checkpoint_locked(0);
    if (!status.ok()) {
      // After a failed sync the page cache's state is unknown: a later sync that succeeds proves
      // nothing about the data this one failed to write, so the log fails for good.
      fail(status);
      return status;
    }
    checkpointed = last_checkpoint_.flushed_index;
  }
  std::size_t removed = 0;
  for (;;) {
    std::shared_ptr<Segment> oldest;
    {
      std::unique_lock meta_lock(meta_mu_);
      if (segments_.size() < 2) break;  // never the active segment
      const auto& candidate = segments_.front();
      const std::uint64_t candidate_last = segments_[1]->base_index - 1;
      if (candidate_last >= before_index || candidate_last >= checkpointed) break;
      oldest = candidate;
      segments_.erase(segments_.begin());
      first_index_.store(segments_.front()->base_index);
    }
    // Oldest first: a crash leaves a shorter but valid log (CRASH CASES 4).
    Status status = env_->remove(oldest->data_path());
    if (status.ok()) status = env_->remove(oldest->index_path());
    if (!status.ok()) {
      fail(status);
      return status;
    }
    ++removed;
  }
  if (removed > 0) {
    Status status = env_->sync_dir(dir_);
    if (!status.ok()) {
      fail(status);
      return status;
    }
    spdlog::info("raftlog store {}: truncated prefix before {}: {} segment(s) removed, first index {}",
                 dir_, before_index, removed, first_index_.load());
  }
  return Status();
}

}  // namespace raftlog::store
