// CommitLog::Impl, checkpoints: what the CHECKPOINT file vouches for (checkpoint.h), when the flusher
// rewrites it, and the commit index the upper layer stores in it.
#include <algorithm>

#include "store/commit_log_impl.h"

namespace raftlog::store {

using segment_format::kSegmentHeaderBytes;

void CommitLog::Impl::maybe_checkpoint_locked() {
  const auto now = std::chrono::steady_clock::now();
  // Asked (request_checkpoint): now, whatever the interval says.
  const bool asked = checkpoint_requested_.exchange(false);
  if (!asked &&
      now - last_checkpoint_time_ < std::chrono::milliseconds(options_.checkpoint_interval_ms))
    return;
  last_checkpoint_time_ = now;           // a write below sets it again
  (void)checkpoint_if_changed_locked();  // a failure fails the log; the flusher then stops
}

Status CommitLog::Impl::checkpoint_if_changed_locked() {
  if (last_checkpoint_.flushed_index == flushed_index_.load() &&
      last_checkpoint_.commit_index == commit_index_.load()) {
    return Status();
  }
  Status status = write_checkpoint_locked(0);
  if (!status.ok()) fail(status);
  return status;
}

void CommitLog::Impl::request_checkpoint() {
  checkpoint_requested_.store(true);
  request_flush();  // the flusher's cycle, then its checkpoint (a stepped log: the owner's step)
}

bool CommitLog::Impl::covers_prefix(std::uint64_t flushed, std::uint64_t commit,
                                    std::uint64_t before_index, std::uint64_t last_index,
                                    std::uint64_t commit_index) {
  if (before_index == 0) return true;  // nothing lies below it
  // Every segment truncate_prefix deletes ends below the checkpoint's flushed index (so the
  // checkpoint never points into one). The commit index: a cut deletion is finished at the next
  // open only up to the commit index it recovers (the replica's finish_cut_trim), so it must be
  // durable up to the deletion's point first; no need for the newest one (under load the commit
  // index moves every round, and asking for it would checkpoint in every truncation).
  return flushed >= std::min(before_index, last_index) &&
         commit >= std::min(before_index - 1, commit_index);
}

bool CommitLog::Impl::prefix_checkpointed(std::uint64_t before_index) const {
  // The atomics are read one by one, so a checkpoint written meanwhile can mix its values with the
  // last one's: a hint for the caller's wait, never what the truncation relies on (truncate_prefix
  // checks last_checkpoint_ again under the cycle lock and checkpoints itself when it must).
  return covers_prefix(checkpointed_flushed_.load(), checkpointed_commit_.load(), before_index,
                       last_index_.load(), commit_index_.load());
}

void CommitLog::Impl::set_last_checkpoint_locked(const Checkpoint& checkpoint) {
  last_checkpoint_ = checkpoint;
  checkpointed_flushed_.store(checkpoint.flushed_index);
  checkpointed_commit_.store(checkpoint.commit_index);
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
          return Status::corruption(segment->index_path() +
                                    ": missing index record for flushed index " +
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
  set_last_checkpoint_locked(checkpoint);
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

}  // namespace raftlog::store
