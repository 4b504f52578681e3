// A trim answers before its deletion has run (its TOPICSTATE and SNAPSHOT.next are written off the
// loop, the log's flush is the store flusher's, the deletion spreads over loop rounds:
// docs/design.md, "Known limits"). Tests that check what a whole trim did ask again, as a client
// or the loop's continuation would, until no trim is under way.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

#include "replica/replica.h"

namespace raftlog::replica::testing {

// Between two calls on a store with its own flusher thread: a moment for it to flush.
inline void let_the_flusher_run() { std::this_thread::sleep_for(std::chrono::milliseconds(2)); }

// trim(before) again until no trim is under way (Replica::trim_in_progress) or a call fails: that
// call's result. `between` runs after each call that left work (let_the_flusher_run, or a stepped
// store's flush cycle). Bounded: 500 calls and 5 s.
inline TrimResult trim_to_end(Replica& replica, std::uint64_t before,
                              const std::function<void()>& between = let_the_flusher_run) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  TrimResult result = replica.trim(before, "test:");
  for (int call = 1; call < 500 && result.error.ok() && replica.trim_in_progress() &&
                     std::chrono::steady_clock::now() < deadline;
       ++call) {
    between();
    result = replica.trim(before, "test:");
  }
  if (result.error.ok() && replica.trim_in_progress()) {
    ADD_FAILURE() << "the trim before " << before << " was still under way after its bound";
  }
  return result;
}

}  // namespace raftlog::replica::testing
