// CommitLog::Impl, reset: the whole log replaced by an empty one that starts at a given index (a
// snapshot install; CRASH CASES 7 in commit_log.h), and recovery's completion of a reset that a crash
// interrupted. The checkpoint's reset intent is the commit point: before it is durable nothing on
// disk has changed (the old log), after it recovery removes every segment and creates the new empty
// one (the new log), so no recovery ever mixes the two.
//
// The old segments are renamed aside (discard-<base>.seg/.idx), not unlinked, in the reset: an
// unlink frees the file's blocks (a preallocated segment is 1 GiB by default), a rename only moves a
// name, and a snapshot install runs the reset on the replica's Raft loop (drills5 M1: 98-261 ms of
// log reset). Why the order is safe: every rename comes after the intent is durable, so a power cut
// that keeps any of them keeps the intent too and recovery completes the reset (the new log); the
// directory sync that makes the new segment's name durable makes the renames durable before the
// intent is cleared, so no recovery without the intent finds an old segment under its own name;
// and recovery removes every discard-* file before it reads anything (remove_leftovers), never
// taking one for a segment. remove_discarded() unlinks them later, on any thread.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>

#include "store/commit_log_impl.h"

namespace raftlog::store {

using segment_format::kSegmentHeaderBytes;

Status CommitLog::Impl::reset(std::uint64_t base_index, std::uint64_t prev_term) {
  if (base_index == 0 || (base_index == 1 && prev_term != 0)) {
    return Status::invalid_argument("reset(" + std::to_string(base_index) + ", " +
                                    std::to_string(prev_term) +
                                    "): the first index must be >= 1, and index 0 has term 0");
  }
  std::lock_guard write_lock(write_mu_);
  RAFTLOG_RETURN_IF_ERROR(check_writable_locked());
  // The new segment's files first: a full disk refuses the reset with nothing changed.
  auto prepared = take_prepared_segment();
  if (!prepared.ok()) return prepared.status();
  std::lock_guard cycle_lock(flush_cycle_mu_);
  // 1. The durable intent: from here on, recovery completes the reset.
  Checkpoint intent;
  intent.flushed_index = base_index - 1;
  intent.flushed_segment_base = base_index;
  intent.flushed_offset = kSegmentHeaderBytes;
  intent.commit_index = base_index - 1;
  intent.generation = generation_;
  intent.reset_base = base_index;
  intent.reset_prev_term = prev_term;
  if (Status status = checkpoint_file_->write(encode_checkpoint(intent)); !status.ok()) {
    return_prepared_segment(std::move(*prepared));
    fail(status);  // a failed sync: the next open decides from what is on disk
    return status;
  }
  set_last_checkpoint_locked(intent);
  // 2. Unpublish the old log: readers see an empty log at base_index from now on (a ReadBatch they
  // hold keeps its segment's mapping alive).
  std::vector<std::shared_ptr<Segment>> doomed;
  {
    std::unique_lock meta_lock(meta_mu_);
    doomed.swap(segments_);
    first_index_.store(base_index);
    last_index_.store(base_index - 1);
    flushed_index_.store(base_index - 1);
    commit_index_.store(base_index - 1);
  }
  unflushed_bytes_.store(0);
  // 3. Rename the old files aside (an earlier reset's discard of the same base is replaced: it is
  // garbage too), then create the new segment (it may reuse an old segment's name).
  // A rename the file system refuses (a full disk with no room for a directory block of the
  // longer name) falls back to the unlink the reset did before (review offloop3 L3): after the
  // intent either is as safe, and an install on a full disk must not cost the node a restart.
  const auto set_aside = [this](const std::string& path, const std::string& name) {
    Status renamed = env_->rename(path, join_path(dir_, segment_format::kDiscardPrefix + name));
    if (renamed.ok()) return renamed;
    spdlog::warn("raftlog store {}: setting {} aside: {}; unlinking it now", dir_, path,
                 renamed.to_string());
    return env_->remove(path);
  };
  Status status;
  for (auto it = doomed.rbegin(); status.ok() && it != doomed.rend(); ++it) {
    const Segment& old = **it;
    status = set_aside(old.data_path(), old.data_name);
    if (status.ok()) status = set_aside(old.index_path(), old.index_name);
  }
  std::shared_ptr<Segment> fresh;
  if (status.ok()) {
    auto activated = Segment::activate(env_, dir_, std::move(*prepared), base_index, prev_term,
                                       options_.segment_size_bytes);
    status = activated.status();
    if (activated.ok()) fresh = *activated;
  }
  // 4. Its headers and the directory durable, then 5. the intent cleared.
  if (status.ok()) status = fresh->data_map->flush(0, kSegmentHeaderBytes);
  if (status.ok()) status = fresh->index_map->flush(0, fresh->index_bytes_for(0));
  if (status.ok()) status = env_->sync_dir(dir_);
  if (status.ok()) {
    fresh->last_term = prev_term;
    fresh->flushed_offset = kSegmentHeaderBytes;
    fresh->index_flushed_bytes = fresh->index_bytes_for(0);
    std::unique_lock meta_lock(meta_mu_);
    segments_.push_back(fresh);
  }
  if (status.ok()) status = write_checkpoint_locked(0);
  if (!status.ok()) {
    fail(status);  // the intent stays durable; the next open completes the reset
    return status;
  }
  // The flusher unlinks the old files at its next wake-up (within flush_interval_ms; a stepped log:
  // its owner's next flush step), off the caller's thread.
  discards_pending_.store(true);
  // Sync appends still waiting for removed entries learn that they are gone (every index >= 1).
  truncations_.record(1);
  flush_waiters_.wake_all();
  {
    std::lock_guard lock(stats_mu_);
    ++stats_.segments_created;
  }
  spdlog::info(
      "raftlog store {}: reset to an empty log at index {} (term {} before it); {} "
      "segment(s) set aside to be removed",
      dir_, base_index, prev_term, doomed.size());
  return Status();
}

Status CommitLog::Impl::remove_discarded() {
  bool left = false;
  return remove_discarded_files(SIZE_MAX, &left);
}

Status CommitLog::Impl::remove_discarded_files(std::size_t max_files, bool* left) {
  *left = false;
  auto names = env_->list_dir(dir_);
  if (!names.ok()) return names.status();
  std::size_t removed = 0;
  for (const std::string& name : *names) {
    if (name.rfind(segment_format::kDiscardPrefix, 0) != 0) continue;
    if (removed == max_files) {
      *left = true;
      return Status();
    }
    const std::string path = join_path(dir_, name);
    // Another caller (the flusher, a test's call) may have removed it meanwhile.
    if (Status status = env_->remove(path); !status.ok() && env_->exists(path)) return status;
    ++removed;
  }
  return Status();
}

void CommitLog::Impl::remove_discarded_if_pending() {
  if (!discards_pending_.exchange(false)) return;
  // One segment's two files per wake-up (review offloop3 M1): the flusher makes appends durable
  // between them, so an install's old log (hundreds of segments of up to 1 GiB) never holds the
  // acknowledgements back for more than one segment's unlinks; the rest goes on at the next
  // wake-ups, within flush_interval_ms each.
  bool left = false;
  if (Status status = remove_discarded_files(kDiscardFilesPerStep, &left); !status.ok()) {
    spdlog::warn("raftlog store {}: removing the segments a reset set aside (the next open does): {}",
                 dir_, status.to_string());
    return;
  }
  if (left) discards_pending_.store(true);
}

Result<std::vector<std::uint64_t>> CommitLog::Impl::complete_reset_intent(
    std::span<const std::uint64_t> bases, const Checkpoint& cp) {
  // Every segment goes, the new one's name included (it may be half made): the reset is redone
  // from scratch, so a crash here leaves the same intent for the next open.
  RAFTLOG_RETURN_IF_ERROR(remove_segment_files(bases));
  auto prepared = prepare_segment(env_, dir_, prealloc_sequence_++, options_.segment_size_bytes,
                                  options_.zero_fill_segments);
  if (!prepared.ok()) return prepared.status();
  auto fresh = Segment::activate(env_, dir_, std::move(*prepared), cp.reset_base,
                                 cp.reset_prev_term, options_.segment_size_bytes);
  if (!fresh.ok()) return fresh.status();
  RAFTLOG_RETURN_IF_ERROR((*fresh)->data_map->flush(0, kSegmentHeaderBytes));
  RAFTLOG_RETURN_IF_ERROR((*fresh)->index_map->flush(0, (*fresh)->index_bytes_for(0)));
  RAFTLOG_RETURN_IF_ERROR(env_->sync_dir(dir_));
  report_.reset_intent_completed = true;
  spdlog::warn("raftlog store {}: completed an interrupted reset to an empty log at index {}", dir_,
               cp.reset_base);
  // Step 3 reopens it from disk like any segment; the intent checkpoint vouches for its start.
  return std::vector<std::uint64_t>{cp.reset_base};
}

}  // namespace raftlog::store
