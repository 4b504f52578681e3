// OffLoopWorker: raftlogd's replica::OffLoopExecutor (replica/off_loop.h). One thread runs the jobs
// the replica hands off its Raft loop (a leader's snapshot encoding and CRC-32C: hundreds of ms for
// tens of MiB; a TOPICSTATE or trim SNAPSHOT.next write), in order, and hands each `done` to
// `deliver`, which the node sets to queue it as a loop input that wakes the loop like a flush
// notice (node.cpp, OffLoopDoneInput).
//
// Bounded: the replica keeps at most two live jobs outstanding (a snapshot job and a file write),
// plus file writes an install or a stop dropped unstarted, which stay queued as no-ops (review L10:
// so more than two can be queued); it refuses (logs, returns false) beyond kMaxQueuedJobs, and
// the replica then abandons a snapshot job at once (its snapshot is retried by the core) or writes
// the file on its loop. stop() joins the thread; jobs not started by then are dropped, unrun (the
// replica's close() takes a file write back itself: replica/off_loop_write.h).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "replica/off_loop.h"

namespace raftlog::server {

class OffLoopWorker final : public replica::OffLoopExecutor {
 public:
  static constexpr std::size_t kMaxQueuedJobs = 4;

  explicit OffLoopWorker(std::function<void(std::function<void()> done)> deliver);
  ~OffLoopWorker() override;
  OffLoopWorker(const OffLoopWorker&) = delete;
  OffLoopWorker& operator=(const OffLoopWorker&) = delete;

  bool run(std::function<void()> job, std::function<void()> done) override;  // any thread
  void stop();

 private:
  void work();

  const std::function<void(std::function<void()> done)> deliver_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::pair<std::function<void()>, std::function<void()>>> jobs_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace raftlog::server
