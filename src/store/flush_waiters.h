// FlushWaiters: where threads in CommitLog::wait_flushed() sleep until the flushed index reaches
// the index they wait for.
//
// Why not a condition variable: a condition variable needs a mutex, and every waiter a flush wakes
// must re-acquire it before it can return. With 64 sync appenders on 2 cores, the flusher's
// notify_all() started a convoy through that one mutex after every flush, and the flusher itself
// queued behind it; the convoy, not the fdatasync, set the group-commit rate (docs/benchmarks.md,
// "store"). Here a flush bumps a 32-bit epoch and wakes its sleepers with one futex call
// (FUTEX_WAKE; not std::atomic::wait/notify, whose spinning and sched_yield() calls cost more than
// they save here, see flush_waiters.cpp); each woken thread re-checks the flushed index without
// taking any lock.
// A waiter whose entry the flush did not cover goes back to sleep on the new epoch.
//
// The waker thread (start_waker()), used when more than kMaxDirectWakeSleepers threads sleep: waking
// 64 sleepers is 64 wake-ups in the kernel, done by the flusher before it could start its next write
// and sync. With a waker, flushed_index_advanced() only hands the wake-up over (one futex wake;
// requests made while the waker is busy coalesce) and the flusher goes on with its next cycle; the
// waker wakes the sleepers while the flusher waits for the disk (docs/benchmarks.md, run 8).
//
// Bound: no queue is kept; the kernel's futex wait list holds one record per sleeping thread, and
// wake-up requests only bump a counter (the waker coalesces every request made while it was busy).
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

namespace raftlog::store {

class FlushWaiters {
 public:
  FlushWaiters() = default;
  ~FlushWaiters();  // stops the waker if still running
  FlushWaiters(const FlushWaiters&) = delete;
  FlushWaiters& operator=(const FlushWaiters&) = delete;

  // Starts the waker thread (at most once). Until stop_waker(), flushed_index_advanced() hands the
  // wake-up to it instead of waking the sleepers itself.
  void start_waker();
  // Stops and joins the waker, then wakes the sleepers once more itself (so that no wake-up handed
  // over concurrently is lost). Idempotent. Later calls wake directly.
  void stop_waker();

  // Returns once flushed_index >= index, or once release_all() was called (now or earlier); the
  // caller re-reads its own state to tell which. Whoever advances `flushed_index` must store it
  // before calling flushed_index_advanced().
  void wait(std::uint64_t index, const std::atomic<std::uint64_t>& flushed_index);
  // Wakes the sleepers after the flushed index advanced (those not yet covered sleep again), through
  // the waker when it runs.
  void flushed_index_advanced();
  // Wakes every waiter, and makes every later wait() return at once (the log failed or closed).
  void release_all();

  std::uint32_t sleeping() const { return sleeping_.load(); }  // for tests and diagnostics
  // Times the sleepers were woken (one futex wake-all each), for tests and diagnostics.
  std::uint64_t wake_rounds() const { return wake_rounds_.load(); }

 private:
  // With at most this many sleepers flushed_index_advanced() wakes them itself even with a waker.
  static constexpr std::uint32_t kMaxDirectWakeSleepers = 4;
  void wake_sleepers();  // bumps the epoch and wakes every sleeper
  void waker_main();

  // Wraps around; only "changed since I looked" matters, and a waiter looks again after every wake.
  std::atomic<std::uint32_t> epoch_{0};
  std::atomic<bool> released_all_{false};
  std::atomic<std::uint32_t> sleeping_{0};
  std::atomic<std::uint64_t> wake_rounds_{0};

  // Wake-up requests for the waker; wraps around (only "changed since I looked" matters).
  std::atomic<std::uint32_t> wake_requests_{0};
  std::atomic<bool> waker_running_{false};
  std::atomic<bool> waker_stop_{false};
  std::thread waker_;  // started and stopped by the log's owner thread (open / close)
};

}  // namespace raftlog::store
