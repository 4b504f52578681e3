#include "store/flush_waiters.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <cstdint>

#include "util/check.h"
#include "util/thread_name.h"

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

// Sleeps while `word` still holds `expected` (the kernel compares atomically with the wake-ups),
// until a wake-up whose bitset shares a bit with `bits`. Spurious returns (signals, EAGAIN) are
// fine: every caller re-checks its condition in a loop.
void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected, std::uint32_t bits) {
  syscall(SYS_futex, futex_word(word), FUTEX_WAIT_BITSET_PRIVATE, expected, nullptr, nullptr, bits);
}

// Wakes up to `count` sleepers whose bitset shares a bit with `bits` (FUTEX_BITSET_MATCH_ANY: all).
void futex_wake(std::atomic<std::uint32_t>& word, int count, std::uint32_t bits) {
  syscall(SYS_futex, futex_word(word), FUTEX_WAKE_BITSET_PRIVATE, count, nullptr, nullptr, bits);
}

}  // namespace

void FlushWaiters::wait(std::uint64_t index, const std::atomic<std::uint64_t>& flushed_index) {
  for (;;) {
    // Read the epoch BEFORE the cycle counters and the condition (all seq_cst): if the condition
    // still looks false, a cycle that made it true has not bumped the epoch yet, so futex_wait(seen)
    // returns at once (the futex compares the value in the kernel). No wake-up can be lost.
    // sleeping_ is raised before the futex call: a waker that saw it zero bumped the epoch before,
    // so the wait returns at once too (see wake_completed_cycles()).
    const std::uint32_t seen = epoch_.load();
    if (released_all_.load()) return;
    // The guess BEFORE the flushed index: if the index still looks unflushed, the cycle that will
    // flush it had not stored its flushed index when the counters were read, so it is not counted as
    // completed there and the guess cannot be later than it. (Guessing after the flushed read could
    // see that cycle completed and guess the next one, then sleep through its wake-up.)
    const std::uint64_t cycle = covering_cycle(index);
    if (flushed_index.load() >= index) return;
    sleep(seen, cycle);
  }
}

void FlushWaiters::sleep(std::uint32_t seen, std::uint64_t cycle) {
  sleeping_.fetch_add(1);
  sleeps_.fetch_add(1, std::memory_order_relaxed);
  futex_wait(epoch_, seen, 1U << (cycle % kCycleBits));
  sleeping_.fetch_sub(1);
}

std::uint64_t FlushWaiters::covering_cycle_of_next_append() const {
  // Such an entry's index will be above the target of any cycle that has already read its target,
  // which is covering_cycle() of an index above every target.
  return covering_cycle(UINT64_MAX);
}

std::uint64_t FlushWaiters::covering_cycle(std::uint64_t index) const {
  // Never later than the cycle that really covers `index` (the caller's entry is already appended):
  // - no cycle in flight: the next one begins after this read, so it reads a last index >= index;
  // - a cycle in flight whose target is known and below `index`: it cannot cover it, the next can;
  // - anything else (target not yet published, or a cycle began or ended during these reads): the
  //   earliest candidate. A wrong early guess costs one spurious wake-up, never a missed one.
  const std::uint64_t completed = cycles_completed_.load();
  const std::uint64_t begun = cycles_begun_.load();
  const std::uint64_t target = cycle_target_.load();
  const bool same_cycle = cycles_begun_.load() == begun;
  if (same_cycle && begun == completed + 1 && target != 0 && target < index) return completed + 2;
  return completed + 1;
}

void FlushWaiters::begin_cycle() {
  // The target is cleared before the cycle counts as begun: a waiter that sees the new cycle then
  // reads either "unknown" or this cycle's own target, never the previous cycle's.
  cycle_target_.store(0);
  const std::uint64_t begun = cycles_begun_.fetch_add(1) + 1;
  RAFTLOG_CHECK(begun == cycles_completed_.load() + 1, "flush cycles overlap");
}

void FlushWaiters::set_cycle_target(std::uint64_t target) { cycle_target_.store(target); }

void FlushWaiters::end_cycle() {
  RAFTLOG_CHECK(cycles_begun_.load() == cycles_completed_.load() + 1,
                "end_cycle without begin_cycle");
  cycles_completed_.fetch_add(1);
  hand_over_or_wake();
}

FlushWaiters::~FlushWaiters() { stop_waker(); }

void FlushWaiters::start_waker() {
  if (waker_.joinable()) return;
  waker_stop_.store(false);
  waker_running_.store(true);
  waker_ = std::thread([this] {
    util::name_this_thread("flush-waker");
    waker_main();
  });
}

void FlushWaiters::stop_waker() {
  if (!waker_.joinable()) return;
  waker_stop_.store(true);
  wake_requests_.fetch_add(1);
  futex_wake(wake_requests_, 1, FUTEX_BITSET_MATCH_ANY);
  waker_.join();
  waker_running_.store(false);
  // A caller that saw waker_running_ true may have handed its wake-up over after the waker's last
  // round; its cycle completed before that, so this round covers it.
  wake_completed_cycles();
}

void FlushWaiters::waker_main() {
  // Bounded: each pass either wakes once for the requests seen or exits; it sleeps in between.
  for (;;) {
    const std::uint32_t seen = wake_requests_.load();
    if (waker_stop_.load()) return;
    wake_completed_cycles();
    futex_wait(wake_requests_, seen, FUTEX_BITSET_MATCH_ANY);  // returns at once on a newer request
  }
}

void FlushWaiters::hand_over_or_wake() {
  // A few sleepers are cheaper to wake here than to hand over: the hand-over adds a thread switch
  // to every sync append's latency (one writer: 10-20 % fewer appends per second, run 8).
  if (waker_running_.load() && sleeping_.load() > kMaxDirectWakeSleepers) {
    wake_requests_.fetch_add(1);
    futex_wake(wake_requests_, 1, FUTEX_BITSET_MATCH_ANY);
    return;
  }
  wake_completed_cycles();
}

void FlushWaiters::wake_completed_cycles() {
  // Read the completed count BEFORE the epoch bump: a cycle completing after this read bumps the
  // epoch again through its own end_cycle(), so its sleepers are woken by that round.
  const std::uint64_t completed = cycles_completed_.load();
  // Claim the cycles (woken_through, completed]; concurrent callers (the flusher's direct path and
  // the waker) split the range between them, and the claim never moves backwards.
  std::uint64_t woken_through = woken_through_cycle_.load();
  while (woken_through < completed &&
         !woken_through_cycle_.compare_exchange_weak(woken_through, completed)) {
  }
  epoch_.fetch_add(1);
  // No system call when nobody sleeps: a waiter that raises sleeping_ after this load sees the new
  // epoch in its futex_wait and returns at once.
  if (woken_through >= completed || sleeping_.load() == 0) return;
  std::uint32_t bits = 0;
  if (completed - woken_through >= kCycleBits) {
    bits = FUTEX_BITSET_MATCH_ANY;
  } else {
    for (std::uint64_t cycle = woken_through + 1; cycle <= completed; ++cycle)
      bits |= 1U << (cycle % kCycleBits);
  }
  wake_rounds_.fetch_add(1);
  futex_wake(epoch_, INT_MAX, bits);
}

void FlushWaiters::wake_all() {
  epoch_.fetch_add(1);
  if (sleeping_.load() == 0) return;
  wake_rounds_.fetch_add(1);
  futex_wake(epoch_, INT_MAX, FUTEX_BITSET_MATCH_ANY);
}

void FlushWaiters::release_all() {
  released_all_.store(true);
  wake_all();  // every waiter then sees released_all_
}

}  // namespace raftlog::store
