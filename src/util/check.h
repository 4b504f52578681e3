// Always-on invariant and precondition checks (active in release builds, like RAFT_ASSERT) for the
// server, the store and the util library: a broken invariant in the node or in the layer that owns
// the on-disk format means replicated or durable data may be at risk, and a broken precondition (a
// zero PRNG bound) would otherwise be undefined behaviour, so stopping is the safe move. Only for
// programmer errors: input from disk, network or command line is validated and refused with an
// error, never checked with this.
#pragma once

#include <cstdio>
#include <cstdlib>

#define RAFTLOG_CHECK(condition, message)                                                    \
  do {                                                                                       \
    if (!(condition)) {                                                                      \
      std::fprintf(stderr, "%s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #condition, \
                   (message));                                                               \
      std::abort();                                                                          \
    }                                                                                        \
  } while (false)
