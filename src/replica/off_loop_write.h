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
#include <functional>
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

}  // namespace raftlog::replica
