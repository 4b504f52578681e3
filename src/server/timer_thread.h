// TimerThread: one thread that runs short callbacks at given times. The peer transport uses a
// single one for every peer's reconnect backoff, so an outage costs no thread per peer and the
// steady state (every peer connected) costs a thread that sleeps, and a second one, with callbacks
// due at once, to encode large batches and cut snapshot continuations off the Raft loop.
//
// Bounds: at most max_pending callbacks are scheduled at once (schedule() refuses more; the
// transport schedules at most one per lane of each peer on each, and on the encoder one more per
// append lane: a continuation's cut). Callbacks run one at a time on the timer thread, in
// deadline order, without the timer's lock held (so they may call schedule()); they must be short,
// since the next deadline waits for them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace raftlog::server {

class TimerThread {
 public:
  using Clock = std::chrono::steady_clock;

  // `thread_name`: what the thread is called (util/thread_name.h), at most 15 characters.
  TimerThread(const char* thread_name, std::size_t max_pending);
  ~TimerThread();  // calls stop()
  TimerThread(const TimerThread&) = delete;
  TimerThread& operator=(const TimerThread&) = delete;

  // Starts the thread. Call once; schedule() before start() queues the callback.
  void start();
  // Runs `callback` on the timer thread at `when` (or soon after). Returns false, and never runs it,
  // when the timer is stopped or max_pending callbacks are already waiting.
  bool schedule(Clock::time_point when, std::function<void()> callback);
  // Drops the callbacks not yet run, waits for a running one to return and joins the thread. After
  // stop() returns no callback runs again. Idempotent; must not be called from a callback.
  void stop();

  std::size_t pending() const;

 private:
  void run();

  const char* const thread_name_;
  const std::size_t max_pending_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<Clock::time_point, std::function<void()>> pending_;  // bounded by max_pending_
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace raftlog::server
