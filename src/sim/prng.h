// The simulator's only source of randomness: a xoshiro256** generator seeded through splitmix64.
//
// Implemented here rather than taken from <random> because std::uniform_int_distribution and friends
// are implementation-defined: the same seed would give different runs on different standard libraries,
// and a seed must name exactly one run everywhere.
#pragma once

#include <cstdint>

namespace raftlog::sim {

class Prng {
 public:
  explicit Prng(std::uint64_t seed);

  // Uniform 64-bit value.
  std::uint64_t next_u64();
  // Uniform in [0, bound); bound must be > 0. Unbiased (rejection sampling).
  std::uint64_t below(std::uint64_t bound);
  // Uniform in [low, high] inclusive; low <= high.
  std::uint64_t between(std::uint64_t low, std::uint64_t high);
  // True with probability per_million / 1,000,000.
  bool chance_per_million(std::uint32_t per_million);

  // A fresh, independent seed (for the cores' own PRNGs), derived deterministically from this stream.
  std::uint64_t derive_seed();

 private:
  std::uint64_t state_[4];
};

// splitmix64 step: exposed for seeding and tests.
std::uint64_t splitmix64(std::uint64_t& state);

}  // namespace raftlog::sim
