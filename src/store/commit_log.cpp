// CommitLog: the public class (a thin layer over CommitLog::Impl), open, the start of the
// background threads, close and failure. The rest of Impl, one job a file (commit_log_impl.h):
// commit_log_append.cpp, commit_log_group.cpp, commit_log_flush.cpp, commit_log_stepped.cpp,
// commit_log_checkpoint.cpp, commit_log_read.cpp, commit_log_truncate.cpp, recovery.cpp,
// allocator.cpp, suspect_marker.cpp.
#include "store/commit_log.h"

#include <spdlog/spdlog.h>

#include "store/commit_log_impl.h"
#include "util/thread_name.h"

namespace raftlog::store {

const char* to_string(FlushMode mode) { return mode == FlushMode::kSync ? "sync" : "async"; }

const char* to_string(BackgroundWork work) {
  return work == BackgroundWork::kThreads ? "threads" : "stepped";
}

const char* to_string(RecoveryMode mode) {
  switch (mode) {
    case RecoveryMode::kFresh:
      return "fresh";
    case RecoveryMode::kNormal:
      return "normal";
    case RecoveryMode::kAbnormal:
      return "abnormal";
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
         " corrupted_flushed_data_truncated=" +
         (corrupted_flushed_data_truncated ? "true" : "false") +
         " highest_index_seen=" + std::to_string(highest_index_seen) +
         " valid_entries_after_cut=" + std::to_string(valid_entries_after_cut) +
         " suspect_index=" + std::to_string(suspect_index) +
         " first_index=" + std::to_string(first_index) +
         " last_index=" + std::to_string(last_index) +
         " duration_us=" + std::to_string(duration.count()) +
         (reset_intent_completed ? " reset_completed=true" : "");
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
  impl->start_background_work();
  return std::unique_ptr<CommitLog>(new CommitLog(std::move(impl)));
}

Result<IndexRange> CommitLog::append(std::span<const EntryToAppend> batch) {
  if (impl_->stepped_ && impl_->options_.flush_mode == FlushMode::kSync)
    return impl_->refuse_sync_append();
  if (impl_->options_.flush_mode == FlushMode::kSync && !batch.empty() &&
      batch[0].meta.index == 0) {
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
void CommitLog::request_checkpoint() { impl_->request_checkpoint(); }
bool CommitLog::prefix_checkpointed(std::uint64_t before_index) const {
  return impl_->prefix_checkpointed(before_index);
}
Status CommitLog::run_flush_cycle() { return impl_->run_flush_cycle(); }
Status CommitLog::run_checkpoint() { return impl_->run_checkpoint(); }
void CommitLog::set_flush_listener(FlushListener listener) {
  impl_->set_flush_listener(std::move(listener));
}
void CommitLog::set_flush_observer(FlushObserver observer) {
  impl_->set_flush_observer(std::move(observer));
}
Status CommitLog::truncate_suffix(std::uint64_t from_index, bool force) {
  return impl_->truncate_suffix(from_index, force);
}
Status CommitLog::truncate_prefix(std::uint64_t before_index, const PrefixProgress& more) {
  return impl_->truncate_prefix(before_index, more);
}
Status CommitLog::reset(std::uint64_t first_index, std::uint64_t prev_term) {
  return impl_->reset(first_index, prev_term);
}
Status CommitLog::remove_discarded() { return impl_->remove_discarded(); }
Status CommitLog::set_commit_index(std::uint64_t commit_index, bool persist) {
  return impl_->set_commit_index(commit_index, persist);
}
std::uint64_t CommitLog::commit_index() const { return impl_->commit_index_.load(); }
Status CommitLog::mark_suspect(std::uint64_t index) { return impl_->mark_suspect(index); }
Result<ReadBatch> CommitLog::read(std::uint64_t from_index, std::size_t max_entries,
                                  std::size_t max_bytes) const {
  return impl_->read(from_index, max_entries, max_bytes);
}
Result<std::uint64_t> CommitLog::term_at(std::uint64_t index) const {
  return impl_->term_at(index);
}
std::uint64_t CommitLog::first_index() const { return impl_->first_index_.load(); }
std::uint64_t CommitLog::last_index() const { return impl_->last_index_.load(); }
std::uint64_t CommitLog::flushed_index() const { return impl_->flushed_index_.load(); }
FlushStats CommitLog::stats() const { return impl_->stats(); }
CommitLog::DiskUsage CommitLog::disk_usage() const { return impl_->disk_usage(); }
std::vector<CommitLog::SegmentInfo> CommitLog::segments() const { return impl_->segments(); }
std::uint64_t CommitLog::bytes_after(std::uint64_t index) const {
  return impl_->bytes_after(index);
}
const RecoveryReport& CommitLog::recovery_report() const { return impl_->report_; }
const std::string& CommitLog::dir() const { return impl_->dir_; }
const Options& CommitLog::options() const { return impl_->options_; }
Status CommitLog::close() { return impl_->close(); }

// ------------------------------------------------------------------------------------------------
// Impl: lifecycle

CommitLog::Impl::Impl(std::string dir, Options options, Env* env)
    : dir_(std::move(dir)),
      options_(options),
      env_(env),
      stepped_(options.background_work == BackgroundWork::kStepped) {}

CommitLog::Impl::~Impl() { (void)close(); }

void CommitLog::Impl::start_background_work() {
  started_ = true;
  last_checkpoint_time_ = std::chrono::steady_clock::now();
  if (stepped_) {
    // No thread: the owner's steps do the work (commit_log_stepped.cpp). The listener has heard of
    // nothing yet, and recovery made everything it kept durable.
    stepped_reported_ = flushed_index_.load();
    return;
  }
  flush_waiters_.start_waker();
  {
    std::lock_guard lock(flush_mu_);
    flusher_running_ = true;
  }
  flusher_ = std::thread([this] {
    util::name_this_thread("store-flusher");
    flusher_main();
  });
  if (options_.preallocate_next_segment) {
    {
      std::lock_guard lock(alloc_mu_);
      alloc_wanted_ = true;
    }
    allocator_ = std::thread([this] {
      util::name_this_thread("store-allocator");
      allocator_main();
    });
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

}  // namespace raftlog::store
