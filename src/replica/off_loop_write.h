// OffLoopWrite: one durable file write (TOPICSTATE, a trim's SNAPSHOT.next: encode, write, fdatasync,
// rename, directory fsync) that the replica hands off its Raft loop (replica_off_loop_write.cpp),
// shared by the job and the loop so that the loop can take it back at any moment: an install or a
// stop must not run while a write of the same files is under way off the loop (both use the same
// temporary file names, and the install's own TOPICSTATE must not be overwritten by an older one).
//
// settle() on the loop: a job the worker has not started will never start (its write is dropped,
// nothing of it reaches the disk); one it is running is waited for (at most one file write: what
// the loop did itself before). Under the simulator and TestCluster the job runs on the loop's own
// thread between two inputs, so the loop never sees it running and never waits. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "store/status.h"

namespace raftlog::replica {

class OffLoopWrite {
 public:
  // The worker: `write`, unless the loop dropped it first.
  void run(const std::function<store::Status()>& write) {
    {
      std::lock_guard lock(mu_);
      if (state_ != State::kQueued) return;
      state_ = State::kRunning;
    }
    store::Status outcome = write();
    std::lock_guard lock(mu_);
    outcome_ = std::move(outcome);
    state_ = State::kDone;
    done_.notify_all();
  }
  // The loop: the write's outcome (waiting for it while it runs), or nullopt when it had not
  // started (it never will).
  std::optional<store::Status> settle() {
    std::unique_lock lock(mu_);
    if (state_ == State::kQueued) state_ = State::kDropped;
    done_.wait(lock, [this] { return state_ != State::kRunning; });
    if (state_ == State::kDropped) return std::nullopt;
    return outcome_;
  }

 private:
  enum class State { kQueued, kRunning, kDone, kDropped };
  std::mutex mu_;
  std::condition_variable done_;
  State state_ = State::kQueued;
  store::Status outcome_;
};

// A durable file write handed off the loop (replica_off_loop_write.cpp): TOPICSTATE (the
// periodic save, a trim's, an install's) or a trim's SNAPSHOT.next, from a copy the loop took; its
// outcome is published on the loop (publish_write) by its `done`, or by settle_pending_write when
// an install or a stop takes it back first. At most one at a time per replica, beside the snapshot
// job (off_loop_outstanding_). A write settle() dropped stays in the worker's queue as a no-op
// while the next one is handed off, so a replica can have more than two jobs queued (review L10);
// the executor's queue bound (kMaxQueuedJobs) holds, beyond which a write is done on the loop.
struct PendingWrite {
  enum class Kind : std::uint8_t { kTopicState, kTrimSnapshotNext };
  Kind kind = Kind::kTopicState;
  std::uint64_t through = 0;  // TOPICSTATE's through_index
  bool for_trim = false;      // a trim waits for it (a failure stops the trim)
  std::shared_ptr<OffLoopWrite> write;
};

}  // namespace raftlog::replica
