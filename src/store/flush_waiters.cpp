#include "store/flush_waiters.h"

namespace raftlog::store {

void FlushWaiters::wait(std::uint64_t index, const std::atomic<std::uint64_t>& flushed_index) {
  for (;;) {
    // Read the epoch BEFORE the condition (all seq_cst): if the condition still looks false, a
    // releaser that made it true has not bumped the epoch yet, so epoch_.wait(seen) returns at once
    // (the futex compares the value in the kernel). No wake-up can be lost.
    const std::uint32_t seen = epoch_.load();
    if (released_all_.load() || flushed_index.load() >= index) return;
    sleeping_.fetch_add(1);
    epoch_.wait(seen);
    sleeping_.fetch_sub(1);
  }
}

void FlushWaiters::flushed_index_advanced() {
  epoch_.fetch_add(1);
  epoch_.notify_all();
}

void FlushWaiters::release_all() {
  released_all_.store(true);
  flushed_index_advanced();  // the same wake-up; every waiter then sees released_all_
}

}  // namespace raftlog::store
