// HeldExecutor: an OffLoopExecutor that holds every job and its `done` until the test runs them,
// so a test puts the worker as far behind the loop as it wants (a job not started, one whose work
// ran but whose `done` has not, ...).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <deque>
#include <functional>
#include <utility>

#include "replica/off_loop.h"
#include "replica/replica.h"

namespace raftlog::replica::testing {

class HeldExecutor final : public OffLoopExecutor {
 public:
  bool run(std::function<void()> job, std::function<void()> done) override {
    jobs.push_back({std::move(job), std::move(done), false});
    return true;
  }
  // The work of the job at `at` (the oldest by default), off the loop, without its `done`.
  void run_job(std::size_t at = 0) {
    ASSERT_LT(at, jobs.size());
    ASSERT_FALSE(jobs[at].ran);
    jobs[at].job();
    jobs[at].ran = true;
  }
  // The `done` of the job at `at` (the oldest by default), on the loop, after its work if that did
  // not run yet; then the replica's process(), as the node's loop runs after any input.
  void finish(Replica& replica, std::size_t at = 0) {
    ASSERT_LT(at, jobs.size());
    if (!jobs[at].ran) jobs[at].job();
    auto done = std::move(jobs[at].done);
    jobs.erase(jobs.begin() + static_cast<std::ptrdiff_t>(at));
    done();
    replica.process();
  }
  // Every job, oldest first, including those the finished ones hand off (bounded).
  void finish_all(Replica& replica) {
    for (int i = 0; i < 64 && !jobs.empty(); ++i) finish(replica);
  }
  struct Held {
    std::function<void()> job;
    std::function<void()> done;
    bool ran;
  };
  std::deque<Held> jobs;
};

}  // namespace raftlog::replica::testing
