#include "store/flush_waiters.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

namespace raftlog::store {
namespace {

// Plain futex calls instead of std::atomic::wait/notify: libstdc++'s wait first spins and then calls
// sched_yield() four times before it sleeps. With 64 sync appenders on 2 cores every flush turned
// into a storm of yields: the writers spent most of their time runnable, queued behind each other
// and behind the flusher (docs/benchmarks.md, run 8). A std::atomic<std::uint32_t> has the size and
// representation of a std::uint32_t (lock-free), which is what the futex word must be.
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

std::uint32_t* futex_word(std::atomic<std::uint32_t>& word) {
  return reinterpret_cast<std::uint32_t*>(&word);
}

// Sleeps while `word` still holds `expected` (the kernel compares atomically with the wake-ups).
// Spurious returns (signals, EAGAIN) are fine: every caller re-checks its condition in a loop.
void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected) {
  syscall(SYS_futex, futex_word(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void futex_wake(std::atomic<std::uint32_t>& word, int count) {
  syscall(SYS_futex, futex_word(word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr, 0);
}

}  // namespace

void FlushWaiters::wait(std::uint64_t index, const std::atomic<std::uint64_t>& flushed_index) {
  for (;;) {
    // Read the epoch BEFORE the condition (all seq_cst): if the condition still looks false, a
    // releaser that made it true has not bumped the epoch yet, so futex_wait(seen) returns at once
    // (the futex compares the value in the kernel). No wake-up can be lost. sleeping_ is raised
    // before the futex call: a releaser that saw it zero bumped the epoch before, so the wait
    // returns at once too (see wake_sleepers()).
    const std::uint32_t seen = epoch_.load();
    if (released_all_.load() || flushed_index.load() >= index) return;
    sleeping_.fetch_add(1);
    futex_wait(epoch_, seen);
    sleeping_.fetch_sub(1);
  }
}

FlushWaiters::~FlushWaiters() { stop_waker(); }

void FlushWaiters::start_waker() {
  if (waker_.joinable()) return;
  waker_stop_.store(false);
  waker_running_.store(true);
  waker_ = std::thread([this] { waker_main(); });
}

void FlushWaiters::stop_waker() {
  if (!waker_.joinable()) return;
  waker_stop_.store(true);
  wake_requests_.fetch_add(1);
  futex_wake(wake_requests_, 1);
  waker_.join();
  waker_running_.store(false);
  // A caller that saw waker_running_ true may have handed its wake-up over after the waker's last
  // round; its flushed index was stored before that, so this round covers it.
  wake_sleepers();
}

void FlushWaiters::waker_main() {
  // Bounded: each pass either wakes once for the requests seen or exits; it sleeps in between.
  for (;;) {
    const std::uint32_t seen = wake_requests_.load();
    if (waker_stop_.load()) return;
    wake_sleepers();
    futex_wait(wake_requests_, seen);  // returns at once if a request came in since `seen`
  }
}

void FlushWaiters::flushed_index_advanced() {
  // A few sleepers are cheaper to wake here than to hand over: the hand-over adds a thread switch
  // to every sync append's latency (one writer: 10-20 % fewer appends per second, run 8).
  if (waker_running_.load() && sleeping_.load() > kMaxDirectWakeSleepers) {
    wake_requests_.fetch_add(1);
    futex_wake(wake_requests_, 1);
    return;
  }
  wake_sleepers();
}

void FlushWaiters::wake_sleepers() {
  epoch_.fetch_add(1);
  // No system call when nobody sleeps: a waiter that raises sleeping_ after this load sees the new
  // epoch in its futex_wait and returns at once.
  if (sleeping_.load() == 0) return;
  wake_rounds_.fetch_add(1);
  futex_wake(epoch_, INT_MAX);
}

void FlushWaiters::release_all() {
  released_all_.store(true);
  flushed_index_advanced();  // the same wake-up; every waiter then sees released_all_
}

}  // namespace raftlog::store
