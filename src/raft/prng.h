// The core's private, deterministic PRNG (splitmix64). It only randomizes election timeouts, so quality
// needs are modest; what matters is that the same (random_seed, node id) always gives the same stream on
// every platform, which <random> distributions do not promise.
#pragma once

#include <cstdint>

namespace raftlog::raft {

class CorePrng {
 public:
  CorePrng(std::uint64_t seed, std::uint64_t node_id);
  std::uint64_t next_u64();
  // Uniform in [0, bound); bound > 0. Rejection sampling keeps it unbiased.
  std::uint64_t below(std::uint64_t bound);

 private:
  std::uint64_t state_;
};

}  // namespace raftlog::raft
