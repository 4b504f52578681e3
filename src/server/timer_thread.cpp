#include "server/timer_thread.h"

#include <utility>

#include "server/check.h"
#include "util/thread_name.h"

namespace raftlog::server {

TimerThread::TimerThread(const char* thread_name, std::size_t max_pending)
    : thread_name_(thread_name), max_pending_(max_pending) {
  RAFTLOG_CHECK(max_pending_ > 0, "TimerThread needs room for at least one callback");
}

TimerThread::~TimerThread() { stop(); }

void TimerThread::start() {
  std::lock_guard lock(mu_);
  RAFTLOG_CHECK(!thread_.joinable(), "TimerThread::start called twice");
  if (stopping_) return;
  thread_ = std::thread([this] {
    util::name_this_thread(thread_name_);
    run();
  });
}

bool TimerThread::schedule(Clock::time_point when, std::function<void()> callback) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || pending_.size() >= max_pending_) return false;
    const bool new_earliest = pending_.empty() || when < pending_.begin()->first;
    pending_.emplace(when, std::move(callback));
    if (!new_earliest) return true;  // the thread already waits for an earlier deadline
  }
  cv_.notify_one();
  return true;
}

void TimerThread::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    pending_.clear();
  }
  cv_.notify_one();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

std::size_t TimerThread::pending() const {
  std::lock_guard lock(mu_);
  return pending_.size();
}

void TimerThread::run() {
  std::unique_lock lock(mu_);
  // Ends when stop() sets stopping_; each pass either runs one due callback or sleeps until the
  // earliest deadline (or a new earlier one, or stop()).
  while (!stopping_) {
    if (pending_.empty()) {
      cv_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      continue;
    }
    const Clock::time_point due = pending_.begin()->first;
    if (Clock::now() < due) {
      cv_.wait_until(lock, due);
      continue;
    }
    std::function<void()> callback = std::move(pending_.begin()->second);
    pending_.erase(pending_.begin());
    lock.unlock();
    callback();  // outside the lock: it may schedule() again
    lock.lock();
  }
}

}  // namespace raftlog::server
