// CommitLog::Impl, flushing (group commit): the flusher thread, its flush cycles, and the waits for
// durability (wait_flushed, a sync append's wait for its own entries, flush()). Stepped mode runs the
// same cycles from its owner's calls (commit_log_stepped.cpp).
#include <algorithm>
#include <chrono>
#include <utility>

#include "store/commit_log_impl.h"
#include "store/entry_format.h"
#include "util/check.h"

namespace raftlog::store {
namespace {

// Every exit of a flush cycle ends it: ending it is what wakes the waiters it covered
// (flush_waiters.h).
class FlushCycleScope {
 public:
  explicit FlushCycleScope(FlushWaiters& waiters) : waiters_(waiters) { waiters_.begin_cycle(); }
  ~FlushCycleScope() { end(); }
  FlushCycleScope(const FlushCycleScope&) = delete;
  FlushCycleScope& operator=(const FlushCycleScope&) = delete;
  void end() {
    if (!std::exchange(ended_, true)) waiters_.end_cycle();
  }

 private:
  FlushWaiters& waiters_;
  bool ended_ = false;
};

}  // namespace

Status CommitLog::Impl::wait_flushed(std::uint64_t index) {
  if (stepped_) return check_flushed_stepped(index);
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
  RAFTLOG_CHECK(!flusher_running_,
                "waiters are released early only after a failure or the flusher's stop");
  return Status::closed("commit log " + dir_ + " closed before index " + std::to_string(index) +
                        " was flushed");
}

void CommitLog::Impl::request_flush() {
  if (stepped_) return;  // nobody to wake: the owner runs the flush cycles
  // Only the caller that raises the flag wakes the flusher; the others ride on that flush request
  // (the flusher lowers the flag before it snapshots what to flush, so their entries are covered).
  if (flush_requested_.exchange(true)) return;
  {
    std::lock_guard lock(flush_mu_);  // pairs with the predicate check in flusher_main()
  }
  flush_cv_.notify_one();
}

Status CommitLog::Impl::flush() {
  if (stepped_) return run_flush_cycle();
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
    if (!run_flusher_cycle().ok()) return;
    // The listener hears about the flush before the periodic checkpoint runs: a checkpoint costs
    // two more syncs (index records, checkpoint file), and making the Raft node wait for them
    // delayed about 1 % of acknowledgements (the p99.9 of docs/benchmarks.md, "raftlog vs etcd").
    call_listener(&last_reported);
    if (stop) return;  // a reset's old segments left set aside: the next open removes them
    // After the listener, one segment's files a wake-up: a reset's old segments wait for the
    // appends' acknowledgements, not the other way round.
    remove_discarded_if_pending();
    {
      std::lock_guard cycle_lock(flush_cycle_mu_);
      if (!failure().ok()) return;  // a failed log writes no checkpoint: the next open decides
      maybe_checkpoint_locked();
    }
  }
}

Status CommitLog::Impl::run_flusher_cycle() {
  std::lock_guard cycle_lock(flush_cycle_mu_);
  // Checked again under the cycle lock: a truncate_suffix() that held it may have failed the log
  // after its intent was durable, with the entries it was removing still published. A cycle now
  // would make them "durable" (and acknowledge their waiters), and the next open would complete the
  // truncation and remove them.
  if (Status failed = failure(); !failed.ok()) return failed;
  Status status = flush_cycle_locked(/*include_end_marker=*/false);
  if (!status.ok()) fail(status);
  return status;
}

void CommitLog::Impl::call_listener(std::uint64_t* last_reported) {
  // Called by the flusher thread (or a stepped log's owner) with no store lock held, so the listener
  // may call any method.
  const std::uint64_t flushed = flushed_index_.load();
  if (flushed < *last_reported) *last_reported = flushed;  // lowered by a truncation
  if (flushed == *last_reported) return;
  *last_reported = flushed;
  std::lock_guard lock(listener_mu_);
  if (listener_) listener_(flushed);
}

Status CommitLog::Impl::flush_cycle_locked(bool include_end_marker) {
  FlushCycleScope cycle(flush_waiters_);
  const std::uint64_t old_flushed = flushed_index_.load();
  const FlushSnapshot snapshot = snapshot_unflushed_locked(include_end_marker, old_flushed);
  if (snapshot.ranges.empty() && !snapshot.sync_dir && snapshot.target <= old_flushed)
    return Status();
  std::uint64_t bytes = 0;
  std::uint64_t sync_calls = 0;
  const auto sync_start = std::chrono::steady_clock::now();
  RAFTLOG_RETURN_IF_ERROR(sync_snapshot_locked(snapshot, &bytes, &sync_calls));
  const auto sync_duration = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - sync_start);
  for (const FlushRange& range : snapshot.ranges) range.segment->flushed_offset = range.written;
  const std::uint64_t counted = unflushed_bytes_.load();
  unflushed_bytes_.fetch_sub(std::min(counted, bytes));
  std::uint64_t new_flushed = std::max(old_flushed, snapshot.target);
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

CommitLog::Impl::FlushSnapshot CommitLog::Impl::snapshot_unflushed_locked(
    bool include_end_marker, std::uint64_t old_flushed) {
  FlushSnapshot snapshot;
  std::shared_lock meta_lock(meta_mu_);
  snapshot.target = last_index_.load();
  flush_waiters_.set_cycle_target(snapshot.target);
  snapshot.sync_dir = dir_dirty_;
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
      snapshot.ranges.push_back({*it, segment.flushed_offset, to, segment.write_offset});
    }
    if (segment.base_index <= old_flushed) break;
  }
  return snapshot;
}

Status CommitLog::Impl::sync_snapshot_locked(const FlushSnapshot& snapshot, std::uint64_t* bytes,
                                             std::uint64_t* sync_calls) {
  for (auto it = snapshot.ranges.rbegin(); it != snapshot.ranges.rend(); ++it) {  // oldest first
    RAFTLOG_RETURN_IF_ERROR(it->segment->data_map->flush(it->from, it->to - it->from));
    ++*sync_calls;
    *bytes += it->written - it->from;
  }
  if (snapshot.sync_dir) {
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
    ++*sync_calls;
  }
  return Status();
}

}  // namespace raftlog::store
