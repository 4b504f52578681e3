// CommitLog::Impl, stepped mode (Options::background_work == BackgroundWork::kStepped): no thread of
// the log's own; its owner takes the flusher's steps, on its own thread and when it chooses to, so
// that a deterministic simulator decides every flush and every crash point (commit_log.h, STEPPED
// MODE). The steps are the flusher's own pieces (commit_log_flush.cpp, commit_log_checkpoint.cpp).
#include "store/commit_log_impl.h"

namespace raftlog::store {
namespace {

Status threads_take_steps(const std::string& dir, const char* step) {
  return Status::failed_precondition(
      std::string(step) + " on commit log " + dir +
      ", which runs its own flusher (Options::background_work is threads)");
}

}  // namespace

Status CommitLog::Impl::run_flush_cycle() {
  if (!stepped_) return threads_take_steps(dir_, "run_flush_cycle()");
  std::lock_guard step_lock(step_mu_);
  if (closed_.load()) return Status::closed("commit log " + dir_ + " is closed");
  RAFTLOG_RETURN_IF_ERROR(run_flusher_cycle());
  // As in flusher_main(): the listener hears about the flush with no store lock held (only the
  // step lock, which keeps its calls in the order of the cycles).
  call_listener(&stepped_reported_);
  remove_discarded_if_pending();  // as the flusher does after its listener: one segment's files
  // A checkpoint asked of the flusher (request_checkpoint) comes after the cycle, as it does there.
  if (checkpoint_requested_.exchange(false)) {
    std::lock_guard cycle_lock(flush_cycle_mu_);
    if (Status failed = failure(); !failed.ok()) return failed;
    return checkpoint_if_changed_locked();
  }
  return Status();
}

Status CommitLog::Impl::run_checkpoint() {
  if (!stepped_) return threads_take_steps(dir_, "run_checkpoint()");
  // No step lock: the cycle lock serializes it with the flush cycles, and the listener may call it.
  if (closed_.load()) return Status::closed("commit log " + dir_ + " is closed");
  std::lock_guard cycle_lock(flush_cycle_mu_);
  // A failed log writes no checkpoint: the next open decides from what is on disk (as the flusher).
  if (Status failed = failure(); !failed.ok()) return failed;
  return checkpoint_if_changed_locked();
}

Status CommitLog::Impl::refuse_sync_append() const {
  return Status::failed_precondition("append() on commit log " + dir_ +
                                     " would wait for a flush, but the log is stepped (no flusher "
                                     "thread; Options::background_work): use "
                                     "append_no_wait() and run_flush_cycle()");
}

Status CommitLog::Impl::check_flushed_stepped(std::uint64_t index) const {
  if (flushed_index_.load() >= index) return Status();
  if (Status failed = failure(); !failed.ok()) return failed;
  if (closed_.load()) {
    return Status::closed("commit log " + dir_ + " closed before index " + std::to_string(index) +
                          " was flushed");
  }
  return Status::failed_precondition("wait_flushed(" + std::to_string(index) +
                                     ") on stepped commit log " + dir_ + ": flushed index is " +
                                     std::to_string(flushed_index_.load()) +
                                     ", and only run_flush_cycle() advances it");
}

}  // namespace raftlog::store
