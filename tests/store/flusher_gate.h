// FlusherGate: holds a CommitLog's flusher inside the flush listener (where it holds no store lock)
// once it reported a flushed index, so that later sync-mode appends stay unflushed until release().
// Bounded: the listener waits at most 10 s, and so does wait_held().
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "store/commit_log.h"

namespace raftlog::store::testing {

class FlusherGate {
 public:
  void attach(CommitLog& log) {
    log.set_flush_listener([this](std::uint64_t) {
      std::unique_lock lock(mu_);
      held_ = true;
      cv_.notify_all();
      cv_.wait_for(lock, std::chrono::seconds(10), [&] { return released_; });
    });
  }
  bool wait_held() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return held_; });
  }
  void release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  ~FlusherGate() { release(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  bool released_ = false;
};

}  // namespace raftlog::store::testing
