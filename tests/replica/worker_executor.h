// WorkerExecutor: an OffLoopExecutor with one worker thread, as raftlogd's OffLoopWorker
// (src/server/off_loop_worker.h): jobs run in order on the thread; each `done` waits in a queue
// until the test's loop takes it (run_done), as the node's loop takes it from its input queue. For
// benches that time the loop's rounds with the work really off it. Bounded by its callers (the
// replica keeps at most two jobs out).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "replica/off_loop.h"

namespace raftlog::replica::testing {

class WorkerExecutor final : public OffLoopExecutor {
 public:
  WorkerExecutor() : thread_([this] { work(); }) {}
  ~WorkerExecutor() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  WorkerExecutor(const WorkerExecutor&) = delete;
  WorkerExecutor& operator=(const WorkerExecutor&) = delete;

  bool run(std::function<void()> job, std::function<void()> done) override {
    {
      std::lock_guard lock(mu_);
      jobs_.emplace_back(std::move(job), std::move(done));
      ++out_;
    }
    wake_.notify_all();
    return true;
  }
  // On the loop: the `done` of every job finished so far, oldest first, after waiting up to
  // `wait` for one while a job is out (the loop's idle wait for its next input). How many ran.
  std::size_t run_done(std::chrono::milliseconds wait = std::chrono::milliseconds(0)) {
    std::deque<std::function<void()>> ready;
    {
      std::unique_lock lock(mu_);
      if (out_ > 0 && done_.empty()) {
        wake_.wait_for(lock, wait, [this] { return !done_.empty(); });
      }
      ready.swap(done_);
      out_ -= ready.size();
    }
    for (auto& done : ready) done();
    return ready.size();
  }
  bool idle() {
    std::lock_guard lock(mu_);
    return out_ == 0;
  }

 private:
  void work() {
    std::unique_lock lock(mu_);
    for (;;) {
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, nothing left
      auto [job, done] = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
      done_.push_back(std::move(done));
      wake_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::pair<std::function<void()>, std::function<void()>>> jobs_;
  std::deque<std::function<void()>> done_;
  std::size_t out_ = 0;  // handed off, `done` not taken yet
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace raftlog::replica::testing
