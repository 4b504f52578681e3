// FlushWaiters: where threads in CommitLog::wait_flushed() sleep until the flushed index reaches
// the index they wait for.
//
// Why not a condition variable: a condition variable needs a mutex, and every waiter a flush wakes
// must re-acquire it before it can return. With 64 sync appenders on 2 cores, the flusher's
// notify_all() started a convoy through that one mutex after every flush, and the flusher itself
// queued behind it; the convoy, not the fdatasync, set the group-commit rate (docs/benchmarks.md,
// "store"). Here a flush bumps a 32-bit epoch and wakes its sleepers with one futex call
// (std::atomic::notify_all); each woken thread re-checks the flushed index without taking any lock.
// A waiter whose entry the flush did not cover goes back to sleep on the new epoch.
//
// Bound: no queue is kept; the kernel's futex wait list holds one record per sleeping thread.
#pragma once

#include <atomic>
#include <cstdint>

namespace raftlog::store {

class FlushWaiters {
 public:
  // Returns once flushed_index >= index, or once release_all() was called (now or earlier); the
  // caller re-reads its own state to tell which. Whoever advances `flushed_index` must store it
  // before calling flushed_index_advanced().
  void wait(std::uint64_t index, const std::atomic<std::uint64_t>& flushed_index);
  // Wakes the sleepers after the flushed index advanced (those not yet covered sleep again).
  void flushed_index_advanced();
  // Wakes every waiter, and makes every later wait() return at once (the log failed or closed).
  void release_all();

  std::uint32_t sleeping() const { return sleeping_.load(); }  // for tests and diagnostics

 private:
  // Wraps around; only "changed since I looked" matters, and a waiter looks again after every wake.
  std::atomic<std::uint32_t> epoch_{0};
  std::atomic<bool> released_all_{false};
  std::atomic<std::uint32_t> sleeping_{0};
};

}  // namespace raftlog::store
