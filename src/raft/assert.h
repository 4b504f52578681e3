// Always-on invariant checks for the Raft core. Unlike <cassert> these stay active in release builds:
// a violated Raft invariant means the cluster may lose or fork data, so stopping is the only safe move.
#pragma once

namespace raftlog::raft::detail {

[[noreturn]] void assertion_failed(const char* condition, const char* message, const char* file,
                                   int line);

}  // namespace raftlog::raft::detail

#define RAFT_ASSERT(condition, message)                                                     \
  do {                                                                                      \
    if (!(condition)) {                                                                     \
      ::raftlog::raft::detail::assertion_failed(#condition, (message), __FILE__, __LINE__); \
    }                                                                                       \
  } while (false)
