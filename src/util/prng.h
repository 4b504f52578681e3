// Deterministic pseudo-random numbers: the simulator's only source of randomness and the Raft core's
// election-timeout jitter.
//
// Implemented here rather than taken from <random> because std::uniform_int_distribution and friends
// are implementation-defined: the same seed would give different runs on different standard libraries,
// and a seed must name exactly one run everywhere.
//
// One set of uniform draws (BasicPrng) over two bit generators, because both streams are pinned:
// - Prng (xoshiro256** seeded through splitmix64): the simulator's generator; a seed names one run.
// - SplitMix64Prng (plain splitmix64): the Raft core's generator; the same (random_seed, node id)
//   gives the same election timeouts as before the two copies were merged, so a simulator seed still
//   replays the same trace.
#pragma once

#include <cstdint>

#include "util/check.h"

namespace raftlog::util {

// One splitmix64 step (Vigna's reference generator): advances `state` and returns the next output.
std::uint64_t splitmix64(std::uint64_t& state);

// xoshiro256** with its four state words filled by splitmix64 from the seed.
class Xoshiro256Bits {
 public:
  explicit Xoshiro256Bits(std::uint64_t seed);
  std::uint64_t next_u64();

 private:
  std::uint64_t state_[4];
};

// splitmix64 used directly as a generator: a single word of state, the seed itself.
class SplitMix64Bits {
 public:
  explicit SplitMix64Bits(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next_u64() { return splitmix64(state_); }

 private:
  std::uint64_t state_;
};

// Uniform draws over a bit generator `Bits` (anything with next_u64()).
template <typename Bits>
class BasicPrng {
 public:
  explicit BasicPrng(std::uint64_t seed) : bits_(seed) {}

  // Uniform 64-bit value.
  std::uint64_t next_u64() { return bits_.next_u64(); }

  // Uniform in [0, bound); bound must be > 0. Unbiased (rejection sampling).
  std::uint64_t below(std::uint64_t bound) {
    RAFTLOG_CHECK(bound > 0, "BasicPrng::below needs a positive bound");
    // Reject the top sliver of the range that would make `value % bound` favour small results.
    const std::uint64_t limit = UINT64_MAX - (UINT64_MAX % bound);
    // Each draw is rejected with probability < 1/2, so 64 draws all failing is < 2^-64: a bound, not a
    // hope; the fallback's negligible bias beats an unbounded loop.
    for (int attempt = 0; attempt < 64; ++attempt) {
      const std::uint64_t value = next_u64();
      if (value < limit) return value % bound;
    }
    return next_u64() % bound;
  }

  // Uniform in [low, high] inclusive; low <= high.
  std::uint64_t between(std::uint64_t low, std::uint64_t high) {
    RAFTLOG_CHECK(low <= high, "BasicPrng::between needs low <= high");
    if (high - low == UINT64_MAX) return next_u64();
    return low + below(high - low + 1);
  }

  // True with probability per_million / 1,000,000.
  bool chance_per_million(std::uint32_t per_million) {
    RAFTLOG_CHECK(per_million <= 1'000'000,
                  "BasicPrng::chance_per_million takes at most 1,000,000");
    return below(1'000'000) < per_million;
  }

  // A fresh, independent seed (for another generator), derived deterministically from this stream.
  std::uint64_t derive_seed() {
    std::uint64_t mixer = next_u64();
    return splitmix64(mixer);
  }

 private:
  Bits bits_;
};

using Prng = BasicPrng<Xoshiro256Bits>;
using SplitMix64Prng = BasicPrng<SplitMix64Bits>;

}  // namespace raftlog::util
