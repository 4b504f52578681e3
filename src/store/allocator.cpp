// The segment allocator: keeps one PreparedSegment ready so that rolling to a new segment only costs
// two renames, never file creation or preallocation (which can take long for 1 GiB files).
#include <spdlog/spdlog.h>

#include "store/commit_log_impl.h"

namespace raftlog::store {

void CommitLog::Impl::allocator_main() {
  std::unique_lock lock(alloc_mu_);
  for (;;) {
    alloc_cv_.wait(lock, [&] { return alloc_stop_ || (alloc_wanted_ && !prepared_); });
    if (alloc_stop_) return;
    alloc_in_progress_ = true;
    alloc_wanted_ = false;
    const std::uint64_t sequence = prealloc_sequence_++;
    lock.unlock();
    auto prepared = prepare_segment(env_, dir_, sequence, options_.segment_size_bytes,
                                    options_.zero_fill_segments);
    lock.lock();
    alloc_in_progress_ = false;
    if (prepared.ok()) {
      prepared_ = std::move(*prepared);
    } else {
      // Not fatal: the next roll retries synchronously and reports the error to the appender.
      spdlog::warn("raftlog store {}: preparing the next segment failed: {}", dir_,
                   prepared.status().to_string());
    }
    alloc_cv_.notify_all();
  }
}

Result<PreparedSegment> CommitLog::Impl::take_prepared_segment() {
  std::uint64_t sequence = 0;
  {
    std::unique_lock lock(alloc_mu_);
    if (!spare_prepared_.empty()) {
      PreparedSegment spare = std::move(spare_prepared_.back());
      spare_prepared_.pop_back();
      return spare;
    }
    alloc_cv_.wait(lock, [&] { return !alloc_in_progress_; });
    if (prepared_) {
      PreparedSegment ready = std::move(*prepared_);
      prepared_.reset();
      if (allocator_.joinable()) {
        alloc_wanted_ = true;
        alloc_cv_.notify_all();
      }
      return ready;
    }
    sequence = prealloc_sequence_++;
  }
  auto created = prepare_segment(env_, dir_, sequence, options_.segment_size_bytes,
                                 options_.zero_fill_segments);
  if (created.ok() && allocator_.joinable()) {
    std::lock_guard lock(alloc_mu_);
    alloc_wanted_ = true;
    alloc_cv_.notify_all();
  }
  return created;
}

void CommitLog::Impl::return_prepared_segment(PreparedSegment prepared) {
  std::lock_guard lock(alloc_mu_);
  spare_prepared_.push_back(std::move(prepared));
}

void CommitLog::Impl::stop_allocator() {
  {
    std::lock_guard lock(alloc_mu_);
    alloc_stop_ = true;
  }
  alloc_cv_.notify_all();
  if (allocator_.joinable()) allocator_.join();
  // Unused prepared files are removed; recovery would remove them anyway.
  std::vector<PreparedSegment> unused = std::move(spare_prepared_);
  spare_prepared_.clear();
  if (prepared_) unused.push_back(std::move(*prepared_));
  prepared_.reset();
  for (PreparedSegment& p : unused) {
    p.data_map.reset();
    p.index_map.reset();
    (void)env_->remove(p.data_path);
    (void)env_->remove(p.index_path);
  }
}

}  // namespace raftlog::store
