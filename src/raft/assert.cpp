#include "raft/assert.h"

#include <cstdio>
#include <cstdlib>

namespace raftlog::raft::detail {

void assertion_failed(const char* condition, const char* message, const char* file, int line) {
  std::fprintf(stderr, "raft invariant violated at %s:%d: %s (%s)\n", file, line, message,
               condition);
  std::fflush(stderr);
  std::abort();
}

}  // namespace raftlog::raft::detail
