// CommitLog::Impl, truncation: truncate_suffix (Raft's conflicting tail; CRASH CASES 3 in
// commit_log.h) and truncate_prefix (retention: whole segments before an index; CRASH CASES 4).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "store/commit_log_impl.h"

namespace raftlog::store {

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
  auto cut = locate_suffix_cut_locked(from_index);
  if (!cut.ok()) return cut.status();

  // 1. Durable intent, with the flushed point lowered below the cut (CRASH CASES 3).
  if (flushed_index_.load() >= from_index) flushed_index_.store(from_index - 1);
  if (Status status = write_checkpoint_locked(from_index); !status.ok()) {
    fail(status);  // a failed sync fails the log; the next open decides from what is on disk
    return status;
  }
  // 2. Unpublish (fails the log itself: the intent is durable already).
  RAFTLOG_RETURN_IF_ERROR(unpublish_suffix_locked(from_index, &*cut));
  // 3.-5. Remove the suffix from the disk and clear the intent.
  if (Status status = erase_suffix_locked(*cut); !status.ok()) {
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
               from_index, cut->doomed.size());
  return Status();
}

Result<CommitLog::Impl::SuffixCut> CommitLog::Impl::locate_suffix_cut_locked(
    std::uint64_t from_index) const {
  // The segment holding from_index, the entry's offset in it, and the segments after it.
  SuffixCut cut;
  std::shared_lock meta_lock(meta_mu_);
  cut.segment = find_segment_locked(from_index);
  if (!cut.segment)
    return Status::corruption("no segment holds index " + std::to_string(from_index));
  auto record = cut.segment->index_record(from_index);
  if (!record) {
    return Status::corruption(cut.segment->index_path() + ": invalid index record for index " +
                              std::to_string(from_index));
  }
  cut.offset = record->offset;
  for (const auto& segment : segments_) {
    if (segment->base_index > cut.segment->base_index) cut.doomed.push_back(segment);
  }
  return cut;
}

Status CommitLog::Impl::unpublish_suffix_locked(std::uint64_t from_index, SuffixCut* cut) {
  // Readers stop seeing the suffix before its bytes are zeroed.
  Segment& segment = *cut->segment;
  cut->old_write_offset = segment.write_offset;
  cut->old_count = segment.entry_count;
  std::uint64_t new_last_term = segment.prev_term;
  if (from_index > segment.base_index) {
    auto record = segment.index_record(from_index - 1);
    if (!record) {
      // The intent is durable already: the log must not take appends that the next open would
      // cut away when it completes the truncation.
      Status corrupt =
          Status::corruption(segment.index_path() + ": invalid index record for index " +
                             std::to_string(from_index - 1));
      fail(corrupt);
      return corrupt;
    }
    new_last_term = record->term;
  }
  {
    std::unique_lock meta_lock(meta_mu_);
    segments_.resize(segments_.size() - cut->doomed.size());
    segment.write_offset = cut->offset;
    segment.entry_count = from_index - segment.base_index;
    segment.last_term = new_last_term;
    segment.flushed_offset = std::min(segment.flushed_offset, cut->offset);
    segment.index_flushed_bytes =
        std::min(segment.index_flushed_bytes, segment.index_bytes_for(segment.entry_count));
    last_index_.store(from_index - 1);
  }
  unflushed_bytes_.store(0);
  return Status();
}

Status CommitLog::Impl::erase_suffix_locked(const SuffixCut& cut) {
  Segment& segment = *cut.segment;
  // 3. Zero the cut segment's tail (data and index) and make that durable.
  Status status = segment.zero_data_range(cut.offset, cut.old_write_offset);
  if (status.ok()) {
    segment.clear_index_records(segment.entry_count, cut.old_count);
    const std::uint64_t from_bytes = segment.index_bytes_for(segment.entry_count);
    const std::uint64_t to_bytes =
        std::min(segment.index_bytes_for(cut.old_count), segment.index_allocated_bytes);
    if (to_bytes > from_bytes) status = segment.index_map->flush(from_bytes, to_bytes - from_bytes);
  }
  // 4. Delete later segments (newest first) and make the removals durable.
  for (auto it = cut.doomed.rbegin(); status.ok() && it != cut.doomed.rend(); ++it) {
    status = env_->remove((*it)->data_path());
    if (status.ok()) status = env_->remove((*it)->index_path());
  }
  if (status.ok()) status = env_->sync_dir(dir_);
  // 5. Clear the intent.
  if (status.ok()) status = write_checkpoint_locked(0);
  return status;
}

Status CommitLog::Impl::truncate_prefix(std::uint64_t before_index,
                                        const CommitLog::PrefixProgress& more) {
  std::lock_guard write_lock(write_mu_);
  RAFTLOG_RETURN_IF_ERROR(check_writable_locked());
  // Checkpoint first so that it never points into a segment deleted below (and so that the commit
  // index is durable up to the deletion's point before anything goes: the replica's open finishes
  // a cut trim only up to the recovered commit index), unless the last one covers the deletion
  // already (covers_prefix: the flusher's periodic one on an idle log, or the one a caller asked
  // of it with request_checkpoint() before calling): every segment that may go then ends below
  // it, and the call neither flushes nor checkpoints. That flush cycle and checkpoint (the index
  // files of every segment synced) held a replica's Raft loop 0.37-0.78 s in a trim's first
  // deletion round (docs/benchmarks.md, "Trim round"); the replica's trim now asks the flusher
  // for it and truncates once prefix_checkpointed() (review offloop L6).
  std::uint64_t checkpointed = 0;
  {
    std::lock_guard cycle_lock(flush_cycle_mu_);
    if (!covers_prefix(last_checkpoint_.flushed_index, last_checkpoint_.commit_index, before_index,
                       last_index_.load(), commit_index_.load())) {
      Status status = flush_cycle_locked(/*include_end_marker=*/true);
      if (status.ok()) status = write_checkpoint_locked(0);
      if (!status.ok()) {
        // After a failed sync the page cache's state is unknown: a later sync that succeeds
        // proves nothing about the data this one failed to write, so the log fails for good.
        fail(status);
        return status;
      }
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
    if (!status.ok()) {
      // The segment is still on disk, so the log still starts there (a restart finds it): say so,
      // or the caller would take the deletion for done (the replica's trim then names a start the
      // log does not have).
      std::unique_lock meta_lock(meta_mu_);
      segments_.insert(segments_.begin(), oldest);
      first_index_.store(oldest->base_index);
    }
    // Without its data file an index file is a leftover that recovery removes.
    if (status.ok()) status = env_->remove(oldest->index_path());
    if (!status.ok()) {
      fail(status);
      return status;
    }
    ++removed;
    if (more && !more(removed)) break;
  }
  if (removed > 0) {
    Status status = env_->sync_dir(dir_);
    if (!status.ok()) {
      fail(status);
      return status;
    }
    spdlog::info(
        "raftlog store {}: truncated prefix before {}: {} segment(s) removed, first index {}", dir_,
        before_index, removed, first_index_.load());
  }
  return Status();
}

}  // namespace raftlog::store
