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
//
// Only the waiters a flush covers are woken. Each waiter computes the flush cycle that can first
// cover its index (the cycle in flight if its target, published at its start, reaches the index,
// otherwise the next one) and sleeps with that cycle's bit (cycle % 32) in a FUTEX_WAIT_BITSET; a
// completed cycle wakes only its bit. Before, every flush woke every sleeper, and with 64 appenders
// about half of them, appended while the sync ran, went straight back to sleep: two thread switches
// per append instead of one (docs/benchmarks.md, run 12). A waiter that guessed too early (the
// target was not yet published) is woken by that cycle, finds itself uncovered and sleeps again
// with the next cycle's bit; it never guesses too late, so no wake-up is missed.
//
// The waker thread (start_waker()), used when more than kMaxDirectWakeSleepers threads sleep: waking
// 64 sleepers is 64 wake-ups in the kernel, done by the flusher before it could start its next write
// and sync. With a waker, end_cycle() only hands the wake-up over (one futex wake;
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

  // Starts the waker thread (at most once). Until stop_waker(), end_cycle() hands the
  // wake-up to it instead of waking the sleepers itself.
  void start_waker();
  // Stops and joins the waker, then wakes the sleepers once more itself (so that no wake-up handed
  // over concurrently is lost). Idempotent. Later calls wake directly.
  void stop_waker();

  // Returns once flushed_index >= index, or once release_all() was called (now or earlier); the
  // caller re-reads its own state to tell which.
  void wait(std::uint64_t index, const std::atomic<std::uint64_t>& flushed_index);

  // The flush cycle protocol; cycles never overlap (the caller serialises them). Every cycle that
  // begins must end, also when it flushes nothing or fails: end_cycle() is what wakes its waiters.
  // begin_cycle() comes BEFORE the cycle reads the last index it will flush, so that a waiter that
  // sees no cycle in flight knows the next one will cover it.
  void begin_cycle();
  // The last index the cycle in flight will make durable (its snapshot of the last index).
  void set_cycle_target(std::uint64_t target);
  // After the cycle stored its new flushed index: wakes the waiters it covered, through the waker
  // when it runs.
  void end_cycle();
  // Wakes every waiter, and makes every later wait() return at once (the log failed or closed).
  void release_all();
  bool released() const { return released_all_.load(); }

  // The pieces wait() is made of, for callers that wait for more than an index (the append group:
  // a member waits for its batch to be appended and then made durable). In this order: read
  // epoch(), then compute the cycle (covering_cycle*), then check the condition; if it is false,
  // sleep(seen, cycle); re-check after every return. Computing the cycle after the condition could
  // guess one cycle too late (see wait()).
  std::uint32_t epoch() const { return epoch_.load(); }
  void sleep(std::uint32_t seen, std::uint64_t cycle);
  // Wakes every sleeper once (their state changed outside the flush cycle, e.g. an append failed).
  void wake_all();

  std::uint32_t sleeping() const { return sleeping_.load(); }  // for tests and diagnostics
  // Times a waiter went to sleep (futex wait calls), for tests and diagnostics.
  std::uint64_t sleeps() const { return sleeps_.load(); }
  // The first cycle that can make `index` durable, from the cycle counters (see the class comment).
  // Used by wait() and by the append group's members (commit_log_group.cpp); public for them and for
  // tests.
  std::uint64_t covering_cycle(std::uint64_t index) const;
  // The first cycle that can make durable an entry that becomes visible in the log (its last index)
  // only after this call: the cycle after one in flight that already read its target, otherwise the
  // next cycle to begin.
  std::uint64_t covering_cycle_of_next_append() const;
  // Times sleepers were woken (one futex wake call each), for tests and diagnostics.
  std::uint64_t wake_rounds() const { return wake_rounds_.load(); }

 private:
  // With at most this many sleepers end_cycle() wakes them itself even with a waker.
  static constexpr std::uint32_t kMaxDirectWakeSleepers = 4;
  static constexpr std::uint32_t kCycleBits = 32;  // a futex bitset has 32 bits
  void wake_completed_cycles();  // bumps the epoch, wakes the sleepers of cycles not yet woken
  void hand_over_or_wake();
  void waker_main();

  // Cycle counters: cycles_begun_ is cycles_completed_ or one more (a cycle in flight). 64 bits:
  // they never wrap. cycle_target_ is 0 (not yet known) from before a cycle begins until it
  // published its target.
  std::atomic<std::uint64_t> cycles_begun_{0};
  std::atomic<std::uint64_t> cycles_completed_{0};
  std::atomic<std::uint64_t> cycle_target_{0};
  std::atomic<std::uint64_t> woken_through_cycle_{
      0};  // sleepers of cycles up to this one were woken

  // Wraps around; only "changed since I looked" matters, and a waiter looks again after every wake.
  std::atomic<std::uint32_t> epoch_{0};
  std::atomic<bool> released_all_{false};
  std::atomic<std::uint32_t> sleeping_{0};
  std::atomic<std::uint64_t> wake_rounds_{0};
  std::atomic<std::uint64_t> sleeps_{0};

  // Wake-up requests for the waker; wraps around (only "changed since I looked" matters).
  std::atomic<std::uint32_t> wake_requests_{0};
  std::atomic<bool> waker_running_{false};
  std::atomic<bool> waker_stop_{false};
  std::thread waker_;  // started and stopped by the log's owner thread (open / close)
};

}  // namespace raftlog::store
