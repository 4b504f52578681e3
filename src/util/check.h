// Always-on invariant and precondition checks (active in release builds, like RAFT_ASSERT) for the
// server and the util library: a broken invariant in the node means replicated data may be at risk,
// and a broken precondition (a zero PRNG bound) would otherwise be undefined behaviour, so stopping
// is the safe move.
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
