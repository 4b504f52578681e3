// Always-on invariant checks for the server layer (active in release builds, like RAFT_ASSERT): a
// broken invariant in the node means replicated data may be at risk, so stopping is the safe move.
#pragma once

#include <cstdio>
#include <cstdlib>

#define RAFTLOG_CHECK(condition, message)                                                       \
  do {                                                                                          \
    if (!(condition)) {                                                                         \
      std::fprintf(stderr, "%s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #condition, \
                   (message));                                                                  \
      std::abort();                                                                             \
    }                                                                                           \
  } while (false)
