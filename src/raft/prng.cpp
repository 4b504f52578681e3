#include "raft/prng.h"

#include "raft/assert.h"

namespace raftlog::raft {

CorePrng::CorePrng(std::uint64_t seed, std::uint64_t node_id)
    // Mixing the id in keeps nodes sharing one Config::random_seed from drawing identical timeouts.
    : state_(seed ^ (node_id * 0x9E3779B97F4A7C15ull)) {}

std::uint64_t CorePrng::next_u64() {
  state_ += 0x9E3779B97F4A7C15ull;
  std::uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::uint64_t CorePrng::below(std::uint64_t bound) {
  RAFT_ASSERT(bound > 0, "CorePrng::below needs a positive bound");
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % bound;  // values >= limit would bias the modulo
  for (int attempt = 0; attempt < 64; ++attempt) {             // bounded: each try fails with p < 1/2
    const std::uint64_t value = next_u64();
    if (value < limit) return value % bound;
  }
  return next_u64() % bound;  // 2^-64 odds of reaching here; a negligible bias beats an unbounded loop
}

}  // namespace raftlog::raft
